import { describe, expect, it } from 'vitest';
import { LeaseSlot } from '../../src/claim/lease-book.js';
import { LeaseCoalescedSettlements } from '../../src/claim/lease-coalesced-settlements.js';
import { defineTable } from '../../src/definition/define-table.js';
import { createDialect } from '../../src/dialect/create-dialect.js';
import type { Connection, Driver } from '../../src/driver/driver.js';
import type { AcquireOptions } from '../../src/driver/pool-gate.js';
import { LeaseLostError, Outcome, type Broker } from '../../src/index.js';
import { createDeferred } from '../../src/internal/deferred.js';
import type { BoundStatement } from '../../src/statement.js';
import { Collector, countRows, createBroker, createTable, jobsDeclaration, jobsTable, placeholder, untilStats } from '../fixtures.js';
import type { SuiteContext } from '../run-conformance.js';

type Planned = 'ack' | 'drop' | 'retry' | 'retryAfter';
const PLAN: readonly Planned[] = ['ack', 'retry', 'retryAfter', 'drop', 'ack', 'retryAfter', 'ack', 'retry'];
/** Far enough ahead that a delayed row cannot come back while the test runs. */
const DELAY_MS = 600_000;

/** Counts the statements a driver runs on the connections it lends, by name. */
function countingDriver(driver: Driver, names: string[]): Driver {
  const wrap = (connection: Connection): Connection => ({
    execute: (statement: BoundStatement) => {
      names.push(statement.name);
      return connection.execute(statement);
    },
    prepare: (statement) => connection.prepare(statement),
    release: () => connection.release(),
    destroy: () => connection.destroy(),
  });
  return Object.assign(Object.create(driver) as Driver, {
    acquire: async () => wrap(await driver.acquire()),
    executeWrite: (statement: BoundStatement, options?: AcquireOptions) => {
      names.push(statement.name);
      return driver.executeWrite(statement, options);
    },
  });
}

/**
 * Settlement coalescing in the lease form: settlements of one window reach the database as one
 * statement per kind (two where the database locks then writes), each row still fenced by its
 * own token, so a lost lease fails its own delivery only.
 */
