import { strict as assert } from 'node:assert';
import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { Broker, createSchedulesTableSql, defineTable, Outcome, SCHEDULED_AT_HEADER } from 'tablequeue';

// A queue table with a headers column: each tick's message carries its tick's instant there.
const jobs = defineTable({
  table: 'jobs',
  id: 'id',
  group: 'queue',
  retryAfter: 'retry_after',
  lockedUntil: 'locked_until',
  headers: 'headers',
  payload: 'payload',
});

const file = join(tmpdir(), `tablequeue-schedules-${process.pid}.db`);
const db = new Database(file);
for (const statement of jobs.createTableSql('sqlite')) db.exec(statement);
// A broker with schedules creates this table at start if it is missing; a migration can too.
db.exec(createSchedulesTableSql('sqlite'));
db.close();

const heartbeat = jobs.queue<{ check: string }>('heartbeat');
const ticks: string[] = [];
let twoTicks = (): void => undefined;
const done = new Promise<void>((resolve) => (twoTicks = resolve));

// Two replicas of one service declare the same schedule; each tick is still written once.
const replicas = [new Broker({ database: `sqlite:${file}` }), new Broker({ database: `sqlite:${file}` })];
for (const broker of replicas) {
  broker.schedule('every-second', heartbeat, { cron: '* * * * * *', payload: { check: 'database' } });
}
replicas[0]!.subscribe(heartbeat, (message) => {
  const tick = message.headers[SCHEDULED_AT_HEADER];
  assert.ok(tick !== undefined, 'every scheduled message names its tick');
  ticks.push(tick);
  console.log(`tick ${tick}: check ${message.payload.check}`);
  if (ticks.length === 2) twoTicks();
  return Outcome.ack();
});
for (const broker of replicas) await broker.start();
await done;
for (const broker of replicas) await broker.stop();

assert.equal(new Set(ticks).size, ticks.length, 'no tick was written twice');
const fired = replicas.flatMap((broker) => broker.stats().schedules.map((schedule) => schedule.fired));
console.log(`ticks handled: ${ticks.length}; fired by each replica: ${fired.join(' and ')}`);
rmSync(file, { force: true });
for (const suffix of ['-wal', '-shm']) rmSync(file + suffix, { force: true });
