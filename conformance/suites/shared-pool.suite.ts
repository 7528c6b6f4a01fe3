import { describe, expect, it } from 'vitest';
import { PoolExhaustedError, type Broker, type HandlerContext, type QueueTable, type SubscribeOptionsBase } from '../../src/index.js';
import { Collector, createBroker, createTable, jobsTable } from '../fixtures.js';
import type { SuiteContext } from '../run-conformance.js';
import { advisoryTable, sessionsHoldingKeys } from './advisory-tables.js';

/** A form whose deliveries hold a connection each (WP-5), as these tests run it. */
interface HoldingForm {
  readonly name: string;
  readonly table: () => QueueTable;
  readonly options: Partial<SubscribeOptionsBase<unknown>>;
  /** Sessions the broker's deliveries and claims hold now, as the server shows them. */
  readonly held: (context: SuiteContext) => Promise<number>;
}

/**
 * Sessions of the test database inside a transaction and waiting for their client: row-lock and
 * transactional deliveries in work. Postgres shows them in pg_stat_activity; MySQL and MariaDB as
 * an InnoDB transaction whose session sleeps.
 */
async function idleInTransaction(context: SuiteContext): Promise<number> {
  const sql =
    context.stand.kind === 'postgres'
      ? "SELECT COUNT(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND state = 'idle in transaction'"
      : `SELECT COUNT(*) AS n FROM information_schema.INNODB_TRX t
           JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id
          WHERE p.COMMAND = 'Sleep' AND p.DB = DATABASE()`;
  const rows = await context.db.query<{ n: unknown }>(sql);
  return Number(rows[0]!.n);
}

function holdingForms(context: SuiteContext): HoldingForm[] {
  const { capabilities } = context.stand;
  const forms: HoldingForm[] = [
    { name: 'transactional lease', table: () => jobsTable({ form: 'lease' }), options: { transactional: true }, held: idleInTransaction },
  ];
  if (capabilities.supportsRowLock) {
    forms.push({ name: 'row lock', table: () => jobsTable({ form: 'rowLock' }), options: {}, held: idleInTransaction });
  }
  if (capabilities.supportsSessionLocks) {
    forms.push({ name: 'advisory lock', table: () => advisoryTable(), options: {}, held: sessionsHoldingKeys });
  }
  return forms;
}

/** Samples `held` without pause until `done` resolves; returns the most it saw. */
async function mostHeldUntil(context: SuiteContext, form: HoldingForm, done: Promise<unknown>): Promise<number> {
  let isDone = false;
  void done.finally(() => (isDone = true));
  let most = 0;
  while (!isDone) most = Math.max(most, await form.held(context));
  return most;
}

/** Each handler runs one query of its own, on the pool the subscriptions share. */
function handlerWithQuery(collector: Collector<string>) {
  return async (message: { id: string }, handlerContext: HandlerContext): Promise<void> => {
    await handlerContext.query('SELECT 1 AS one');
    collector.push(message.id);
  };
}

async function publishTo(context: SuiteContext, table: QueueTable, queue: string, count: number): Promise<void> {
  const publisher = createBroker(context.db, context.brokers);
  await publisher.start();
  await publisher.publishMany(
    table.queue(queue),
    Array.from({ length: count }, (_, index) => ({ payload: index })),
  );
  await publisher.stop();
}

/** Subscribes `count` queues of `workers` each on one broker with a pool of `poolSize`. */
function subscribeQueues(options: {
  broker: Broker;
  table: QueueTable;
  queues: readonly string[];
  workers: number;
  form: HoldingForm;
}): Collector<string>[] {
  return options.queues.map((queue) => {
    const handled = new Collector<string>();
    options.broker.subscribe(options.table.queue(queue), handlerWithQuery(handled), {
      workers: options.workers,
      ...options.form.options,
    });
    return handled;
  });
}

/**
 * WP-4 on a pool shared by several subscriptions whose deliveries hold connections: together they
 * leave the last connection to handlers' own queries, nobody stalls, and none starves.
 */
