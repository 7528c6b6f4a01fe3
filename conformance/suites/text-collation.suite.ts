import { describe, expect, it } from 'vitest';
import { createDialect } from '../../src/dialect/create-dialect.js';
import { Collector, countRows, createBroker, createTable, jobsTable } from '../fixtures.js';
import type { SuiteContext } from '../run-conformance.js';

/** Names that a case-, accent- or space-blind comparison takes for `welcome`. */
const LOOKALIKES = ['WELCOME', 'Welcome', 'welcome ', 'wélcome'];

/** Queue names compare exactly: case, accents and trailing spaces make other queues. */
export function textCollationSuite(context: SuiteContext): void {
  const { stand } = context;
  // Only where a table made by hand can compare these columns loosely (MySQL, MariaDB).
  const checksCollations = createDialect(stand.ddlDialect).schema.textCollation !== undefined;

  describe('queue names compare exactly', () => {
    it('a subscriber of "welcome" never gets the rows of "WELCOME", "Welcome", "welcome " or "wélcome"; each gets its own', async () => {
      const table = jobsTable({ form: 'lease' });
      await createTable(stand, context.db, table);
      const publisher = createBroker(context.db, context.brokers);
      await publisher.start();
      // The lookalikes first: they come before the real row in claim order, so a loose
      // comparison hands one of them to the first claim.
      for (const name of LOOKALIKES) await publisher.publish(table.queue(name), name);
      await publisher.publish(table.queue('welcome'), 'welcome');

      const welcome = createBroker(context.db, context.brokers);
      const toWelcome = new Collector<unknown>();
      welcome.subscribe(table.queue('welcome'), (message) => void toWelcome.push(message.payload), { workers: 1 });
      await welcome.start();
      await toWelcome.waitFor(1);
      await welcome.stop();
      expect(toWelcome.items).toEqual(['welcome']);
      expect(await countRows(context.db, 'jobs')).toBe(LOOKALIKES.length);

      const others = createBroker(context.db, context.brokers);
      const received = new Collector<{ queue: string; payload: unknown }>();
      for (const name of LOOKALIKES) {
        others.subscribe(table.queue(name), (message) => void received.push({ queue: name, payload: message.payload }));
      }
      await others.start();
      await received.waitFor(LOOKALIKES.length);
      await others.stop();
      expect(received.items.map(({ queue, payload }) => [queue, payload]).sort()).toEqual(
        LOOKALIKES.map((name) => [name, name]).sort(),
      );
      expect(await countRows(context.db, 'jobs')).toBe(0);
    });

    it.skipIf(!checksCollations)(
      'start() warns once about a hand-made queue column that ignores case, with the ALTER TABLE that fixes it',
      async () => {
        const table = jobsTable({ form: 'lease' });
        await createTable(stand, context.db, table);
        await context.db.exec('ALTER TABLE jobs MODIFY queue VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL');
        const broker = createBroker(context.db, context.brokers);
        const warnings: string[] = [];
        broker.on('warning', (message) => warnings.push(message));
        // Two subscriptions of one table: the column is named once.
        broker.subscribe(table.queue('welcome'), () => undefined);
        broker.subscribe(table.queue('other'), () => undefined);
        await broker.start();
        await broker.stop();
        expect(warnings).toHaveLength(1);
        expect(warnings[0]).toContain('column "queue" has collation utf8mb4_general_ci, which ignores case, accents and trailing spaces');
        const fix = /make it compare exactly with: (ALTER TABLE .*)$/.exec(warnings[0]!)?.[1];
        expect(fix).toMatch(/^ALTER TABLE `jobs` MODIFY `queue` varchar\(255\) CHARACTER SET utf8mb4 COLLATE \w+ NOT NULL$/);

        // The statement the warning gives is the fix: the next start has nothing to say.
        await context.db.exec(fix!);
        const fixed = createBroker(context.db, context.brokers);
        const after: string[] = [];
        fixed.on('warning', (message) => after.push(message));
        fixed.subscribe(table.queue('welcome'), () => undefined);
        await fixed.start();
        await fixed.stop();
        expect(after).toEqual([]);
      },
    );
  });
}
