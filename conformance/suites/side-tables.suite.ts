import { describe, expect, it } from 'vitest';
import type { Connection } from '../../src/driver/driver.js';
import { sideTableCatalogue } from '../../src/cli/side-table-catalogue.js';
import { CancelledError, defineTable, type Broker } from '../../src/index.js';
import { Collector, createBroker, createTable, waitForDatabase } from '../fixtures.js';
import { spawnLineProcess, type LineProcess } from '../processes/spawn-line-process.js';
import type { SuiteContext } from '../run-conformance.js';
import type { Stand, TestDatabase } from '../stand.js';
import { declareEverySideTable, SIDE_TABLE_BROKER_OPTIONS, SIDE_TABLE_JOBS } from './side-table-brokers.js';

const SIDE_TABLE_REPLICA = new URL('../processes/side-table-replica.ts', import.meta.url).pathname;

/** The side tables a broker creates at start (dedupe windows come at its first throttled publish). */
const SIDE_TABLES = ['tablequeue_brokers', 'tablequeue_schedules', 'tablequeue_maintenance', 'tablequeue_queue_controls', 'tablequeue_cancellations'];

interface LocalReplica {
  readonly broker: Broker;
  readonly group: string;
  readonly handling: Collector<string>;
  readonly aborted: Collector<unknown>;
}

/**
 * Lines up the `CREATE TABLE IF NOT EXISTS` of brokers that start together, so each side table
 * meets every broker's create at once, as on a fresh database under real load, instead of only
 * when their timing happens to coincide.
 *
 * On PostgreSQL a transaction of the test's holds SHARE on `pg_type`: a CREATE TABLE stops at its
 * insert of the table's row type, after its look for the table, and waits. Once every broker still
 * starting waits there (or none starts any more), the test commits, and all of them insert at once:
 * all but one meet the first's row on the catalogue's unique index. Then the lock is taken again,
 * after those creates, for the next table. Other databases order their DDL themselves (MySQL's
 * metadata lock, SQLite's write lock), so there the brokers only start in the same turn.
 */
class CreateBarrier {
  readonly #connection: Connection | undefined;
  #rounds = 0;

  private constructor(connection: Connection | undefined) {
    this.#connection = connection;
  }

  static async hold(stand: Stand, db: TestDatabase): Promise<CreateBarrier> {
    if (stand.kind !== 'postgres') return new CreateBarrier(undefined);
    const driver = await db.openDriver({ poolSize: 1 });
    const barrier = new CreateBarrier(await driver.acquire());
    await barrier.#lock();
    return barrier;
  }

  /** Whether this database's creates wait at the barrier. */
  get linesUp(): boolean {
    return this.#connection !== undefined;
  }

  /** How many times every waiting broker was let through at once. */
  get rounds(): number {
    return this.#rounds;
  }

  /** Lets the creates through a round at a time until `starting()` is 0. */
  async releaseUntilStarted(starting: () => number): Promise<void> {
    const connection = this.#connection;
    if (connection === undefined) return;
    for (;;) {
      // Polled: the waits are other sessions' (the test's brokers and processes).
      await waitForDatabase(
        async () => starting() === 0 || (await this.#waitingCreates()) >= starting(),
        60_000,
        'every broker still starting to wait at a CREATE TABLE',
      );
      await connection.execute({ name: 'barrier.commit', sql: 'COMMIT', values: [] });
      if (starting() === 0) break;
      this.#rounds += 1;
      await this.#lock();
    }
    connection.release();
  }

  async #lock(): Promise<void> {
    await this.#connection!.execute({ name: 'barrier.begin', sql: 'BEGIN', values: [] });
    await this.#connection!.execute({ name: 'barrier.lock', sql: 'LOCK TABLE pg_catalog.pg_type IN SHARE MODE', values: [] });
  }

  async #waitingCreates(): Promise<number> {
    const result = await this.#connection!.execute({
      name: 'barrier.waiting',
      sql: "SELECT COUNT(*) AS n FROM pg_locks WHERE relation = 'pg_catalog.pg_type'::regclass AND mode = 'RowExclusiveLock' AND NOT granted",
      values: [],
    });
    return Number(result.rows[0]?.n);
  }
}

/** Resolves once the process reported `item`, whatever it reported before. */
async function untilReported(replica: LineProcess<string>, item: string): Promise<void> {
  while (!replica.items.includes(item)) await replica.itemsAtLeast(replica.items.length + 1, 20_000);
}

/**
 * Side tables made by brokers that start together: PostgreSQL fails all but one concurrent
 * `CREATE TABLE IF NOT EXISTS` of a missing table (23505 on the catalogue), which a broker must
 * take as the table made, not as a failure of its start or of a watch.
 */