export function sharedPoolSuite(context: SuiteContext): void {
  const { stand } = context;
  // A pool of one handle (SQLite) is a budget of one, covered in the partitioning suite.
  if (stand.capabilities.hasSingleWriter) return;
  for (const form of holdingForms(context)) {
    describe(`${form.name}: subscriptions sharing one pool`, () => {
      it('WP-4: two subscriptions of 4 workers on a pool of 4, each handler querying, drain 200 rows holding at most 3 connections', async () => {
        const table = form.table();
        await createTable(stand, context.db, table);
        await publishTo(context, table, 'emails', 100);
        await publishTo(context, table, 'sms', 100);
        const broker = createBroker(context.db, context.brokers, { pool: { max: 4 } });
        const [emails, sms] = subscribeQueues({ broker, table, queues: ['emails', 'sms'], workers: 4, form });
        await broker.start();
        const drained = Promise.all([emails!.waitFor(100, 60_000), sms!.waitFor(100, 60_000)]);
        const most = await mostHeldUntil(context, form, drained);
        await drained;
        await broker.stop();
        expect(most).toBeLessThanOrEqual(3);
        expect(broker.stats().pool.maxHeld).toBeLessThanOrEqual(4);
      });

      it('WP-4: three subscriptions of 2 workers on a pool of 6 drain 150 rows holding at most 5 connections', async () => {
        const table = form.table();
        await createTable(stand, context.db, table);
        const queues = ['emails', 'sms', 'push'];
        for (const queue of queues) await publishTo(context, table, queue, 50);
        const broker = createBroker(context.db, context.brokers, { pool: { max: 6 } });
        const collectors = subscribeQueues({ broker, table, queues, workers: 2, form });
        await broker.start();
        const drained = Promise.all(collectors.map((handled) => handled.waitFor(50, 60_000)));
        const most = await mostHeldUntil(context, form, drained);
        await drained;
        await broker.stop();
        expect(most).toBeLessThanOrEqual(5);
      });

      it('WP-4: a subscription whose rows arrive after another filled the pool finishes them before that backlog is done', async () => {
        const table = form.table();
        await createTable(stand, context.db, table);
        await publishTo(context, table, 'emails', 600);
        const broker = createBroker(context.db, context.brokers, { pool: { max: 4 } });
        const [emails, sms] = subscribeQueues({ broker, table, queues: ['emails', 'sms'], workers: 4, form });
        await broker.start();
        await emails!.waitFor(20, 60_000);
        await publishTo(context, table, 'sms', 20);
        await sms!.waitFor(20, 60_000);
        const emailsHandledWhenSmsDone = emails!.items.length;
        await emails!.waitFor(600, 60_000);
        await broker.stop();
        expect(emailsHandledWhenSmsDone).toBeLessThan(600);
      });

      it('WP-4: stop() resolves within its timeout while subscriptions sharing a short pool are busy', async () => {
        const table = form.table();
        await createTable(stand, context.db, table);
        await publishTo(context, table, 'emails', 200);
        await publishTo(context, table, 'sms', 200);
        const broker = createBroker(context.db, context.brokers, { pool: { max: 4 } });
        const [emails] = subscribeQueues({ broker, table, queues: ['emails', 'sms'], workers: 4, form });
        await broker.start();
        await emails!.waitFor(10, 60_000);
        const stopStartedAt = performance.now();
        await broker.stop({ timeoutMs: 2_000 });
        expect(performance.now() - stopStartedAt).toBeLessThan(2_000);
      });
    });
  }
}

/** A statement that holds its connection for `seconds` on the server. */
function sleepSql(context: SuiteContext, seconds: number): string {
  return context.stand.kind === 'postgres' ? `SELECT pg_sleep(${seconds})` : `SELECT SLEEP(${seconds})`;
}

/** Lease renewals keep a connection of their own, so handlers that hold every other one never make a lease run out. */
export function renewalConnectionSuite(context: SuiteContext): void {
  const { stand } = context;
  if (stand.capabilities.hasSingleWriter) return;
  describe('lease renewals on a pool that handlers keep busy', () => {
    it('no lease is lost and no message runs twice when handlers hold connections for most of the lease', async () => {
      const table = jobsTable({ form: 'lease' });
      await createTable(stand, context.db, table);
      await publishTo(context, table, 'emails', 12);
      const broker = createBroker(context.db, context.brokers, { pool: { max: 4 } });
      const handled = new Collector<string>();
      broker.subscribe(
        table.queue('emails'),
        async (message, handlerContext) => {
          await handlerContext.query(sleepSql(context, 1.5));
          handled.push(message.id);
        },
        { workers: 8, leaseMs: 2_000 },
      );
      await broker.start();
      await handled.waitFor(12, 60_000);
      await broker.stop();
      const stats = broker.stats().subscriptions[0]!;
      expect(stats.leasesLost).toBe(0);
      expect(new Set(handled.items).size).toBe(handled.items.length);
      expect(stats.leaseRenewals).toBeGreaterThan(0);
    });

    it('a query that finds no free connection within acquireTimeoutMs fails with a PoolExhaustedError naming the numbers', async () => {
      const table = jobsTable({ form: 'lease' });
      await createTable(stand, context.db, table);
      await publishTo(context, table, 'emails', 1);
      const broker = createBroker(context.db, context.brokers, { pool: { max: 2 }, acquireTimeoutMs: 300 });
      const failures = new Collector<unknown>();
      // Three queries at once on a pool of two: the third waits for a connection.
      broker.subscribe(table.queue('emails'), async (_message, handlerContext) => {
        const queries = [1, 2, 3].map(() => handlerContext.query(sleepSql(context, 1)));
        for (const outcome of await Promise.allSettled(queries)) {
          if (outcome.status === 'rejected') failures.push(outcome.reason);
        }
      });
      await broker.start();
      const [failure] = await failures.waitFor(1, 20_000);
      await broker.stop();
      expect(failure).toBeInstanceOf(PoolExhaustedError);
      expect((failure as Error).message).toMatch(/became free within 300 ms: the pool has 2, tablequeue holds 2/);
    });
  });
}
