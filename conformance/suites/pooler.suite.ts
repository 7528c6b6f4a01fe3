import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { runCliHere } from '../../src/cli/run-cli.fixture.js';
import { openDashboard } from '../../src/dashboard/dashboard.js';
import { createDriver } from '../../src/driver/create-driver.js';
import { DeclarationError, Outcome, UnsupportedError, type HandlerTransaction } from '../../src/index.js';
import { Collector, countRows, createBroker, createTable, formsOf, jobsTable, untilStats } from '../fixtures.js';
import type { SuiteContext } from '../run-conformance.js';
import { advisoryTable } from './advisory-tables.js';
import { hourLongSleep, sleepsRunning, waitForSleep } from './stop-cancel.suite.js';

/** Long enough that a row handled within seconds can only have come through a wake-up. */
const LONG_POLL_MS = 60_000;
const WORKERS = 4;
/** Rows beside the four outcomes: enough that the four workers' claims and settlements interleave. */
const BULK_ROWS = 40;

type Instruction = 'ack' | 'retry once' | 'drop' | 'dead letter';

/**
 * What matters through a pooler (stands with `pooler`): claims of the row lock and lease forms on
 * sessions the pooler shares, every outcome settled, publishes in the service's own transactions
 * on its own pool, transactional handlers, and, behind a transaction pooler, what `start()`
 * refuses, the pooler it finds undeclared and `listen` on a URL of its own.
 */
