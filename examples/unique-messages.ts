import { strict as assert } from 'node:assert';
import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { Broker, defineTable, Outcome } from 'tablequeue';

// A lease table with a dedupe key: createTableSql adds the column and its unique index.
const jobs = defineTable({
  table: 'jobs',
  id: 'id',
  group: 'queue',
  retryAfter: 'retry_after',
  lockedUntil: 'locked_until',
  headers: 'headers',
  payload: 'payload',
  dedupeKey: 'dedupe_key',
});

const file = join(tmpdir(), `tablequeue-unique-${process.pid}.db`);
const db = new Database(file);
for (const statement of jobs.createTableSql('sqlite')) db.exec(statement);
db.close();

const invoices = jobs.queue<{ customer: number }>('invoices');
const reindex = jobs.queue<{ doc: string; version: number }>('reindex');
const handled: string[] = [];
let reindexed = (): void => undefined;
const reindexDone = new Promise<void>((resolve) => (reindexed = resolve));

const broker = new Broker({ database: `sqlite:${file}` });
broker.subscribe(reindex, (message) => {
  handled.push(`reindex ${message.payload.doc} v${message.payload.version}`);
  reindexed();
  return Outcome.ack();
});
await broker.start();

// One invoice per customer while it waits or runs: the second publish writes nothing.
const first = await broker.publish(invoices, { customer: 42 }, { dedupeKey: 'invoice:42' });
const again = await broker.publish(invoices, { customer: 42 }, { dedupeKey: 'invoice:42' });
assert.equal(first.status, 'published');
assert.deepEqual(again, { status: 'duplicate', id: first.id });
console.log(`invoice:42 published as ${first.id}; the second publish was a duplicate of it`);

// Debounce: a burst of edits ends as one message with the last version, due after the burst.
for (let version = 1; version <= 5; version++) {
  const result = await broker.publish(reindex, { doc: 'readme', version }, { dedupeKey: 'doc:readme', dedupe: 'replace', delayMs: 300 });
  console.log(`reindex v${version}: ${result.status}`);
}
await reindexDone;
assert.deepEqual(handled, ['reindex readme v5']);

// Throttle: one digest per window, even after the first was handled.
const digest = await broker.publish(invoices, { customer: 7 }, { dedupeKey: 'digest:7', dedupeForMs: 60_000 });
const throttled = await broker.publish(invoices, { customer: 7 }, { dedupeKey: 'digest:7', dedupeForMs: 60_000 });
assert.equal(digest.status, 'published');
assert.equal(throttled.status, 'duplicate');
console.log(`digest:7 ${digest.status}, then ${throttled.status} within its minute`);

await broker.stop();
rmSync(file, { force: true });
for (const suffix of ['-wal', '-shm']) rmSync(file + suffix, { force: true });
console.log(`handled: ${handled.join(', ')}`);
