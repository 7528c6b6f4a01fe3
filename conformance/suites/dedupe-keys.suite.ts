import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { setTimeout as delay } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { createDeferred } from '../../src/internal/deferred.js';
import { defineTable, Outcome, SchemaError, UnsupportedError, type Message, type TableDeclaration } from '../../src/index.js';
import { Collector, countRows, createBroker, createTable, formsOf, jobsDeclaration, placeholder, untilStats, type FormUnderTest } from '../fixtures.js';
import type { KeyedPublisherConfig, KeyedPublisherReport } from '../processes/keyed-publisher.js';
import type { SuiteContext } from '../run-conformance.js';
import { openServiceWriters } from './service-pools.js';

const KEYED_PUBLISHER = fileURLToPath(new URL('../processes/keyed-publisher.ts', import.meta.url));

function keyedDeclaration(form: FormUnderTest, options: { mark?: boolean } = {}): TableDeclaration {
  return { ...jobsDeclaration({ form, mark: options.mark }), dedupeKey: 'dedupe_key' };
}

interface KeyRow {
  id: unknown;
  queue: string;
  dedupe_key: string | null;
}

/** Unique messages: every dedupe mode on every form that has it, races across processes, rollbacks. */
export function dedupeKeysSuite(context: SuiteContext): void {
  const { stand } = context;
  const keyRows = () => context.db.query<KeyRow>('SELECT id, queue, dedupe_key FROM jobs ORDER BY id');

  for (const form of formsOf(stand)) {
    describe(`${form} dedupe keys`, () => {
      it('queued-or-running: a second publish while the row waits or runs is a duplicate of it; the ack frees the key', async () => {
        const table = defineTable(keyedDeclaration(form));
        await createTable(stand, context.db, table);
        const queue = table.queue('emails');
        const broker = createBroker(context.db, context.brokers);
        const started = new Collector<Message<unknown>>();
        const finish = createDeferred();
        broker.subscribe(queue, async (message) => {
          started.push(message);
          await finish.promise;
          return Outcome.ack();
        });
        await broker.start();

        const first = await broker.publish(queue, { n: 1 }, { dedupeKey: 'user-42' });
        expect(first.status).toBe('published');
        await started.waitFor(1);
        expect(await broker.publish(queue, { n: 2 }, { dedupeKey: 'user-42' })).toEqual({ status: 'duplicate', id: first.id });
        // Another queue of the same table has keys of its own.
        expect((await broker.publish(table.queue('sms'), { n: 3 }, { dedupeKey: 'user-42' })).status).toBe('published');
        expect(broker.metrics()).toContain('tablequeue_publishes_deduplicated_total{table="jobs",queue="emails",status="duplicate"} 1\n');
        expect(broker.metrics()).toContain('tablequeue_messages_published_total{table="jobs",queue="emails"} 1\n');
        finish.resolve();
        await untilStats(broker, queue, (stats) => stats.acked === 1, 'the first row acked');
        const third = await broker.publish(queue, { n: 4 }, { dedupeKey: 'user-42' });
        expect(third.status).toBe('published');
        expect(third.id).not.toBe(first.id);
        await started.waitFor(2);
        expect((started.items[1]!.payload as { n: number }).n).toBe(4);
      });

      it('keeps the key through a retry and frees it when the row is dead-lettered', async () => {
        const table = defineTable(keyedDeclaration(form));
        await createTable(stand, context.db, table);
        const queue = table.queue('emails');
        const broker = createBroker(context.db, context.brokers);
        const attempts = new Collector<number>();
        const second = createDeferred();
        broker.subscribe(
          queue,
          async (message) => {
            attempts.push(message.attempt);
            if (message.attempt === 2) await second.promise;
            return Outcome.retry();
          },
          { maxAttempts: 2, deadLetter: 'emails.dead' },
        );
        await broker.start();
        const first = await broker.publish(queue, {}, { dedupeKey: 'k' });
        await attempts.waitFor(2);
        expect(await broker.publish(queue, {}, { dedupeKey: 'k' })).toEqual({ status: 'duplicate', id: first.id });
        second.resolve();
        await untilStats(broker, queue, (stats) => stats.deadLettered === 1, 'the row dead-lettered');
        const [dead] = await keyRows();
        expect(dead).toMatchObject({ queue: 'emails.dead', dedupe_key: null });
        // A dead letter never blocks a new message with the key, nor does a second dead letter collide with it.
        const next = await broker.publish(queue, {}, { dedupeKey: 'k' });
        expect(next.status).toBe('published');
        await attempts.waitFor(4);
        await untilStats(broker, queue, (stats) => stats.deadLettered === 2, 'the second row dead-lettered');
        expect((await keyRows()).map((row) => [row.queue, row.dedupe_key])).toEqual([
          ['emails.dead', null],
          ['emails.dead', null],
        ]);
      });

      it('a processed row kept in the table (processedAt) holds no key', async () => {
        const table = defineTable(keyedDeclaration(form, { mark: true }));
        await createTable(stand, context.db, table);
        const queue = table.queue('emails');
        const broker = createBroker(context.db, context.brokers);
        broker.subscribe(queue, () => Outcome.ack());
        await broker.start();
        const first = await broker.publish(queue, {}, { dedupeKey: 'once' });
        await untilStats(broker, queue, (stats) => stats.acked === 1, 'the row acked');
        const again = await broker.publish(queue, {}, { dedupeKey: 'once' });
        expect(again.status).toBe('published');
        await untilStats(broker, queue, (stats) => stats.acked === 2, 'the second row acked');
        expect((await keyRows()).map((row) => [String(row.id), row.dedupe_key])).toEqual([
          [first.id, null],
          [again.id, null],
        ]);
      });

      it('a keyed publish in a transaction that rolls back leaves the key free; one that commits holds it', async () => {
        const table = defineTable(keyedDeclaration(form));
        await createTable(stand, context.db, table);
        const queue = table.queue('emails');
        const broker = createBroker(context.db, context.brokers);
        await broker.start();
        for (const pool of openServiceWriters(stand, context.db)) {
          try {
            const rolledBack = await pool.beginTransaction();
            expect((await broker.publish(queue, {}, { dedupeKey: `tx-${pool.label}`, tx: rolledBack.connection })).status).toBe('published');
            await rolledBack.finish('ROLLBACK');
            const committed = await pool.beginTransaction();
            const kept = await broker.publish(queue, {}, { dedupeKey: `tx-${pool.label}`, tx: committed.connection });
            expect(kept.status).toBe('published');
            // The first throttled publish of the broker, inside the service's transaction: its
            // windows table is made without waiting for a connection that transaction holds.
            const throttled = { dedupeKey: `window-${pool.label}`, dedupeForMs: 60_000, tx: committed.connection };
            expect((await broker.publish(queue, {}, throttled)).status).toBe('published');
            expect((await broker.publish(queue, {}, throttled)).status).toBe('duplicate');
            await committed.finish('COMMIT');
            expect(await broker.publish(queue, {}, { dedupeKey: `tx-${pool.label}` })).toEqual({ status: 'duplicate', id: kept.id });
          } finally {
            await pool.end();
          }
        }
      });

      it('publishMany with keys writes each key once, leaving out keys held already, in one call', async () => {
        const table = defineTable(keyedDeclaration(form));
        await createTable(stand, context.db, table);
        const queue = table.queue('emails');
        const broker = createBroker(context.db, context.brokers);
        await broker.start();
        await broker.publish(queue, { held: true }, { dedupeKey: 'b' });
        const written = await broker.publishMany(queue, [
          { payload: 1, dedupeKey: 'a' },
          { payload: 2, dedupeKey: 'b' },
          { payload: 3, dedupeKey: 'a' },
          { payload: 4 },
          { payload: 5, dedupeKey: 'c' },
        ]);
        expect(written).toBe(3);
        expect((await keyRows()).map((row) => row.dedupe_key).sort()).toEqual(['a', 'b', 'c', null]);
        await expect(broker.publishMany(queue, [{ payload: 1, dedupeKey: 'x', dedupe: 'replace' } as never])).rejects.toThrow(
          /item 0: publishMany keeps out keys held already; dedupe and dedupeForMs are options of publish/,
        );
      });

      if (form === 'rowLock') {
        it("refuses dedupe: 'queued' and 'replace', whose row in work only its handler's end releases", async () => {
          const table = defineTable(keyedDeclaration(form));
          await createTable(stand, context.db, table);
          const broker = createBroker(context.db, context.brokers);
          await broker.start();
          for (const dedupe of ['queued', 'replace'] as const) {
            const attempt = broker.publish(table.queue('emails'), {}, { dedupeKey: 'k', dedupe });
            await expect(attempt).rejects.toThrow(UnsupportedError);
            await expect(attempt).rejects.toThrow(/needs a lease table/);
          }
          expect(await countRows(context.db, 'jobs')).toBe(0);
        });
      }

      if (form === 'lease') {
        it("queued: a duplicate while the row waits; once a handler runs it, a new row takes the key", async () => {
          const table = defineTable(keyedDeclaration(form));
          await createTable(stand, context.db, table);
          const queue = table.queue('emails');
          const broker = createBroker(context.db, context.brokers);
          await broker.start();
          const first = await broker.publish(queue, { n: 1 }, { dedupeKey: 'k', dedupe: 'queued' });
          expect(await broker.publish(queue, { n: 2 }, { dedupeKey: 'k', dedupe: 'queued' })).toEqual({ status: 'duplicate', id: first.id });
          const started = new Collector<Message<unknown>>();
          const finish = createDeferred();
          const worker = createBroker(context.db, context.brokers);
          worker.subscribe(queue, async (message) => {
            started.push(message);
            await finish.promise;
            return Outcome.ack();
          }, { workers: 1 });
          await worker.start();
          await started.waitFor(1);
          const second = await broker.publish(queue, { n: 3 }, { dedupeKey: 'k', dedupe: 'queued' });
          expect(second.status).toBe('published');
          // The default mode still counts the running row's successor as the holder.
          expect(await broker.publish(queue, { n: 4 }, { dedupeKey: 'k' })).toEqual({ status: 'duplicate', id: second.id });
          expect((await keyRows()).map((row) => [String(row.id), row.dedupe_key])).toEqual([
            [first.id, null],
            [second.id, 'k'],
          ]);
          finish.resolve();
          await started.waitFor(2);
          expect((started.items[1]!.payload as { n: number }).n).toBe(3);
        });

        it('replace: a waiting row takes the newest payload and due time, so a burst ends as one message; a running row gets a successor', async () => {
          const table = defineTable(keyedDeclaration(form));
          await createTable(stand, context.db, table);
          const queue = table.queue('emails');
          const broker = createBroker(context.db, context.brokers);
          await broker.start();
          const first = await broker.publish(queue, { n: 1 }, { dedupeKey: 'debounce', dedupe: 'replace', delayMs: 60_000 });
          for (let n = 2; n <= 5; n++) {
            expect(await broker.publish(queue, { n }, { dedupeKey: 'debounce', dedupe: 'replace', delayMs: 60_000 + n })).toEqual({
              status: 'replaced',
              id: first.id,
            });
          }
          expect(await countRows(context.db, 'jobs')).toBe(1);
          const started = new Collector<Message<unknown>>();
          const finish = createDeferred();
          const worker = createBroker(context.db, context.brokers);
          worker.subscribe(queue, async (message) => {
            started.push(message);
            await finish.promise;
            return Outcome.ack();
          }, { workers: 1 });
          await worker.start();
          // Due at once now: the replacement moves the due time.
          expect(await broker.publish(queue, { n: 6 }, { dedupeKey: 'debounce', dedupe: 'replace' })).toEqual({ status: 'replaced', id: first.id });
          await started.waitFor(1);
          expect(started.items[0]!.payload).toEqual({ n: 6 });
          const successor = await broker.publish(queue, { n: 7 }, { dedupeKey: 'debounce', dedupe: 'replace' });
          expect(successor.status).toBe('published');
          finish.resolve();
          await started.waitFor(2);
          expect(started.items[1]!.payload).toEqual({ n: 7 });
        });
      }

      it('dedupeForMs: one row per window, even after that row was handled', async () => {
        const table = defineTable(keyedDeclaration(form));
        await createTable(stand, context.db, table);
        const queue = table.queue('emails');
        const broker = createBroker(context.db, context.brokers, { dedupeWindowsTable: 'throttle_windows' });
        broker.subscribe(queue, () => Outcome.ack());
        await broker.start();
        const windowMs = 400;
        const opened = Date.now();
        const first = await broker.publish(queue, {}, { dedupeKey: 'throttled', dedupeForMs: windowMs });
        expect(first.status).toBe('published');
        expect(await countRows(context.db, 'throttle_windows')).toBe(1);
        await untilStats(broker, queue, (stats) => stats.acked === 1, 'the first row acked');
        const refused = await broker.publish(queue, {}, { dedupeKey: 'throttled', dedupeForMs: windowMs });
        // Handled already: nothing holds the key but the window, so there is no id to give.
        if (Date.now() - opened < windowMs) expect(refused).toEqual({ status: 'duplicate', id: undefined });
        // The window is the publishing host's time: once it has passed, the key is free again.
        await delay(Math.max(0, opened + windowMs + 10 - Date.now()));
        expect((await broker.publish(queue, {}, { dedupeKey: 'throttled', dedupeForMs: windowMs })).status).toBe('published');
        await untilStats(broker, queue, (stats) => stats.acked === 2, 'the second row acked');
      });

      it('a hand-made table without the unique index refuses keyed publishes, giving the index to create', async () => {
        const table = defineTable(keyedDeclaration(form));
        for (const statement of table.createTableSql(stand.ddlDialect)) {
          if (!statement.startsWith('CREATE UNIQUE INDEX')) await context.db.exec(statement);
        }
        const broker = createBroker(context.db, context.brokers);
        await broker.start();
        const queue = table.queue('emails');
        await expect(broker.publish(queue, {}, { dedupeKey: 'k' })).rejects.toThrow(SchemaError);
        await expect(broker.publish(queue, {}, { dedupeKey: 'k' })).rejects.toThrow(/has no unique index over \(queue, dedupe_key\).*CREATE UNIQUE INDEX/);
        await expect(broker.publishMany(queue, [{ payload: 1, dedupeKey: 'k' }])).rejects.toThrow(SchemaError);
        expect(await countRows(context.db, 'jobs')).toBe(0);
        // Publishes without a key do not need it.
        expect(typeof (await broker.publish(queue, {}))).toBe('string');
      });

      it('refuses bad keys before writing, saying what to fix', async () => {
        const table = defineTable(keyedDeclaration(form));
        await createTable(stand, context.db, table);
        const plain = defineTable(jobsDeclaration({ form, name: 'plain_jobs' }));
        const broker = createBroker(context.db, context.brokers);
        await broker.start();
        const queue = table.queue('emails');
        await expect(broker.publish(queue, {}, { dedupeKey: '' })).rejects.toThrow(/dedupeKey must be a non-empty string/);
        await expect(broker.publish(queue, {}, { dedupeKey: 'x'.repeat(256) })).rejects.toThrow(/at most 255/);
        await expect(broker.publish(queue, {}, { dedupeKey: 'a\u0000b' })).rejects.toThrow(/NUL/);
        await expect(broker.publish(queue, {}, { dedupeKey: 'k', dedupe: 'sometimes' as never })).rejects.toThrow(/dedupe must be one of/);
        await expect(broker.publish(queue, {}, { dedupeKey: 'k', dedupeForMs: 0 })).rejects.toThrow(/dedupeForMs must be/);
        await expect(broker.publish(plain.queue('emails'), {}, { dedupeKey: 'k' })).rejects.toThrow(/has no dedupeKey column/);
        expect(await countRows(context.db, 'jobs')).toBe(0);
        // A key of 255 characters in any script is stored and compared exactly.
        const wide = '\u{1F600}'.repeat(255);
        expect((await broker.publish(queue, {}, { dedupeKey: wide })).status).toBe('published');
        expect((await broker.publish(queue, {}, { dedupeKey: `${wide.slice(0, -2)}` })).status).toBe('published');
        expect((await broker.publish(queue, {}, { dedupeKey: 'Case' })).status).toBe('published');
        expect((await broker.publish(queue, {}, { dedupeKey: 'case' })).status).toBe('published');
        expect((await broker.publish(queue, {}, { dedupeKey: 'case ' })).status).toBe('published');
        expect((await broker.publish(queue, {}, { dedupeKey: 'case ' })).status).toBe('duplicate');
      });
    });

    if (stand.capabilities.supportsProcesses) {
      describe(`${form} dedupe keys across processes`, () => {
        for (const inTransaction of [false, true]) {
          it(`1,000 publishes of one key from four processes write one row (${inTransaction ? "inside the service's transactions" : 'on their own'})`, async () => {
            const declaration = keyedDeclaration(form);
            await createTable(stand, context.db, defineTable(declaration));
            const config: KeyedPublisherConfig = {
              database: context.db.url!,
              kind: stand.kind,
              table: declaration,
              queue: 'emails',
              key: 'one-key',
              count: 250,
              inFlight: 4,
              inTransaction,
            };
            const reports = await runKeyedPublishers(config, 4);
            const published = reports.flatMap((report) => report.published);
            expect(published).toHaveLength(1);
            expect(new Set(reports.flatMap((report) => report.duplicateOf))).toEqual(new Set(published));
            expect(reports.reduce((sum, report) => sum + report.published.length + report.duplicateOf.length, 0)).toBe(1_000);
            const rows = await context.db.query<KeyRow>(`SELECT id, queue, dedupe_key FROM jobs WHERE dedupe_key = ${placeholder(stand, 1)}`, ['one-key']);
            expect(rows.map((row) => String(row.id))).toEqual(published);
            expect(await countRows(context.db, 'jobs')).toBe(1);
          }, 60_000);
        }
      });
    }
  }
}

