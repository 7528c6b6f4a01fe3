import { describe, expect, it } from 'vitest';
import { openDialect } from '../../src/broker/open-dialect.js';
import { bindStatement } from '../../src/statement.js';
import { Collector, createBroker, createTable, formsOf, jobsTable, placeholder, statsOf } from '../fixtures.js';
import type { SuiteContext } from '../run-conformance.js';

/** Rows held in work ahead of the free one: past the candidates a MySQL claim reads at first (64 past the rows wanted). */
const ROWS_HELD_AHEAD = 80;

/**
 * What a claim leaves alone in a table whose claim order puts the priority before the due time:
 * the delayed rows it passes on the way to a due one stay free for a cancel, and the rows another
 * transaction holds are passed without waiting however many lie ahead.
 */
export function rowLockClaimsSuite(context: SuiteContext): void {
  const { stand } = context;
  describe('claims past rows they cannot take', () => {
    for (const form of formsOf(stand)) {
      it(`${form}: a delayed row of a smaller priority, ahead of the due one in claim order, is cancelled at once while the claim that passed it runs`, async () => {
        const table = jobsTable({ form });
        await createTable(stand, context.db, table);
        const queue = table.queue<string>('emails');
        const publisher = createBroker(context.db, context.brokers);
        await publisher.start();
        const delayed = await publisher.publish(queue, 'delayed', { delayMs: 3_600_000, priority: -10 });
        await publisher.publish(queue, 'due', { priority: 0 });
        const worker = createBroker(context.db, context.brokers);
        const started = new Collector<string>();
        let release!: () => void;
        const released = new Promise<void>((resolve) => (release = resolve));
        worker.subscribe(queue, async (message) => {
          started.push(message.payload);
          await released;
        }, { workers: 1 });
        await worker.start();
        try {
          await started.waitFor(1);
          // Before the fix, MariaDB's claim kept its lock on the delayed row's index entry, and this
          // cancel waited for the handler (50 s, innodb_lock_wait_timeout) and failed.
          expect(await publisher.cancel(queue, delayed)).toEqual({ status: 'waiting' });
          expect(started.items).toEqual(['due']);
        } finally {
          release();
        }
      });
    }

    if (!stand.capabilities.supportsRowLock) return;
    it(`rowLock: a claim passes ${ROWS_HELD_AHEAD} rows another transaction holds at the head of the queue, and takes the one behind them`, async () => {
      const table = jobsTable({ form: 'rowLock' });
      await createTable(stand, context.db, table);
      const queue = table.queue<number>('emails');
      const publisher = createBroker(context.db, context.brokers);
      await publisher.start();
      await publisher.publishMany(queue, Array.from({ length: ROWS_HELD_AHEAD + 1 }, (_, index) => ({ payload: index, priority: index })));
      const driver = await context.db.openDriver({ poolSize: 2 });
      const holder = await driver.acquire();
      try {
        // Read committed: MySQL and MariaDB then lock the rows asked for alone, not the next one too.
        const dialect = await openDialect(driver);
        for (const begin of dialect.session.begin({ isolation: 'read committed' })) await holder.execute(bindStatement(begin, {}));
        // Published in turn, so the ids are 1 to 81 and the first 80 are the head in claim order.
        const held = await holder.execute({
          name: 'test.holdHead',
          sql: `SELECT id FROM jobs WHERE id <= ${placeholder(stand, 1)} FOR UPDATE`,
          values: [ROWS_HELD_AHEAD],
        });
        expect(held.rows).toHaveLength(ROWS_HELD_AHEAD);
        const worker = createBroker(context.db, context.brokers);
        const handled = new Collector<number>();
        worker.subscribe(queue, (message) => void handled.push(message.payload), { workers: 2 });
        await worker.start();
        await handled.waitFor(1);
        expect(handled.items).toEqual([ROWS_HELD_AHEAD]);
        expect(statsOf(worker, queue).acked).toBeLessThanOrEqual(1);
      } finally {
        await holder.execute({ name: 'test.rollback', sql: 'ROLLBACK', values: [] }).catch(() => undefined);
        holder.release();
        await driver.close();
      }
    });
  });
}
