import { describe, expect, it } from 'vitest';
import { Collector, countRows, createBroker, createTable, formsOf, jobsDeclaration, jobsTable, placeholder, waitForDatabase } from '../fixtures.js';
import { spawnWorker } from '../processes/spawn-worker.js';
import type { SuiteContext } from '../run-conformance.js';

const ROWS = 2_000;

/** Brokers in separate processes on one table: replicas share rows, and a killed one loses nothing. */
export function processSuite(context: SuiteContext): void {
  const { stand } = context;
  if (!stand.capabilities.supportsProcesses) return;
  for (const form of formsOf(stand)) {
    describe(`${form} across processes`, () => {
      it(`WP-14: two brokers in two processes handle each of ${ROWS} rows exactly once`, async () => {
        const table = jobsTable({ form });
        await createTable(stand, context.db, table);
        await context.db.exec('CREATE TABLE effects (message_id VARCHAR(64) NOT NULL)');
        const publisher = createBroker(context.db, context.brokers);
        await publisher.start();
        await publisher.publishMany(
          table.queue('emails'),
          Array.from({ length: ROWS }, (_, index) => ({ payload: index })),
        );
        const config = {
          database: context.db.url,
          table: jobsDeclaration({ form }),
          queue: 'emails',
          workers: 4,
          mode: 'record',
          recordSql: `INSERT INTO effects (message_id) VALUES (${placeholder(stand, 1)})`,
        };
        const workers = [spawnWorker(config), spawnWorker(config)];
        await Promise.all(workers.map((worker) => worker.ready));
        // The brokers run in processes of their own: their progress shows only in the database.
        await waitForDatabase(
          async () => (await countRows(context.db, 'effects')) >= ROWS && (await countRows(context.db, 'jobs')) === 0,
          120_000,
          `${ROWS} effects and an empty queue`,
        );
        for (const worker of workers) worker.child.kill('SIGTERM');
        await Promise.all(workers.map((worker) => worker.exited));
        const [effects] = await context.db.query<{ total: unknown; distinct_ids: unknown }>(
          'SELECT COUNT(*) AS total, COUNT(DISTINCT message_id) AS distinct_ids FROM effects',
        );
        expect(Number(effects!.total)).toBe(ROWS);
        expect(Number(effects!.distinct_ids)).toBe(ROWS);
      });

      it('a process killed with SIGKILL in the middle of handlers loses nothing', async () => {
        const table = jobsTable({ form });
        await createTable(stand, context.db, table);
        const queue = table.queue<number>('emails');
        const publisher = createBroker(context.db, context.brokers);
        await publisher.start();
        await publisher.publishMany(queue, Array.from({ length: 6 }, (_, index) => ({ payload: index })));
        const leaseMs = 2_000;
        const doomed = spawnWorker({
          database: context.db.url,
          table: jobsDeclaration({ form }),
          queue: 'emails',
          workers: 3,
          mode: 'hang',
          recordSql: 'SELECT 1',
          leaseMs,
        });
        await doomed.handlingAtLeast(3);
        doomed.child.kill('SIGKILL');
        await doomed.exited;
        const killedAt = Date.now();

        const survivor = createBroker(context.db, context.brokers);
        const handled = new Collector<{ id: string; attempt: number; at: number }>();
        survivor.subscribe(queue, (message) => {
          handled.push({ id: message.id, attempt: message.attempt, at: Date.now() });
        }, { workers: 3 });
        await survivor.start();
        await handled.waitFor(6, 30_000);
        await survivor.stop();
        expect(new Set(handled.items.map((item) => item.id)).size).toBe(6);
        expect(await countRows(context.db, 'jobs')).toBe(0);
        const recovered = handled.items.filter((item) => doomed.handling.includes(item.id));
        expect(recovered).toHaveLength(3);
        if (form === 'rowLock') {
          // The server rolled back the dead session: the rows came back at once, no attempt spent.
          expect(recovered.every((item) => item.attempt === 1)).toBe(true);
        } else {
          // Leases name whole seconds, so the rows return within a second after the lease ran out.
          expect(recovered.every((item) => item.attempt === 2)).toBe(true);
          expect(Math.max(...recovered.map((item) => item.at)) - killedAt).toBeLessThan(leaseMs + 2_000);
        }
      });
    });
  }
}
