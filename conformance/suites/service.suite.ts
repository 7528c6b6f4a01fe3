import { describe, expect, it } from 'vitest';
import { Broker, StatementError } from '../../src/index.js';
import { Collector, countRows, createBroker, createTable, formsOf, jobsTable, waitForDatabase } from '../fixtures.js';
import type { SuiteContext } from '../run-conformance.js';
import type { TestDatabase } from '../stand.js';
import { openServicePools } from './service-pools.js';

/** The service's own pools and transactions, failed claims, and connections the server kills. */
export function serviceSuite(context: SuiteContext): void {
  const { stand } = context;
  const form = formsOf(stand)[0]!;
  describe(`${form} with the service's own pool`, () => {
    it('runs on a pool the service passes in, and leaves it open after stop', async () => {
      const table = jobsTable({ form });
      await createTable(stand, context.db, table);
      for (const pool of openServicePools(stand, context.db)) {
        try {
          const broker = new Broker({ database: pool.database, pollIntervalMs: 50 });
          const seen = new Collector<string>();
          broker.subscribe(table.queue<string>('emails'), (message) => {
            seen.push(message.payload);
          });
          await broker.start();
          await broker.publish(table.queue('emails'), pool.label);
          await seen.waitFor(1);
          await broker.stop();
          expect(seen.items).toEqual([pool.label]);
          await pool.ping();
        } finally {
          await pool.end();
        }
      }
    });

    it('publish with tx commits and rolls back with the service transaction', async () => {
      const table = jobsTable({ form });
      await createTable(stand, context.db, table);
      const queue = table.queue<string>('emails');
      for (const pool of openServicePools(stand, context.db)) {
        try {
          const broker = new Broker({ database: pool.database, pollIntervalMs: 50 });
          await broker.start();
          const rolledBack = await pool.beginTransaction();
          await broker.publish(queue, 'never', { tx: rolledBack.connection });
          await rolledBack.finish('ROLLBACK');
          const committed = await pool.beginTransaction();
          await broker.publishMany(queue, [{ payload: 'kept' }, { payload: 'kept too' }], { tx: committed.connection });
          await committed.finish('COMMIT');
          await broker.stop();
          const rows = await context.db.query<{ n: unknown }>('SELECT COUNT(*) AS n FROM jobs');
          expect(Number(rows[0]!.n)).toBe(2);
          await context.db.exec('DELETE FROM jobs');
        } finally {
          await pool.end();
        }
      }
    });
  });

  describe(`${form} failures`, () => {
    it('a failed claim reaches the error event and the next claim waits one second', async () => {
      const table = jobsTable({ form });
      await createTable(stand, context.db, table);
      const broker = createBroker(context.db, context.brokers, { pollIntervalMs: 20 });
      const failures = new Collector<{ error: unknown; at: number }>();
      broker.on('error', (error, detail) => {
        if (detail['phase'] === 'claim') failures.push({ error, at: Date.now() });
      });
      broker.subscribe(table.queue('emails'), () => undefined);
      await broker.start();
      await context.db.exec('DROP TABLE jobs');
      await failures.waitFor(2);
      const [first, second] = failures.items;
      expect(first!.error).toBeInstanceOf(StatementError);
      expect(second!.at - first!.at).toBeGreaterThanOrEqual(990);
      await createTable(stand, context.db, table);
      // The subscription carries on once the table is back: a row published now is handled.
      await broker.publish(table.queue('emails'), 'back');
      await waitForEmptyQueue(context.db);
    });

    if (stand.kind !== 'sqlite') {
      it('carries on after the server kills every broker connection, losing nothing', async () => {
        const table = jobsTable({ form });
        await createTable(stand, context.db, table);
        const queue = table.queue<number>('emails');
        const broker = createBroker(context.db, context.brokers, { pollIntervalMs: 50 });
        broker.on('error', () => undefined);
        const seen = new Collector<number>();
        broker.subscribe(queue, (message) => {
          seen.push(message.payload);
        }, { workers: 2 });
        await broker.start();
        await broker.publishMany(queue, [{ payload: 1 }, { payload: 2 }]);
        await seen.waitFor(2);
        expect(await killOtherConnections(context)).toBeGreaterThan(0);
        // The publish may meet killed pooled connections, one per idle connection the pool
        // kept; a service retries it, as here, until the pool has opened a live one.
        for (let attempt = 1; ; attempt += 1) {
          try {
            await broker.publishMany(queue, [{ payload: 3 }, { payload: 4 }]);
            break;
          } catch (error) {
            if (attempt > 10) throw error;
          }
        }
        await seen.waitFor(4, 30_000);
        // A delivery whose connection died before its settlement committed comes back (at least
        // once): wait for the queue to empty rather than for a count of handler calls.
        await waitForEmptyQueue(context.db);
        expect([...new Set(seen.items)].sort()).toEqual([1, 2, 3, 4]);
      });
    }
  });
}

/**
 * The database tells when the queue is empty: a delivery whose connection the server ended may
 * run again, so the broker's counts are no measure of it.
 */
async function waitForEmptyQueue(db: TestDatabase): Promise<void> {
  await waitForDatabase(async () => (await countRows(db, 'jobs')) === 0, 20_000, 'the row published after the table came back to be handled');
}

/** Ends every session on the test database but the admin's own, as a server restart would. */
async function killOtherConnections(context: SuiteContext): Promise<number> {
  if (context.stand.kind === 'postgres') {
    const rows = await context.db.query(
      'SELECT pg_terminate_backend(pid) AS killed FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()',
    );
    return rows.length;
  }
  const sessions = await context.db.query<{ id: unknown }>(
    'SELECT id FROM information_schema.processlist WHERE db = DATABASE() AND id <> CONNECTION_ID()',
  );
  for (const session of sessions) await context.db.exec(`KILL ${Number(session.id)}`);
  return sessions.length;
}
