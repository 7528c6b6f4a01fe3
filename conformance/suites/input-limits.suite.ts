import { setTimeout as delay } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { isConnectionLost } from '../../src/driver/connection-loan.js';
import type { DatabaseKind } from '../../src/driver/driver.js';
import { Broker, DeclarationError, defineTable, Outcome, StatementError, type PublishItem } from '../../src/index.js';
import { Collector, countRows, createBroker, createTable, formsOf, jobsDeclaration, placeholder } from '../fixtures.js';
import type { SuiteContext } from '../run-conformance.js';
import { openServiceWriters } from './service-pools.js';

/**
 * Finds the session of the test database that is part way through writing rows, thousands of
 * them, and ends it; none on SQLite. Rows a transaction has not committed are invisible to the
 * admin session, so progress is read elsewhere.
 */
const WRITER_SESSION_SQL: Record<DatabaseKind, { find: string; kill: (id: string) => string } | undefined> = {
  // Inserts extend the heap whether they commit or not: 32 pages are about 3,500 of these rows.
  postgres: {
    find:
      'SELECT pid AS id FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() ' +
      "AND query LIKE 'INSERT INTO%' AND pg_relation_size('jobs') >= 32 * 8192",
    kill: (id) => `SELECT pg_terminate_backend(${Number(id)})`,
  },
  // A transaction that has written four chunks; an insert that commits on its own writes one.
  mysql: {
    find:
      'SELECT p.ID AS id FROM information_schema.PROCESSLIST p JOIN information_schema.INNODB_TRX t ON t.trx_mysql_thread_id = p.ID ' +
      'WHERE p.DB = DATABASE() AND p.ID <> CONNECTION_ID() AND t.trx_rows_modified >= 2000',
    kill: (id) => `KILL ${Number(id)}`,
  },
  sqlite: undefined,
};

const TRANSACTION_VIEW_REFRESH_MS = 150;
const YEAR_MS = 365.25 * 24 * 3_600_000;