export function sideTablesSuite(context: SuiteContext): void {
  const { stand } = context;
  describe('side tables', () => {
    it('brokers starting at the same moment on a fresh database all start, without a warning, and each hears a cancel of its message in work', async () => {
      const table = defineTable(SIDE_TABLE_JOBS);
      await createTable(stand, context.db, table);
      const problems: string[] = [];
      const local: LocalReplica[] = ['local-0', 'local-1', 'local-2'].map((group) => {
        const broker = createBroker(context.db, context.brokers, SIDE_TABLE_BROKER_OPTIONS);
        broker.on('warning', (message) => problems.push(`${group} warning: ${message}`));
        broker.on('error', (error) => problems.push(`${group} error: ${error.message}`));
        const handling = new Collector<string>();
        const aborted = new Collector<unknown>();
        declareEverySideTable(broker, table, group, { onHandling: (id) => handling.push(id), onAborted: (_id, reason) => aborted.push(reason) });
        return { broker, group, handling, aborted };
      });
      const remote = (stand.capabilities.supportsProcesses ? ['process-0', 'process-1'] : []).map((group) => ({
        group,
        replica: spawnLineProcess({
          script: SIDE_TABLE_REPLICA,
          config: { database: context.db.url, group },
          label: `side table replica ${group}`,
          prefix: 'event ',
          parse: (rest) => rest,
          input: true,
        }),
      }));
      try {
        await Promise.all(remote.map(({ replica }) => replica.ready));
        const barrier = await CreateBarrier.hold(stand, context.db);
        // Every broker is told to start in one turn of the event loop: the processes through their
        // stdin, the local ones by start() itself, whose first statements run after this turn.
        for (const { replica } of remote) replica.child.stdin!.write('go\n');
        let localStarting = local.length;
        const starts = Promise.allSettled(local.map(({ broker }) => broker.start().finally(() => (localStarting -= 1))));
        const startOutcomes = (replica: LineProcess<string>) => replica.items.filter((item) => item === 'started' || item.startsWith('failed '));
        await barrier.releaseUntilStarted(() => localStarting + remote.filter(({ replica }) => startOutcomes(replica).length === 0).length);
        expect((await starts).flatMap((start) => (start.status === 'rejected' ? [String(start.reason)] : []))).toEqual([]);
        for (const { group, replica } of remote) {
          while (startOutcomes(replica).length === 0) await replica.itemsAtLeast(replica.items.length + 1);
          expect(startOutcomes(replica), group).toEqual(['started']);
        }
        // A broker that lost a race and took it for a failure warns here (its cancellation watch off).
        expect(problems).toEqual([]);
        // Queue controls and cancellations at least, each a round; more where the brokers stayed in step.
        if (barrier.linesUp) expect(barrier.rounds).toBeGreaterThanOrEqual(2);
        for (const name of SIDE_TABLES) expect(await context.db.query(`SELECT COUNT(*) AS n FROM ${name}`)).toHaveLength(1);

        // The dedupe windows table, made by each broker's first throttled publish, all at once.
        const throttled = await Promise.all(
          local.map(({ broker }, index) => broker.publish(table.queue('throttled'), {}, { dedupeKey: `key-${index}`, dedupeForMs: 60_000 })),
        );
        expect(throttled.map((result) => result.status)).toEqual(local.map(() => 'published'));

        // A cancel from another broker reaches each one's handler only through its cancellation watch.
        for (const [index, { group, handling, aborted }] of local.entries()) {
          const canceller = local[(index + 1) % local.length]!.broker;
          const id = await canceller.publish(table.queue(group), {});
          expect(await handling.waitFor(1, 15_000)).toEqual([id]);
          expect(await canceller.cancel(table.queue(group), id)).toEqual({ status: 'inWork' });
          const [reason] = await aborted.waitFor(1, 15_000);
          expect(reason, `${group}'s handler aborted`).toBeInstanceOf(CancelledError);
        }
        for (const { group, replica } of remote) {
          const canceller = local[0]!.broker;
          const id = await canceller.publish(table.queue(group), {});
          await untilReported(replica, `handling ${id}`);
          expect(await canceller.cancel(table.queue(group), id)).toEqual({ status: 'inWork' });
          await untilReported(replica, `aborted ${id} CANCELLED`);
        }
        expect(problems).toEqual([]);
        for (const { group, replica } of remote) {
          expect(replica.items.filter((item) => /^(warning|error|failed) /.test(item)), group).toEqual([]);
        }
      } finally {
        for (const { replica } of remote) replica.child.kill('SIGTERM');
        await Promise.all(remote.map(({ replica }) => replica.exited));
      }
    });

    it('the DDL tablequeue init --side-tables prints runs as printed, and a broker then works on the tables it made', async () => {
      const table = defineTable(SIDE_TABLE_JOBS);
      await createTable(stand, context.db, table);
      const catalogue = sideTableCatalogue(stand.ddlDialect);
      for (const entry of catalogue) await context.db.exec(entry.sql);
      for (const entry of catalogue) expect(await context.db.query(`SELECT COUNT(*) AS n FROM ${entry.table}`)).toHaveLength(1);
      const problems: string[] = [];
      const broker = createBroker(context.db, context.brokers, SIDE_TABLE_BROKER_OPTIONS);
      broker.on('warning', (message) => problems.push(`warning: ${message}`));
      broker.on('error', (error) => problems.push(`error: ${error.message}`));
      const handling = new Collector<string>();
      const aborted = new Collector<unknown>();
      declareEverySideTable(broker, table, 'work', { onHandling: (id) => handling.push(id), onAborted: (_id, reason) => aborted.push(reason) });
      await broker.start();
      expect((await broker.publish(table.queue('throttled'), {}, { dedupeKey: 'once', dedupeForMs: 60_000 })).status).toBe('published');
      const id = await broker.publish(table.queue('work'), {});
      await handling.waitFor(1);
      expect(await broker.cancel(table.queue('work'), id)).toEqual({ status: 'inWork' });
      expect((await aborted.waitFor(1))[0]).toBeInstanceOf(CancelledError);
      expect(problems).toEqual([]);
    });
  });
}