export function poolerSuite(context: SuiteContext): void {
  const { stand } = context;
  const mode = stand.pooler;
  if (mode === undefined) return;

  describe(`through a ${mode} pooler`, () => {
    it(`a driver finds the ${mode} pooler when none is declared`, async () => {
      const driver = createDriver(context.db.url!, { poolSize: 2 });
      try {
        await driver.open();
        expect(driver.pooler).toEqual({ declared: undefined, found: mode });
      } finally {
        await driver.close();
      }
    });

    for (const form of formsOf(stand)) {
      it(`${form}: every outcome settles from ${WORKERS} workers, each row handled once`, async () => {
        const table = jobsTable({ form });
        await createTable(stand, context.db, table);
        const queue = table.queue<{ do: Instruction }>('emails');
        const broker = createBroker(context.db, context.brokers);
        const handled = new Collector<string>();
        broker.subscribe(
          queue,
          (message) => {
            handled.push(`${message.payload.do} ${message.attempt}`);
            switch (message.payload.do) {
              case 'ack':
                return Outcome.ack();
              case 'retry once':
                return message.attempt === 1 ? Outcome.retry() : Outcome.ack();
              case 'drop':
                return Outcome.drop();
              case 'dead letter':
                return Outcome.retry();
            }
          },
          { workers: WORKERS, maxAttempts: 2, deadLetter: 'dead' },
        );
        await broker.start();
        await broker.publishMany(
          queue,
          Array.from({ length: BULK_ROWS }, () => ({ payload: { do: 'ack' as const } })),
        );
        for (const instruction of ['retry once', 'drop', 'dead letter'] as const) await broker.publish(queue, { do: instruction });
        await untilStats(broker, queue, (stats) => stats.acked === BULK_ROWS + 1 && stats.dropped === 1 && stats.deadLettered === 1, 'every row settled');
        await broker.stop();
        expect(handled.items.filter((item) => item === 'ack 1')).toHaveLength(BULK_ROWS);
        expect(handled.items.filter((item) => item !== 'ack 1').sort()).toEqual(['dead letter 1', 'dead letter 2', 'drop 1', 'retry once 1', 'retry once 2']);
        const left = await context.db.query<{ queue: string }>('SELECT queue FROM jobs');
        expect(left.map((row) => row.queue)).toEqual(['dead']);
      });

      it(`${form}: a transactional handler's write commits with its ack and rolls back with its retry`, async () => {
        const table = jobsTable({ form });
        await createTable(stand, context.db, table);
        await context.db.exec('CREATE TABLE effects (note VARCHAR(200) NOT NULL)');
        const queue = table.queue('emails');
        const broker = createBroker(context.db, context.brokers);
        const attempts = new Collector<number>();
        broker.subscribe(
          queue,
          async (message, { tx }) => {
            await writeEffect(tx, `attempt ${message.attempt}`);
            attempts.push(message.attempt);
            return message.attempt === 1 ? Outcome.retry() : Outcome.ack();
          },
          { transactional: true },
        );
        await broker.start();
        await broker.publish(queue, {});
        await attempts.waitFor(2);
        await untilStats(broker, queue, (stats) => stats.acked === 1, 'the second attempt acked');
        await broker.stop();
        const effects = await context.db.query<{ note: string }>('SELECT note FROM effects');
        expect(effects.map((row) => row.note)).toEqual(['attempt 2']);
        expect(await countRows(context.db, 'jobs')).toBe(0);
      });
    }

    it(`the command line with --pooler ${mode} and the dashboard with pooler: '${mode}' read, pause and resume through the pooler`, async () => {
      const url = context.db.url!;
      const table = jobsTable({ form: 'lease' });
      await createTable(stand, context.db, table);
      const broker = createBroker(context.db, context.brokers);
      await broker.start();
      await broker.publishMany(table.queue('emails'), [{ payload: { n: 1 } }, { payload: { n: 2 } }, { payload: { n: 3 } }]);
      await broker.stop();
      const flags = ['--database', url, '--table', 'jobs', '--pooler', mode];

      const paused = await runCliHere(['pause', ...flags, '--queue', 'emails']);
      expect(paused.stderr).toBe('');
      expect(paused.code).toBe(0);
      const [stats, peek] = await Promise.all([runCliHere(['stats', ...flags, '--json']), runCliHere(['peek', ...flags, '--json'])]);
      expect(stats.stderr).toBe('');
      const groups = (JSON.parse(stats.stdout) as { groups: { group: string; ready: number; paused: boolean }[] }).groups;
      expect(groups.map(({ group, ready, paused: isPaused }) => ({ group, ready, isPaused }))).toEqual([{ group: 'emails', ready: 3, isPaused: true }]);
      expect(peek.stderr).toBe('');
      expect((JSON.parse(peek.stdout) as { payload: unknown }[]).map((row) => row.payload)).toEqual([{ n: 1 }, { n: 2 }, { n: 3 }]);
      const resumed = await runCliHere(['resume', ...flags, '--queue', 'emails']);
      expect(resumed.code).toBe(0);

      const dashboard = await openDashboard({ database: url, tables: ['jobs'], pooler: mode, port: 0 });
      try {
        const config = (await (await fetch(`${dashboard.url}api/config`)).json()) as { database: string };
        expect(config.database).toMatch(mode === 'transaction' ? /, through a transaction pooler \(declared\)$/ : /, through a session pooler$/);
      } finally {
        await dashboard.close();
      }
    });

    it("publishes in the service's own transactions on its own pool: the committed messages are handled, the rolled-back one never", async () => {
      const table = jobsTable({ form: 'lease' });
      await createTable(stand, context.db, table);
      const queue = table.queue<string>('emails');
      const pool = new pg.Pool({ connectionString: context.db.url!, max: 3 });
      // The test's teardown terminates the database's sessions, this pool's idle ones too.
      pool.on('error', () => undefined);
      try {
        const broker = createBroker(context.db, context.brokers, { database: pool });
        const handled = new Collector<string>();
        broker.subscribe(queue, (message) => {
          handled.push(message.payload);
        });
        await broker.start();
        await inServiceTransaction(pool, 'ROLLBACK', (client) => broker.publish(queue, 'never', { tx: client }));
        await inServiceTransaction(pool, 'COMMIT', (client) =>
          broker.publishMany(queue, [{ payload: 'kept' }, { payload: 'kept too' }], { tx: client }),
        );
        await handled.waitFor(2);
        await untilStats(broker, queue, (stats) => stats.acked === 2, 'both committed messages acked');
        await broker.stop();
        expect(handled.items.sort()).toEqual(['kept', 'kept too']);
        expect(await countRows(context.db, 'jobs')).toBe(0);
      } finally {
        await pool.end();
      }
    });

    it("stop() cancels a handler's statement on the server through the pooler, which knows the session running it", async () => {
      const table = jobsTable({ form: 'lease' });
      await createTable(stand, context.db, table);
      const broker = createBroker(context.db, context.brokers);
      const started = new Collector<string>();
      broker.subscribe(table.queue('emails'), async (message, handlerContext) => {
        started.push(message.id);
        await handlerContext.query(hourLongSleep(context));
      });
      await broker.start();
      await broker.publish(table.queue('emails'), {});
      await started.waitFor(1);
      await waitForSleep(context);
      await broker.stop({ timeoutMs: 100 });
      expect(await sleepsRunning(context)).toBe(0);
      expect(await countRows(context.db, 'jobs')).toBe(1);
    });

    if (mode === 'transaction') {
      it("start() refuses the transaction pooler it finds undeclared, or declared 'session', asking for pooler: 'transaction'", async () => {
        for (const pooler of [undefined, 'session'] as const) {
          const broker = createBroker(context.db, context.brokers, { pooler, listen: false });
          const failure = await broker.start().catch((error: unknown) => error);
          expect(failure).toBeInstanceOf(DeclarationError);
          expect((failure as Error).message).toContain("Declare pooler: 'transaction'");
        }
      });

      it('start() refuses the advisory lock form, naming the table and the forms that work', async () => {
        const table = advisoryTable();
        await createTable(stand, context.db, table);
        const broker = createBroker(context.db, context.brokers);
        broker.subscribe(table.queue('emails'), () => undefined);
        const failure = await broker.start().catch((error: unknown) => error);
        expect(failure).toBeInstanceOf(UnsupportedError);
        expect(failure).toMatchObject({ feature: 'advisory' });
        expect((failure as Error).message).toContain('table "jobs"');
        expect((failure as Error).message).toContain('lease or row lock form');
      });

      it("start() refuses listen without a URL of its own, or with the pooler's own", async () => {
        const table = jobsTable({ form: 'lease' });
        await createTable(stand, context.db, table);
        for (const listen of [undefined, true, { url: context.db.url! }]) {
          const broker = createBroker(context.db, context.brokers, { listen });
          broker.subscribe(table.queue('emails'), () => undefined);
          const failure = await broker.start().catch((error: unknown) => error);
          expect(failure).toBeInstanceOf(UnsupportedError);
          expect(failure).toMatchObject({ feature: 'listen' });
          expect((failure as Error).message).toContain("listen: { url: 'postgres://…' }");
        }
      });

      it("listen on the server's own URL wakes a subscriber at once for another broker's publish", async () => {
        const table = jobsTable({ form: 'lease' });
        await createTable(stand, context.db, table);
        const queue = table.queue<string>('emails');
        const subscriber = createBroker(context.db, context.brokers, { pollIntervalMs: LONG_POLL_MS });
        const handled = new Collector<string>();
        subscriber.subscribe(queue, (message) => {
          handled.push(message.payload);
        });
        const publisher = createBroker(context.db, context.brokers);
        await subscriber.start();
        await untilStats(subscriber, queue, (stats) => stats.emptyClaims > 0, 'the first claim found nothing');
        await publisher.start();
        await publisher.publish(queue, 'woken');
        // Without the notification the subscriber would claim again only after LONG_POLL_MS.
        await handled.waitFor(1, LONG_POLL_MS / 4);
        expect(handled.items).toEqual(['woken']);
      });
    } else {
      it('the advisory lock form and LISTEN work as on the server itself', async () => {
        const table = advisoryTable();
        await createTable(stand, context.db, table);
        const queue = table.queue<string>('emails');
        const subscriber = createBroker(context.db, context.brokers, { pollIntervalMs: LONG_POLL_MS });
        const handled = new Collector<string>();
        subscriber.subscribe(queue, (message) => {
          handled.push(message.payload);
        });
        const publisher = createBroker(context.db, context.brokers);
        await subscriber.start();
        await untilStats(subscriber, queue, (stats) => stats.emptyClaims > 0, 'the first claim found nothing');
        await publisher.start();
        await publisher.publish(queue, 'woken');
        await handled.waitFor(1, LONG_POLL_MS / 4);
        expect(handled.items).toEqual(['woken']);
      });
    }
  });

  async function writeEffect(tx: HandlerTransaction | undefined, note: string): Promise<void> {
    if (tx === undefined) throw new Error('a transactional handler gets context.tx');
    await tx.query('INSERT INTO effects (note) VALUES ($1)', [note]);
  }
}

async function inServiceTransaction(pool: pg.Pool, end: 'COMMIT' | 'ROLLBACK', work: (client: pg.PoolClient) => Promise<unknown>): Promise<void> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    await work(client);
    await client.query(end);
  } finally {
    client.release();
  }
}