/** What a publish refuses before it writes, and what one publishMany call leaves behind: all of it or nothing. */
export function inputLimitsSuite(context: SuiteContext): void {
  const { stand } = context;
  const form = formsOf(stand).at(-1)!;
  const table = () => defineTable(jobsDeclaration({ form }));
  const items = (count: number): PublishItem<unknown>[] => Array.from({ length: count }, (_, index) => ({ payload: { index } }));
  const writerSession = WRITER_SESSION_SQL[stand.kind];

  describe(`${form} input limits`, () => {
    it.each([
      ['a priority beyond the column', { priority: 40_000 }, /item 700: priority must be a whole number from -32768 to 32767/],
      ['a delay that ends after year 9999', { delayMs: 1e16 }, /item 700: a delayMs of 10000000000000000 ends after year 9999/],
      ['a run time in year 10000', { runAt: new Date('+010000-01-01T00:00:00Z') }, /item 700: runAt \+010000-01-01T00:00:00.000Z is outside years 1 to 9999/],
      ['a payload JSON would change', { payload: { price: Number.NaN } }, /item 700: the payload would not come back as it was sent, since JSON changes payload.price: NaN/],
    ])('publishMany with %s in one item writes no row and names the item', async (_, bad, message) => {
      await createTable(stand, context.db, table());
      const broker = createBroker(context.db, context.brokers);
      await broker.start();
      const batch = items(1_000);
      batch[700] = { ...batch[700]!, ...bad };
      await expect(broker.publishMany(table().queue('emails'), batch)).rejects.toThrow(message);
      expect(await countRows(context.db, 'jobs')).toBe(0);
    });

    it('publishMany whose insert fails part way writes no row', async () => {
      const supplied = defineTable({ ...jobsDeclaration({ form }), id: { column: 'id', generated: false } });
      await createTable(stand, context.db, supplied);
      const broker = createBroker(context.db, context.brokers);
      await broker.start();
      // The same id twice, 690 rows apart: the first chunk goes in, the second breaks the key.
      const batch = Array.from({ length: 1_000 }, (_, index) => ({ payload: index, id: `job-${index === 700 ? 10 : index}` }));
      await expect(broker.publishMany(supplied.queue('emails'), batch)).rejects.toThrow(StatementError);
      expect(await countRows(context.db, 'jobs')).toBe(0);
      expect(await broker.publishMany(supplied.queue('emails'), batch.slice(0, 700))).toBe(700);
      expect(await countRows(context.db, 'jobs')).toBe(700);
    });

    it('publishes made at once stand alone: the one whose id is taken fails, the others are written', async () => {
      const supplied = defineTable({ ...jobsDeclaration({ form }), id: { column: 'id', generated: false } });
      await createTable(stand, context.db, supplied);
      const broker = createBroker(context.db, context.brokers);
      await broker.start();
      const queue = supplied.queue('emails');
      await broker.publish(queue, { n: -1 }, { id: 'job-taken' });
      // On SQLite they wait for its one handle together and commit in one transaction.
      const publishes = Array.from({ length: 20 }, (_, n) => broker.publish(queue, { n }, { id: n === 7 ? 'job-taken' : `job-${n}` }));
      const outcomes = await Promise.allSettled(publishes);
      expect(outcomes.map((outcome) => outcome.status)).toEqual(Array.from({ length: 20 }, (_, n) => (n === 7 ? 'rejected' : 'fulfilled')));
      expect((outcomes[7] as PromiseRejectedResult).reason).toBeInstanceOf(StatementError);
      expect(await countRows(context.db, 'jobs')).toBe(20);
      expect(await countRows(context.db, 'jobs', "id = 'job-taken'")).toBe(1);
    });

    it('a whole number given as the id of a text id column is stored and delivered as its digits', async () => {
      const supplied = defineTable({ ...jobsDeclaration({ form }), id: { column: 'id', generated: false } });
      await createTable(stand, context.db, supplied);
      const publisher = createBroker(context.db, context.brokers);
      await publisher.start();
      expect(await publisher.publish(supplied.queue('emails'), { n: 1 }, { id: 42 })).toBe('42');
      expect(await publisher.publishMany(supplied.queue('emails'), [{ payload: { n: 2 }, id: 43 }])).toBe(1);
      expect((await context.db.query('SELECT id FROM jobs ORDER BY id')).map((row) => row.id)).toEqual(['42', '43']);
      const consumer = createBroker(context.db, context.brokers);
      const handled = new Collector<string>();
      consumer.subscribe(supplied.queue('emails'), (message) => handled.push(message.id));
      await consumer.start();
      expect((await handled.waitFor(2)).sort()).toEqual(['42', '43']);
    });

    it("publishMany on the service's own pool is all or nothing, and with tx commits or rolls back with the service's transaction", async () => {
      const supplied = defineTable({ ...jobsDeclaration({ form }), id: { column: 'id', generated: false } });
      await createTable(stand, context.db, supplied);
      const queue = supplied.queue('emails');
      const batch = Array.from({ length: 1_000 }, (_, index) => ({ payload: index, id: `job-${index}` }));
      for (const pool of openServiceWriters(stand, context.db)) {
        try {
          const broker = new Broker({ database: pool.database, pollIntervalMs: 50 });
          await broker.start();
          const duplicated = batch.map((item, index) => (index === 700 ? { ...item, id: 'job-10' } : item));
          await expect(broker.publishMany(queue, duplicated), pool.label).rejects.toThrow(StatementError);
          expect(await countRows(context.db, 'jobs'), pool.label).toBe(0);
          const rolledBack = await pool.beginTransaction();
          await broker.publishMany(queue, batch, { tx: rolledBack.connection });
          await rolledBack.finish('ROLLBACK');
          expect(await countRows(context.db, 'jobs'), pool.label).toBe(0);
          const committed = await pool.beginTransaction();
          await broker.publishMany(queue, batch, { tx: committed.connection });
          await committed.finish('COMMIT');
          expect(await countRows(context.db, 'jobs'), pool.label).toBe(1_000);
          await broker.stop();
          await context.db.exec('DELETE FROM jobs');
        } finally {
          await pool.end();
        }
      }
    });

    it.skipIf(writerSession === undefined)('publishMany whose connection is killed part way rejects and writes no row', async () => {
      await createTable(stand, context.db, table());
      const broker = createBroker(context.db, context.brokers);
      await broker.start();
      let hasSettled = false;
      const publishing = broker.publishMany(table().queue('emails'), items(100_000)).then(
        () => 'resolved',
        (error: unknown) => error,
      );
      void publishing.finally(() => (hasSettled = true));
      let writer: string | undefined;
      while (writer === undefined && !hasSettled) {
        // InnoDB refreshes INNODB_TRX only when it was not read for 0.1 s: faster polls read a stale copy.
        await delay(TRANSACTION_VIEW_REFRESH_MS);
        const [row] = await context.db.query<{ id: unknown }>(writerSession!.find);
        writer = row === undefined ? undefined : String(row.id);
      }
      expect(writer, 'the session writing the rows, seen before the call ended').toBeDefined();
      await context.db.query(writerSession!.kill(writer!));
      const outcome = await publishing;
      expect(outcome).toBeInstanceOf(StatementError);
      expect(isConnectionLost(outcome)).toBe(true);
      expect(await countRows(context.db, 'jobs')).toBe(0);
    });

    it('instants from year 1 to year 9999 are stored and compared as instants', async () => {
      await createTable(stand, context.db, table());
      const queue = table().queue('emails');
      const broker = createBroker(context.db, context.brokers);
      const handled = new Collector<unknown>();
      broker.subscribe(queue, (message) => void handled.push(message.payload));
      await broker.start();
      await broker.publish(queue, 'last instant', { runAt: new Date('9999-12-31T23:59:59.999Z') });
      await broker.publish(queue, 'first instant', { runAt: new Date('0001-01-01T00:00:00.000Z') });
      await broker.publish(queue, 'now');
      await handled.waitFor(2);
      await broker.stop();
      expect(handled.items).toEqual(['first instant', 'now']);
      expect(await countRows(context.db, 'jobs')).toBe(1);
    });

    it('a publish due after year 9999 or before year 1 is refused before any write', async () => {
      await createTable(stand, context.db, table());
      const queue = table().queue('emails');
      const broker = createBroker(context.db, context.brokers);
      await broker.start();
      await expect(broker.publish(queue, 'x', { delayMs: 9_000 * YEAR_MS })).rejects.toThrow(DeclarationError);
      await expect(broker.publish(queue, 'x', { delayMs: 1e16 })).rejects.toThrow(DeclarationError);
      await expect(broker.publish(queue, 'x', { runAt: new Date('+010000-01-01T00:00:00Z') })).rejects.toThrow(DeclarationError);
      await expect(broker.publish(queue, 'x', { runAt: new Date('0000-12-31T23:59:59.999Z') })).rejects.toThrow(DeclarationError);
      await expect(broker.publish(queue, 'x', { priority: -32_769 })).rejects.toThrow(DeclarationError);
      expect(await countRows(context.db, 'jobs')).toBe(0);
    });

    it.each([
      ['Outcome.retryAfter', () => Outcome.retryAfter(9_000 * YEAR_MS)],
      ['an outcome literal', () => ({ kind: 'retryAfter', delayMs: 1e16 }) as Outcome],
    ])('a handler asking with %s for a retry after year 9999 fails as a handler error and is retried after the backoff', async (_, outcome) => {
      await createTable(stand, context.db, table());
      const queue = table().queue('emails');
      const broker = createBroker(context.db, context.brokers);
      const errors = new Collector<{ error: unknown; phase: unknown }>();
      broker.on('error', (error, detail) => errors.push({ error, phase: detail['phase'] }));
      const attempts = new Collector<number>();
      broker.subscribe(
        queue,
        (message) => {
          attempts.push(message.attempt);
          return message.attempt === 1 ? outcome() : Outcome.ack();
        },
        { retryBackoff: { initialMs: 10, maxMs: 10 } },
      );
      await broker.start();
      await broker.publish(queue, 'later');
      await attempts.waitFor(2);
      await broker.stop();
      expect(attempts.items).toEqual([1, 2]);
      expect(errors.items).toHaveLength(1);
      expect(errors.items[0]).toMatchObject({ error: expect.any(DeclarationError), phase: 'handler' });
      expect(await countRows(context.db, 'jobs')).toBe(0);
    });

    it('a queue name of 255 characters outside the Basic Multilingual Plane is stored and read back unchanged', async () => {
      await createTable(stand, context.db, table());
      const name = '😀'.repeat(254) + 'é';
      const queue = table().queue(name);
      const broker = createBroker(context.db, context.brokers);
      const groups = new Collector<string | undefined>();
      broker.subscribe(queue, (message) => void groups.push(message.group));
      await broker.start();
      await broker.publish(queue, 'hello');
      await groups.waitFor(1);
      expect(groups.items).toEqual([name]);
    });

    it('a value the driver cannot bind fails the statement without being taken for a lost connection', async () => {
      const driver = await context.db.openDriver({ poolSize: 2 });
      const connection = await driver.acquire();
      const failure = await connection
        .execute({ name: 'test.bind-invalid-date', sql: `SELECT ${placeholder(stand, 1)} AS at`, values: [new Date(Number.NaN)] })
        .catch((error: unknown) => error);
      expect(failure).toBeInstanceOf(StatementError);
      expect((failure as StatementError).sqlState ?? '').not.toMatch(/^08/);
      expect(isConnectionLost(failure)).toBe(false);
      const after = await connection.execute({ name: 'test.after', sql: 'SELECT 1 AS one', values: [] });
      expect(Number(after.rows[0]!['one'])).toBe(1);
      connection.release();
    });
  });
}