/** Starts `count` publisher processes, lets them go at once, and collects what each reported. */
async function runKeyedPublishers(config: KeyedPublisherConfig, count: number): Promise<KeyedPublisherReport[]> {
  const children = Array.from({ length: count }, () =>
    spawn(process.execPath, ['--import', 'tsx', KEYED_PUBLISHER, JSON.stringify(config)], { stdio: ['pipe', 'pipe', 'pipe'] }),
  );
  const outcomes = children.map((child) => {
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    let report: KeyedPublisherReport | undefined;
    const ready = createDeferred();
    createInterface({ input: child.stdout }).on('line', (line) => {
      if (line === 'ready') ready.resolve();
      else if (line.startsWith('done ')) report = JSON.parse(line.slice('done '.length)) as KeyedPublisherReport;
    });
    const done = new Promise<KeyedPublisherReport>((resolve, reject) =>
      child.on('exit', (code) => (report !== undefined && code === 0 ? resolve(report) : reject(new Error(`keyed publisher exited ${code}: ${stderr}`)))),
    );
    done.catch(() => ready.reject(new Error(`keyed publisher exited before it was ready: ${stderr}`)));
    let isReady = false;
    void ready.promise.then(() => (isReady = true), () => undefined);
    return { ready: ready.promise, done, describe: () => `${isReady ? 'ready' : 'not ready'}, stderr: ${stderr.slice(-500)}` };
  });
  const deadline = new Promise<never>((_, reject) =>
    setTimeout(() => reject(new Error(`keyed publishers did not finish: ${outcomes.map((outcome) => outcome.describe()).join('; ')}`)), 45_000).unref(),
  );
  try {
    await Promise.race([Promise.all(outcomes.map((outcome) => outcome.ready)), deadline]);
    for (const child of children) child.stdin.end('go\n');
    return await Promise.race([Promise.all(outcomes.map((outcome) => outcome.done)), deadline]);
  } finally {
    for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
  }
}
