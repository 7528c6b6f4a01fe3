import { describe, expect, it } from 'vitest';
import { defineTable, type QueueTable } from '../../src/index.js';
import { testHooksOf } from '../../src/broker/broker.js';
import { createDeferred, type Deferred } from '../../src/internal/deferred.js';
import { nextEventLoopTurn } from '../../src/internal/event-loop-turn.js';
import { ManualClock } from '../../src/internal/manual-clock.fixture.js';
import {
  Collector,
  countRows,
  createBroker,
  createTable,
  formsOf,
  jobsDeclaration,
  jobsTable,
  statsOf,
  untilStats,
  waitForDatabase,
  type FormUnderTest,
} from '../fixtures.js';
import { spawnWorker } from '../processes/spawn-worker.js';
import type { SuiteContext } from '../run-conformance.js';

/** A queue table with a partition key column, for keyed lanes and single-claim rules. */
function keyedTable(form: FormUnderTest): QueueTable {
  return defineTable({ ...jobsDeclaration({ form }), partitionKey: 'customer' });
}

/** Handlers that park until the test lets them go, so the state in work can be observed. */
class Gate {
  readonly started = new Collector<string>();
  readonly #releases: Deferred<void>[] = [];

  readonly handler = async (message: { id: string }): Promise<void> => {
    const release = createDeferred();
    this.#releases.push(release);
    this.started.push(message.id);
    await release.promise;
  };

  releaseOne(): void {
    this.#releases.shift()?.resolve();
  }