export function coalescingSuite(context: SuiteContext): void {
  const { stand } = context;

  describe('lease settlement coalescing', () => {
    for (const mark of [false, true]) {
      it(`settles a window of mixed outcomes, each row as its handler said (${mark ? 'marking' : 'deleting'} finished rows)`, async () => {
        const table = jobsTable({ form: 'lease', mark });
        await createTable(stand, context.db, table);
        const queue = table.queue<{ n: number }>('emails');
        const broker = createBroker(context.db, context.brokers, { leaseMs: 60_000 });
        const started = new Collector<number>();
        const retried = new Collector<{ n: number; attempt: number }>();
        const allStarted = createDeferred();
        broker.subscribe(
          queue,
          async (message) => {
            if (message.attempt > 1) {
              retried.push({ n: message.payload.n, attempt: message.attempt });
              return Outcome.retryAfter(DELAY_MS);
            }
            started.push(message.payload.n);
            if (started.items.length === PLAN.length) allStarted.resolve();
            // Every handler returns at once, so the settlements arrive within one window.
            await allStarted.promise;
            const planned = PLAN[message.payload.n]!;
            if (planned === 'ack') return Outcome.ack();
            if (planned === 'drop') return Outcome.drop();
            if (planned === 'retry') return Outcome.retry();
            return Outcome.retryAfter(DELAY_MS);
          },
          { workers: PLAN.length, settlementWindowMs: 200 },
        );
        await broker.start();
        await broker.publishMany(queue, PLAN.map((_, n) => ({ payload: { n } })));
        await retried.waitFor(2);
        // Two retries and two delays in the window, then the two retried rows delayed.
        await untilStats(broker, queue, (stats) => stats.retried === 6, 'every settlement');
        await broker.stop();

        const stats = broker.stats().subscriptions[0]!;
        expect(stats.settleErrors).toBe(0);
        expect(stats.acked).toBe(3);
        expect(stats.dropped).toBe(1);
        // Retried rows came straight back, their attempt counted.
        expect(retried.items.map((item) => item.attempt)).toEqual([2, 2]);
        const unfinished = mark ? 'processed_at IS NULL' : '1 = 1';
        if (mark) expect(await countRows(context.db, 'jobs', 'processed_at IS NOT NULL')).toBe(4);
        expect(await countRows(context.db, 'jobs', unfinished)).toBe(4);
        // Every row left is delayed and free: the two delayed at once, and the two retried then delayed.
        const cutoff = new Date(Date.now() + DELAY_MS / 2);
        const left = await context.db.query<{ retry_after: unknown; locked_until: unknown }>(
          `SELECT retry_after, locked_until FROM jobs WHERE ${unfinished}`,
        );
        expect(left).toHaveLength(4);
        for (const row of left) {
          expect(row.locked_until).toBeNull();
          expect(new Date(readTime(row.retry_after)).getTime()).toBeGreaterThan(cutoff.getTime());
        }
      });
    }

    it('settles rows with supplied text ids and, on Postgres, lease and due columns without a time zone', async () => {
      const table = defineTable({
        ...jobsDeclaration({ form: 'lease' }),
        id: { column: 'id', generated: false },
      });
      await createTable(stand, context.db, table);
      if (stand.kind === 'postgres') {
        await context.db.exec('ALTER TABLE jobs ALTER COLUMN locked_until TYPE TIMESTAMP, ALTER COLUMN retry_after TYPE TIMESTAMP');
      }
      const queue = table.queue<{ n: number }>('emails');
      const broker = createBroker(context.db, context.brokers, { leaseMs: 60_000 });
      const started = new Collector<string>();
      const allStarted = createDeferred();
      broker.subscribe(
        queue,
        async (message) => {
          started.push(message.id);
          if (started.items.length === 6) allStarted.resolve();
          await allStarted.promise;
          return message.payload.n % 2 === 0 ? Outcome.ack() : Outcome.retryAfter(DELAY_MS);
        },
        { workers: 6, settlementWindowMs: 200 },
      );
      await broker.start();
      const ids = ['order-1', 'order-2', 'Ω-3', 'order 4', "o'5", '6'];
      await broker.publishMany(queue, ids.map((id, n) => ({ id, payload: { n } })));
      await untilStats(broker, queue, (stats) => stats.acked === 3, 'three acks');
      await untilStats(broker, queue, (stats) => stats.retried === 3, 'three delays');
      await broker.stop();
      expect(broker.stats().subscriptions[0]!.settleErrors).toBe(0);
      expect(broker.stats().subscriptions[0]!.leasesLost).toBe(0);
      const left = await context.db.query<{ id: unknown; locked_until: unknown }>('SELECT id, locked_until FROM jobs ORDER BY id');
      expect(left.map((row) => String(row.id)).sort()).toEqual(['order-2', 'order 4', '6'].sort());
      for (const row of left) expect(row.locked_until).toBeNull();
    });

    it('a lease lost in the window fails that one delivery with LeaseLostError; the others settle', async () => {
      const table = jobsTable({ form: 'lease' });
      await createTable(stand, context.db, table);
      const queue = table.queue<{ n: number }>('emails');
      const broker = createBroker(context.db, context.brokers, { leaseMs: 60_000 });
      const errors = new Collector<unknown>();
      broker.on('error', (error) => errors.push(error));
      const started = new Collector<string>();
      const release = createDeferred();
      broker.subscribe(
        queue,
        async (message) => {
          started.push(message.id);
          await release.promise;
        },
        { workers: 4, settlementWindowMs: 200 },
      );
      await broker.start();
      await broker.publishMany(queue, [0, 1, 2, 3].map((n) => ({ payload: { n } })));
      await started.waitFor(4);
      // Another holder's token, as if the lease had run out and another broker had taken the row.
      const stolen = started.items[2]!;
      await context.db.query(
        `UPDATE jobs SET locked_until = ${placeholder(stand, 1)} WHERE id = ${placeholder(stand, 2)}`,
        [timeText(stand, new Date('2099-01-01T00:00:00.000Z')), stolen],
      );
      release.resolve();
      await errors.waitFor(1);
      await untilStats(broker, queue, (stats) => stats.acked === 3, 'the other acks');
      await broker.stop();
      expect(errors.items).toHaveLength(1);
      expect(errors.items[0]).toBeInstanceOf(LeaseLostError);
      expect(errors.items[0]).toMatchObject({ id: stolen });
      const left = await context.db.query<{ id: unknown }>('SELECT id FROM jobs');
      expect(left.map((row) => String(row.id))).toEqual([stolen]);
      expect(broker.stats().subscriptions[0]!.leasesLost).toBe(1);
    });

    it('stop sends the settlements waiting in a window at once', async () => {
      const table = jobsTable({ form: 'lease' });
      await createTable(stand, context.db, table);
      const queue = table.queue<{ n: number }>('emails');
      const broker: Broker = createBroker(context.db, context.brokers, { leaseMs: 60_000, stopTimeoutMs: 30_000 });
      const errors = new Collector<unknown>();
      broker.on('error', (error) => errors.push(error));
      const handled = new Collector<number>();
      const holderStarted = createDeferred();
      const releaseHolder = createDeferred();
      // A window far longer than the test, and one delivery still in work, so the window neither
      // runs out nor holds every lease of the subscription: only the stop can send it.
      broker.subscribe(
        queue,
        async (message) => {
          if (message.payload.n === 3) {
            holderStarted.resolve();
            await releaseHolder.promise;
            return;
          }
          await holderStarted.promise;
          handled.push(message.payload.n);
        },
        { workers: 4, settlementWindowMs: 600_000 },
      );
      await broker.start();
      await broker.publishMany(queue, [0, 1, 2, 3].map((n) => ({ payload: { n } })));
      await handled.waitFor(3);
      await untilStats(broker, queue, (stats) => stats.handled === 3, 'three handlers returned');
      expect(await countRows(context.db, 'jobs')).toBe(4);
      const stopping = broker.stop();
      releaseHolder.resolve();
      await stopping;
      expect(errors.items).toEqual([]);
      expect(broker.stats().subscriptions[0]!.acked).toBe(4);
      expect(await countRows(context.db, 'jobs')).toBe(0);
    });

    it('a worker takes its next message while its last settlement waits in the window', async () => {
      const table = jobsTable({ form: 'lease' });
      await createTable(stand, context.db, table);
      const queue = table.queue<{ n: number }>('emails');
      const broker: Broker = createBroker(context.db, context.brokers, { leaseMs: 60_000, stopTimeoutMs: 30_000 });
      const started = new Collector<number>();
      const releaseHolder = createDeferred();
      // Two workers: message 0 holds one of them, so the window (far longer than the test) is not
      // sent when message 1 settles; the other worker must still go on to message 2.
      broker.subscribe(
        queue,
        async (message) => {
          started.push(message.payload.n);
          if (message.payload.n === 0) await releaseHolder.promise;
        },
        { workers: 2, settlementWindowMs: 600_000 },
      );
      await broker.start();
      await broker.publish(queue, { n: 0 });
      await started.waitFor(1);
      await broker.publishMany(queue, [1, 2].map((n) => ({ payload: { n } })));
      await started.waitFor(3);
      // Message 1's ack is still waiting in the window: its row is there, leased.
      expect(await countRows(context.db, 'jobs')).toBe(3);
      const stopping = broker.stop();
      releaseHolder.resolve();
      await stopping;
      expect(broker.stats().subscriptions[0]!.acked).toBe(3);
      expect(await countRows(context.db, 'jobs')).toBe(0);
    });

    it('coalesceSettlements: false settles each delivery on its own', async () => {
      const table = jobsTable({ form: 'lease' });
      await createTable(stand, context.db, table);
      const queue = table.queue<{ n: number }>('emails');
      const broker = createBroker(context.db, context.brokers);
      const handled = new Collector<number>();
      broker.subscribe(queue, (message) => void handled.push(message.payload.n), { workers: 2, coalesceSettlements: false });
      await broker.start();
      await broker.publishMany(queue, [0, 1, 2].map((n) => ({ payload: { n } })));
      await untilStats(broker, queue, (stats) => stats.acked === 3, 'three acks');
      await broker.stop();
      expect(await countRows(context.db, 'jobs')).toBe(0);
    });

    it('runs one statement per kind for a whole window, whatever its size', async () => {
      const table = jobsTable({ form: 'lease' });
      await createTable(stand, context.db, table);
      const queue = table.queue<{ n: number }>('emails');
      const publisher = createBroker(context.db, context.brokers);
      await publisher.start();
      await publisher.publishMany(queue, Array.from({ length: 12 }, (_, n) => ({ payload: { n } })));
      const driver = await context.db.openDriver({ poolSize: 2 });
      const token = new Date('2090-01-01T00:00:00.000Z');
      await driver.execute({
        name: 'test.lease',
        sql: `UPDATE jobs SET locked_until = ${placeholder(stand, 1)}`,
        values: [token],
      });
      const ids = (await driver.execute({ name: 'test.ids', sql: 'SELECT id FROM jobs ORDER BY id', values: [] })).rows.map(
        (row) => row.id,
      );
      const names: string[] = [];
      const dialect = createDialect(stand.ddlDialect);
      const columns = (await driver.execute({ name: 'test.columns', sql: 'SELECT * FROM jobs WHERE 1 = 0', values: [] })).columns;
      const coalesced = new LeaseCoalescedSettlements({
        driver: countingDriver(driver, names),
        dialect,
        spec: table.spec,
        columns,
        deadLetter: undefined,
        windowMs: 600_000,
      });
      const slots = ids.map((id) => new LeaseSlot(String(id), id, token));
      // One row was taken by another holder before its settlement arrived.
      slots[5]!.token = new Date('2090-01-01T00:00:07.000Z');
      const answers = slots.map((slot, index) =>
        coalesced.settle(
          slot,
          index < 6
            ? { kind: 'finish' }
            : index < 9
              ? { kind: 'retry' }
              : { kind: 'retryAfter', at: new Date(Date.now() + DELAY_MS), delayMs: DELAY_MS },
        ),
      );
      await coalesced.flushNow();
      expect(await Promise.all(answers)).toEqual([
        ...Array.from({ length: 5 }, () => 'settled'),
        'notCarried',
        ...Array.from({ length: 6 }, () => 'settled'),
      ]);
      // Per kind: one statement that returns, or a locking select and one write.
      const perKind = (kind: string) => names.filter((name) => name.startsWith(`lease.settleMany.${kind}`)).length;
      for (const kind of ['finish', 'release', 'retryAfter']) expect([1, 2]).toContain(perKind(kind));
      expect(names.filter((name) => name.startsWith('lease.settleMany')).length).toBeLessThanOrEqual(6);
      expect(await countRows(context.db, 'jobs')).toBe(7);
      expect(await countRows(context.db, 'jobs', 'locked_until IS NULL')).toBe(6);
    });
  });
}

/** A time column as the admin connection reads it: a Date, or SQLite's text. */
function readTime(value: unknown): string | number | Date {
  return value instanceof Date ? value : String(value);
}

/** A token the way the driver writes it, for the admin connection's own statements. */
function timeText(stand: SuiteContext['stand'], at: Date): string {
  if (stand.kind === 'sqlite') return at.toISOString().replace('Z', '+00:00');
  if (stand.kind === 'mysql') return at.toISOString().replace('T', ' ').replace('Z', '');
  return at.toISOString();
}
