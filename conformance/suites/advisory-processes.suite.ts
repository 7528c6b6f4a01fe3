import { describe, expect, it } from 'vitest';
import { Collector, countRows, createBroker, createTable, placeholder, waitForDatabase } from '../fixtures.js';
import { spawnWorker } from '../processes/spawn-worker.js';
import type { SuiteContext } from '../run-conformance.js';
import { advisoryDeclaration, advisoryTable } from './advisory-tables.js';

const GROUPS = ['g0', 'g1', 'g2', 'g3'];

/** The advisory lock form across processes: keys exclude across brokers, a killed one loses nothing. */
export function advisoryProcessSuite(context: SuiteContext): void {
  const { stand } = context;
  if (!stand.capabilities.supportsProcesses) return;
  describe('advisory lock form across processes', () => {
    // SQLite keeps keys in a registry per process: two processes on one file may share a key.
    it.skipIf(!stand.capabilities.supportsSessionLocks)(
      'WP-14: two brokers in two processes never handle rows of one key at the same time',
      async () => {
        const rows = 20;
        // Every row of a group shares its key, and each process reads every group with four workers.
        const declaration = advisoryDeclaration({ advisoryLock: 'lane-{queue}' });
        await createTable(stand, context.db, advisoryTable({ advisoryLock: 'lane-{queue}' }));
        const id = { postgres: 'BIGSERIAL PRIMARY KEY', mysql: 'BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY', sqlite: 'INTEGER PRIMARY KEY AUTOINCREMENT' }[stand.kind];
        await context.db.exec(`CREATE TABLE effects (id ${id}, grp VARCHAR(16) NOT NULL, item INTEGER NOT NULL, phase VARCHAR(8) NOT NULL)`);
        const values = [1, 2, 3].map((index) => placeholder(stand, index)).join(', ');
        const config = {
          database: context.db.url,
          table: declaration,
          queue: GROUPS[0],
          queues: GROUPS,
          workers: 4,
          mode: 'sequence',
          recordSql: `INSERT INTO effects (grp, item, phase) VALUES (${values})`,
        };
        const replicas = [spawnWorker(config), spawnWorker(config)];
        try {
          await Promise.all(replicas.map((replica) => replica.ready));
          const publisher = createBroker(context.db, context.brokers);
          await publisher.start();
          const table = advisoryTable({ advisoryLock: 'lane-{queue}' });
          for (const group of GROUPS) {
            await publisher.publishMany(
              table.queue<number>(group),
              Array.from({ length: rows }, (_, item) => ({ payload: item })),
            );
          }
          // The replicas are processes of their own: their handlers' progress shows only in the database.
          await waitForDatabase(
            async () => (await countRows(context.db, 'effects', "phase = 'end'")) >= GROUPS.length * rows,
            60_000,
            'every handler to end',
          );
        } finally {
          for (const replica of replicas) replica.child.kill('SIGTERM');
          await Promise.all(replicas.map((replica) => replica.exited));
        }
        // The database numbers the rows as they are written: within a key, each start follows the previous end.
        const events = await context.db.query<{ grp: string; item: unknown; phase: string }>(
          'SELECT grp, item, phase FROM effects ORDER BY id',
        );
        for (const group of GROUPS) {
          const ofGroup = events.filter((event) => event.grp === group);
          expect(ofGroup).toHaveLength(2 * rows);
          for (let index = 0; index < ofGroup.length; index += 2) {
            const [start, end] = [ofGroup[index]!, ofGroup[index + 1]!];
            expect([start.phase, end.phase, Number(end.item)], `group ${group}`).toEqual(['start', 'end', Number(start.item)]);
          }
        }
      },
    );

    it('a process killed with SIGKILL mid-handler returns its rows at once, each attempt spent', async () => {
      const table = advisoryTable();
      await createTable(stand, context.db, table);
      const queue = table.queue<number>('emails');
      const publisher = createBroker(context.db, context.brokers);
      await publisher.start();
      await publisher.publishMany(queue, Array.from({ length: 6 }, (_, index) => ({ payload: index })));
      const doomed = spawnWorker({
        database: context.db.url,
        table: advisoryDeclaration(),
        queue: 'emails',
        workers: 3,
        mode: 'hang',
        recordSql: 'SELECT 1',
      });
      await doomed.handlingAtLeast(3);
      doomed.child.kill('SIGKILL');
      await doomed.exited;
      const killedAt = Date.now();

      const survivor = createBroker(context.db, context.brokers);
      const handled = new Collector<{ id: string; attempt: number; at: number }>();
      survivor.subscribe(queue, (message) => void handled.push({ id: message.id, attempt: message.attempt, at: Date.now() }), {
        workers: 3,
      });
      await survivor.start();
      await handled.waitFor(6, 30_000);
      await survivor.stop();
      expect(new Set(handled.items.map((item) => item.id)).size).toBe(6);
      expect(await countRows(context.db, 'jobs')).toBe(0);
      const recovered = handled.items.filter((item) => doomed.handling.includes(item.id));
      expect(recovered).toHaveLength(3);
      // The dead sessions' locks went with them; the take had counted the first attempt.
      expect(recovered.every((item) => item.attempt === 2)).toBe(true);
      // Nothing waits for a lease to run out: the survivor's start-up and first claims are all it takes.
      expect(Math.max(...recovered.map((item) => item.at)) - killedAt).toBeLessThan(5_000);
    });
  });
}