  releaseAll(): void {
    for (const release of this.#releases.splice(0)) release.resolve();
  }
}

async function publishRows(context: SuiteContext, table: QueueTable, count: number, key?: (index: number) => string | null) {
  const publisher = createBroker(context.db, context.brokers);
  await publisher.start();
  await publisher.publishMany(
    table.queue('emails'),
    Array.from({ length: count }, (_, index) => ({ payload: index, partitionKey: key?.(index) ?? null })),
  );
  await publisher.stop();
}

/** Sessions of the test database that sit idle inside a transaction (row-lock deliveries in work). */
async function idleInTransaction(context: SuiteContext): Promise<number> {
  const rows = await context.db.query<{ n: unknown }>(
    "SELECT COUNT(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND state = 'idle in transaction'",
  );
  return Number(rows[0]!.n);
}

/** Work partitioning: WP-1 to WP-10, WP-12 and WP-13 (WP-11 is the FIFO suite, WP-14 the process suite). */
export function partitioningSuite(context: SuiteContext): void {
  const { stand } = context;
  const isSingleWriter = stand.capabilities.hasSingleWriter;
  for (const form of formsOf(stand)) {
    describe(`${form} work partitioning`, () => {
      it('WP-1: keeps one claim per idle worker and no more once every worker has a delivery', async () => {
        const table = jobsTable({ form });
        await createTable(stand, context.db, table);
        await publishRows(context, table, 10);
        const broker = createBroker(context.db, context.brokers, { pool: { max: 10 } });
        const gate = new Gate();
        broker.subscribe(table.queue('emails'), gate.handler, { workers: 4 });
        await broker.start();
        await gate.started.waitFor(4);
        const stats = broker.stats().subscriptions[0]!;
        expect(stats.inWork).toBe(4);
        // WP-8: a lease claim on a table that claims one at a time (SQLite, MySQL/MariaDB) takes
        // a row for every worker.
        const claimsOneAtATime = isSingleWriter || stand.capabilities.leaseClaimLocksRows;
        const claimsForFourWorkers = claimsOneAtATime && form === 'lease' ? 1 : 4;
        expect(stats.claims).toBe(claimsForFourWorkers);
        expect(stats.emptyClaims).toBe(0);
        expect(stats.maxClaimsRunning).toBeLessThanOrEqual(4);
        gate.releaseAll();
      });

      it('WP-1: a batch subscription claims one batch per claim', async () => {
        const table = jobsTable({ form });
        await createTable(stand, context.db, table);
        await publishRows(context, table, 10);
        const broker = createBroker(context.db, context.brokers);
        const batches = new Collector<number[]>();
        broker.subscribe(
          table.queue<number>('emails'),
          (messages) => {
            batches.push(messages.map((message) => message.payload));
          },
          { batch: 4 },
        );
        await broker.start();
        await batches.waitFor(3);
        await broker.stop();
        expect(batches.items.map((batch) => batch.length)).toEqual([4, 4, 2]);
        expect(batches.items.flat().sort((a, b) => a - b)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
        expect(await countRows(context.db, 'jobs')).toBe(0);
      });

      if (stand.kind !== 'sqlite') {
        it('WP-2: holds at most pool size minus one connections, and the pool still lends one', async () => {
          const table = jobsTable({ form });
          await createTable(stand, context.db, table);
          await publishRows(context, table, 8);
          const broker = createBroker(context.db, context.brokers, { pool: { max: 4 } });
          const gate = new Gate();
          broker.subscribe(table.queue('emails'), gate.handler, { workers: 8 });
          await broker.start();
          if (form === 'rowLock') {
            await gate.started.waitFor(3);
            await untilStats(broker, table.queue('emails'), (stats) => stats.claimsRunning === 0, 'claims to settle');
            expect(broker.stats().subscriptions[0]!.inWork).toBe(3);
            expect(broker.stats().subscriptions[0]!.maxConnectionsHeld).toBeLessThanOrEqual(3);
            if (stand.kind === 'postgres') expect(await idleInTransaction(context)).toBe(3);
            // The last connection serves the handlers' own queries and publishes.
            await expect(broker.publish(table.queue('emails'), 'still room')).resolves.toBeTruthy();
            gate.releaseOne();
            await gate.started.waitFor(4);
          } else {
            // WP-5: lease deliveries hold no connection, so all eight run on a pool of four.
            await gate.started.waitFor(8);
            expect(broker.stats().subscriptions[0]!.maxConnectionsHeld).toBeLessThanOrEqual(3);
          }
          gate.releaseAll();
          await broker.stop();
          expect(broker.stats().pool.maxHeld).toBeLessThanOrEqual(4);
        });

        it('WP-3: a parallel claim starts only with two spare connections, so one stays free', async () => {
          const table = jobsTable({ form });
          await createTable(stand, context.db, table);
          await publishRows(context, table, 300);
          const broker = createBroker(context.db, context.brokers, { pool: { max: 3 } });
          const handled = new Collector<string>();
          broker.subscribe(
            table.queue('emails'),
            (message) => {
              handled.push(message.id);
            },
            { workers: 8 },
          );
          await broker.start();
          await handled.waitFor(300, 60_000);
          const stats = broker.stats();
          await broker.stop();
          // Budget 2 of 3: never a third connection for claims and deliveries together.
          expect(stats.subscriptions[0]!.maxConnectionsHeld).toBeLessThanOrEqual(2);
          expect(stats.subscriptions[0]!.maxClaimsRunning).toBeLessThanOrEqual(2);
          expect(stats.pool.maxHeld).toBeLessThanOrEqual(3);
        });

        it('WP-4: subscriptions sharing a short pool leave room for each other and none starves', async () => {
          const table = jobsTable({ form });
          await createTable(stand, context.db, table);
          const publisher = createBroker(context.db, context.brokers);
          await publisher.start();
          for (const queue of ['emails', 'sms']) {
            await publisher.publishMany(
              table.queue(queue),
              Array.from({ length: 60 }, (_, index) => ({ payload: index })),
            );
          }
          const broker = createBroker(context.db, context.brokers, { pool: { max: 4 } });
          const emails = new Collector<string>();
          const sms = new Collector<string>();
          broker.subscribe(table.queue('emails'), (message) => void emails.push(message.id), { workers: 4 });
          broker.subscribe(table.queue('sms'), (message) => void sms.push(message.id), { workers: 4 });
          await broker.start();
          await Promise.all([emails.waitFor(60, 60_000), sms.waitFor(60, 60_000)]);
          const stats = broker.stats();
          await broker.stop();
          for (const subscription of stats.subscriptions) expect(subscription.maxConnectionsHeld).toBeLessThanOrEqual(3);
          expect(stats.pool.maxHeld).toBeLessThanOrEqual(4);
        });
      }

      it('WP-5: row-lock deliveries hold a connection each; lease deliveries hold none', async () => {
        const table = jobsTable({ form });
        await createTable(stand, context.db, table);
        await publishRows(context, table, 3);
        const broker = createBroker(context.db, context.brokers, { pool: { max: 10 } });
        const gate = new Gate();
        broker.subscribe(table.queue('emails'), gate.handler, { workers: 3 });
        await broker.start();
        await gate.started.waitFor(3);
        await untilStats(broker, table.queue('emails'), (stats) => stats.claimsRunning === 0, 'claims to finish');
        const held = form === 'rowLock' ? 3 : 0;
        expect(broker.stats().subscriptions[0]!.connectionsHeld).toBe(held);
        if (stand.kind === 'postgres') expect(await idleInTransaction(context)).toBe(held);
        gate.releaseAll();
      });

      it('WP-6: an empty table sees one claim per wait, not one per worker', async () => {
        const table = jobsTable({ form });
        await createTable(stand, context.db, table);
        const broker = createBroker(context.db, context.brokers, { pollIntervalMs: 30 });
        broker.subscribe(table.queue('emails'), () => undefined, { workers: 8 });
        const scansBefore = stand.kind === 'postgres' ? await tableScans(context) : 0;
        await broker.start();
        await untilStats(broker, table.queue('emails'), (stats) => stats.emptyClaims >= 10, 'ten empty claims');
        await broker.stop();
        const stats = broker.stats().subscriptions[0]!;
        expect(stats.maxClaimsRunning).toBe(1);
        expect(stats.claims).toBe(stats.emptyClaims);
        if (stand.kind === 'postgres') {
          // Each claim scans the table once; eight claims per wait would show eight times as many.
          await waitForScanStats(context, scansBefore + stats.claims);
          expect((await tableScans(context)) - scansBefore).toBeLessThanOrEqual(stats.claims + 2);
        }
      });

      it('WP-6: after rows arrive the claims spread over the idle workers again', async () => {
        const table = jobsTable({ form });
        await createTable(stand, context.db, table);
        const broker = createBroker(context.db, context.brokers, { pool: { max: 10 } });
        const gate = new Gate();
        broker.subscribe(table.queue('emails'), gate.handler, { workers: 4 });
        await broker.start();
        await untilStats(broker, table.queue('emails'), (stats) => stats.emptyClaims >= 1, 'an empty claim');
        await broker.publishMany(table.queue('emails'), Array.from({ length: 4 }, (_, index) => ({ payload: index })));
        await gate.started.waitFor(4);
        expect(broker.stats().subscriptions[0]!.inWork).toBe(4);
        gate.releaseAll();
      });

      const singleClaimReason = isSingleWriter
        ? 'SQLite has one writer'
        : stand.capabilities.leaseClaimLocksRows && form === 'lease'
          ? 'MySQL/MariaDB lease claims lock what they read'
          : undefined;
      it(`WP-7: one claim at a time on a table with a partition key column${singleClaimReason ? ` and because ${singleClaimReason}` : ''}`, async () => {
        for (const table of [keyedTable(form), ...(singleClaimReason ? [jobsTable({ form, name: 'plain_jobs' })] : [])]) {
          await createTable(stand, context.db, table);
          const publisher = createBroker(context.db, context.brokers);
          await publisher.start();
          await publisher.publishMany(table.queue('emails'), Array.from({ length: 100 }, (_, index) => ({ payload: index })));
          const broker = createBroker(context.db, context.brokers, { pool: { max: 10 } });
          const handled = new Collector<string>();
          broker.subscribe(table.queue('emails'), (message) => void handled.push(message.id), { workers: 8 });
          await broker.start();
          await handled.waitFor(100, 60_000);
          await broker.stop();
          expect(broker.stats().subscriptions[0]!.maxClaimsRunning).toBe(1);
        }
      });

      it('WP-10: keyed lanes run the rows of each key in claim order, one at a time', async () => {
        const table = keyedTable(form);
        await createTable(stand, context.db, table);
        const keys = ['alpha', 'beta', 'gamma', null];
        await publishRows(context, table, 80, (index) => keys[index % keys.length]!);
        const broker = createBroker(context.db, context.brokers);
        const order = new Collector<{ key: string | null; n: number }>();
        const running = new Map<string, number>();
        let overlaps = 0;
        broker.subscribe(
          table.queue<number>('emails'),
          async (message) => {
            const key = message.partitionKey;
            if (key !== null) {
              if ((running.get(key) ?? 0) > 0) overlaps += 1;
              running.set(key, (running.get(key) ?? 0) + 1);
            }
            // The handler's work spans a turn of the event loop, so a row of the same key started
            // beside it by a faulty lane would find it still running.
            await nextEventLoopTurn();
            if (key !== null) running.set(key, running.get(key)! - 1);
            order.push({ key, n: message.payload });
          },
          { workersByKey: 3 },
        );
        await broker.start();
        await order.waitFor(80, 60_000);
        await broker.stop();
        expect(overlaps).toBe(0);
        for (const key of ['alpha', 'beta', 'gamma']) {
          const sequence = order.items.filter((item) => item.key === key).map((item) => item.n);
          expect(sequence).toEqual([...sequence].sort((a, b) => a - b));
          expect(sequence).toHaveLength(20);
        }
      });
    });
  }

  if (isSingleWriter) {
    describe('SQLite lease claims', () => {
      it('WP-2: a pool of one (the SQLite handle) is a budget of one', async () => {
        const table = jobsTable({ form: 'lease' });
        await createTable(stand, context.db, table);
        await publishRows(context, table, 200);
        const broker = createBroker(context.db, context.brokers);
        const handled = new Collector<string>();
        broker.subscribe(table.queue('emails'), (message) => void handled.push(message.id), { workers: 8 });
        await broker.start();
        await handled.waitFor(200, 60_000);
        await broker.stop();
        const stats = broker.stats();
        expect(stats.pool.size).toBe(1);
        expect(stats.subscriptions[0]!.maxConnectionsHeld).toBe(1);
      });

      it('WP-8: one claim takes a row for every worker', async () => {
        const table = jobsTable({ form: 'lease' });
        await createTable(stand, context.db, table);
        await publishRows(context, table, 12);
        const broker = createBroker(context.db, context.brokers);
        const gate = new Gate();
        broker.subscribe(table.queue('emails'), gate.handler, { workers: 4 });
        await broker.start();
        await gate.started.waitFor(4);
        const stats = broker.stats().subscriptions[0]!;
        expect(stats.claims).toBe(1);
        expect(await countRows(context.db, 'jobs', 'locked_until IS NOT NULL')).toBe(4);
        gate.releaseAll();
      });

      it('WP-9: rows beyond the idle workers wait leased, are renewed, and go back at once on stop', async () => {
        const table = jobsTable({ form: 'lease' });
        await createTable(stand, context.db, table);
        await publishRows(context, table, 12);
        // A lease long enough that the host's own time, which the test's clock runs with, never ends it.
        const leaseMs = 30_000;
        const broker = createBroker(context.db, context.brokers, { leaseMs, stopTimeoutMs: 100 });
        const gate = new Gate();
        const queue = table.queue('emails');
        broker.subscribe(queue, gate.handler, { workers: 4 });
        const hooks = testHooksOf(broker, queue);
        const clock = (hooks.clock = new ManualClock());
        await broker.start();
        await gate.started.waitFor(4);
        gate.releaseOne();
        // The freed worker claims four rows: one starts, three wait in the subscription.
        await gate.started.waitFor(5);
        // The released row's ack may still wait in its settlement window while the claim runs.
        await untilStats(broker, queue, (stats) => stats.waitingRows === 3 && stats.acked === 1, 'three waiting rows and one ack');
        expect(await countRows(context.db, 'jobs', 'locked_until IS NOT NULL')).toBe(7);
        const before = await context.db.query<{ t: string }>('SELECT MIN(locked_until) AS t FROM jobs WHERE locked_until IS NOT NULL');
        // Three rounds, half a lease apart on the lease's clock, each over the seven rows held:
        // the last one writes an expiry at least a second later than the claim did (tokens are
        // whole seconds, so one round may rewrite the same second).
        for (let round = 0; round < 3; round += 1) {
          hooks.keeper.roundEnded.clear();
          clock.advance(leaseMs / 2);
          await hooks.keeper.roundEnded.next({ what: 'a renewal round' });
        }
        expect(statsOf(broker, queue).leaseRenewals).toBe(21);
        const after = await context.db.query<{ t: string }>('SELECT MIN(locked_until) AS t FROM jobs WHERE locked_until IS NOT NULL');
        expect(after[0]!.t > before[0]!.t).toBe(true);
        const stopping = broker.stop();
        await untilStats(broker, table.queue('emails'), (stats) => stats.waitingRows === 0, 'the waiting rows handed back');
        gate.releaseAll();
        await stopping;
        // Five rows were handled; the three that waited went back unhandled, with no lease left on
        // them, so every remaining row is claimable by anyone at once.
        expect(await countRows(context.db, 'jobs')).toBe(7);
        expect(await countRows(context.db, 'jobs', 'locked_until IS NULL')).toBe(7);
      });
    });
  }

  describe('prefetch (lease form, opt-in)', () => {
    it('keeps rows claimed ahead of the workers, leased while they wait, and hands them back on stop', async () => {
      const table = jobsTable({ form: 'lease' });
      await createTable(stand, context.db, table);
      await publishRows(context, table, 12);
      const broker = createBroker(context.db, context.brokers, { stopTimeoutMs: 100 });
      const gate = new Gate();
      broker.subscribe(table.queue('emails'), gate.handler, { workers: 2, prefetch: 3 });
      await broker.start();
      await gate.started.waitFor(2);
      await untilStats(broker, table.queue('emails'), (stats) => stats.waitingRows === 3, 'three rows waiting ahead of the workers');
      expect(await countRows(context.db, 'jobs', 'locked_until IS NOT NULL')).toBe(5);
      gate.releaseOne();
      // The freed worker takes a waiting row at once; one row short is not worth a claim yet.
      await gate.started.waitFor(3);
      await untilStats(broker, table.queue('emails'), (stats) => stats.waitingRows === 2 && stats.acked === 1, 'a waiting row taken');
      const claimsBefore = broker.stats().subscriptions[0]!.claims;
      gate.releaseOne();
      // Two rows short, half the buffer: one claim fills it again.
      await gate.started.waitFor(4);
      await untilStats(broker, table.queue('emails'), (stats) => stats.waitingRows === 3 && stats.acked === 2, 'the buffer filled again');
      expect(broker.stats().subscriptions[0]!.claims).toBe(claimsBefore + 1);
      const stopping = broker.stop();
      await untilStats(broker, table.queue('emails'), (stats) => stats.waitingRows === 0, 'the waiting rows handed back');
      gate.releaseAll();
      await stopping;
      // Four rows were handled; the three that waited went back unhandled with no lease on them.
      expect(await countRows(context.db, 'jobs')).toBe(8);
      expect(await countRows(context.db, 'jobs', 'locked_until IS NULL')).toBe(8);
    });

    it.skipIf(!stand.capabilities.supportsRowLock)('is refused where waiting rows would hold connections (row lock form)', async () => {
      const table = jobsTable({ form: 'rowLock' });
      await createTable(stand, context.db, table);
      const broker = createBroker(context.db, context.brokers);
      broker.subscribe(table.queue('emails'), () => undefined, { prefetch: 3 });
      await expect(broker.start()).rejects.toThrow(/prefetch/);
    });
  });

  describe('threads and the connection limit', () => {
    it.skipIf(!stand.capabilities.supportsProcesses)('WP-12: runs handlers on worker threads, each with its own pool, claims on the main thread', async () => {
      const table = keyedTable(formsOf(stand)[0]!);
      await createTable(stand, context.db, table);
      await context.db.exec('CREATE TABLE effects (message_id VARCHAR(64) NOT NULL, customer VARCHAR(64), thread_id INTEGER NOT NULL, n INTEGER NOT NULL)');
      await publishRows(context, table, 40, (index) => `key-${index % 4}`);
      const broker = createBroker(context.db, context.brokers);
      broker.subscribe(table.queue('emails'), {
        onThreads: {
          threads: 2,
          byKey: true,
          module: new URL('../processes/thread-handler.ts', import.meta.url),
          export: stand.kind === 'postgres' ? 'recordOnThreadPostgres' : 'recordOnThread',
        },
      });
      await broker.start();
      // The threads write the effects before their handlers return; an ack counts once it committed.
      await untilStats(broker, table.queue('emails'), (stats) => stats.acked === 40, 'every row acked');
      await broker.stop();
      const rows = await context.db.query<{ customer: string; thread_id: unknown; n: unknown }>(
        'SELECT customer, thread_id, n FROM effects',
      );
      expect(rows).toHaveLength(40);
      expect(rows.every((row) => Number(row.thread_id) > 0)).toBe(true);
      for (const key of ['key-0', 'key-1', 'key-2', 'key-3']) {
        const threads = new Set(rows.filter((row) => row.customer === key).map((row) => Number(row.thread_id)));
        expect(threads.size).toBe(1);
      }
    });

    it('WP-13: a subscription whose threads would pass connectionLimit stops start(), naming the numbers', async () => {
      const table = jobsTable({ form: formsOf(stand)[0]! });
      await createTable(stand, context.db, table);
      // SQLite's pool is its one handle; the servers' pools are what pool.max says.
      const poolSize = stand.kind === 'sqlite' ? 1 : 4;
      const limit = poolSize + 6;
      const broker = createBroker(context.db, context.brokers, { pool: { max: 4 }, connectionLimit: limit });
      broker.subscribe(table.queue('emails'), {
        onThreads: { threads: 4, connections: 2, module: new URL('../processes/thread-handler.ts', import.meta.url) },
      });
      const failure = await broker.start().catch((error: unknown) => error);
      expect((failure as Error).name).toBe('ConnectionBudgetError');
      expect((failure as Error).message).toContain(
        `"jobs/emails" would open 4 threads x 2 connections; with the service pool of ${poolSize} and the threads before it that makes ${poolSize + 8}, over connectionLimit ${limit}`,
      );
    });
  });
}

async function tableScans(context: SuiteContext): Promise<number> {
  const rows = await context.db.query<{ scans: unknown }>(
    "SELECT COALESCE(seq_scan, 0) + COALESCE(idx_scan, 0) AS scans FROM pg_stat_user_tables WHERE relname = 'jobs'",
  );
  return Number(rows[0]?.scans ?? 0);
}

/**
 * Statistics reach pg_stat_user_tables when a backend reports them (at the latest when it exits,
 * as the stopped broker's did): wait until every claim shows, and fail if they do not, since an
 * upper bound on scans that were never counted would hold trivially.
 */
async function waitForScanStats(context: SuiteContext, atLeast: number): Promise<void> {
  // The statistics live in the server: read them again until the stopped broker's backends reported.
  await waitForDatabase(async () => (await tableScans(context)) >= atLeast, 10_000, `${atLeast} scans of jobs in pg_stat_user_tables`);
}

/** The replicas are processes of their own: what their handlers did shows only in the database. */
async function waitForEmptyEffects(context: SuiteContext, count: number): Promise<void> {
  await waitForDatabase(
    async () => (await countRows(context.db, 'effects')) >= count && (await countRows(context.db, 'jobs')) === 0,
    60_000,
    `${count} effects and an empty queue`,
  );
}

/** An effects table whose rows keep the order they were written in. */
function orderedEffectsTable(context: SuiteContext): string {
  const seq =
    context.stand.kind === 'postgres'
      ? 'seq BIGSERIAL PRIMARY KEY'
      : context.stand.kind === 'mysql'
        ? 'seq BIGINT AUTO_INCREMENT PRIMARY KEY'
        : 'seq INTEGER PRIMARY KEY AUTOINCREMENT';
  return `CREATE TABLE effects (${seq}, customer VARCHAR(64), n INTEGER NOT NULL, pid INTEGER NOT NULL)`;
}

/** WP-10 across three replica processes: each process runs the rows of a key in claim order. */
export function keyedReplicasSuite(context: SuiteContext): void {
  const { stand } = context;
  if (!stand.capabilities.supportsProcesses) return;
  for (const form of formsOf(stand)) {
    it(`WP-10: three replica processes with keyed lanes each keep per-key order (${form})`, async () => {
      const table = keyedTable(form);
      await createTable(stand, context.db, table);
      await context.db.exec(orderedEffectsTable(context));
      const keys = ['k0', 'k1', 'k2', 'k3', 'k4', 'k5'];
      const perKey = 50;
      const publisher = createBroker(context.db, context.brokers);
      await publisher.start();
      await publisher.publishMany(
        table.queue('emails'),
        Array.from({ length: keys.length * perKey }, (_, index) => ({
          payload: Math.floor(index / keys.length),
          partitionKey: keys[index % keys.length]!,
        })),
      );
      const marks = stand.kind === 'postgres' ? '$1, $2, $3' : '?, ?, ?';
      const config = {
        database: context.db.url,
        table: { ...jobsDeclaration({ form }), partitionKey: 'customer' },
        queue: 'emails',
        workers: 3,
        mode: 'keyed',
        recordSql: `INSERT INTO effects (customer, n, pid) VALUES (${marks})`,
      };
      const replicas = [spawnWorker(config), spawnWorker(config), spawnWorker(config)];
      await Promise.all(replicas.map((replica) => replica.ready));
      await waitForEmptyEffects(context, keys.length * perKey);
      for (const replica of replicas) replica.child.kill('SIGTERM');
      await Promise.all(replicas.map((replica) => replica.exited));
      const rows = await context.db.query<{ customer: string; n: unknown; pid: unknown }>(
        'SELECT customer, n, pid FROM effects ORDER BY seq',
      );
      expect(rows).toHaveLength(keys.length * perKey);
      const byProcessAndKey = new Map<string, number[]>();
      for (const row of rows) {
        const key = `${String(row.pid)}/${row.customer}`;
        byProcessAndKey.set(key, [...(byProcessAndKey.get(key) ?? []), Number(row.n)]);
      }
      for (const sequence of byProcessAndKey.values()) expect(sequence).toEqual([...sequence].sort((a, b) => a - b));
    });
  }
}
