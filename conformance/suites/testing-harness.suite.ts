import { describe, expect, it } from 'vitest';
import { Outcome } from '../../src/index.js';
import { startTestBroker, type TestBroker } from '../../src/testing/index.js';
import { formsOf, jobsTable } from '../fixtures.js';
import type { SuiteContext } from '../run-conformance.js';
import { openServicePools } from './service-pools.js';

/**
 * `tablequeue/testing` on every stand: the harness creates the tables on the database it is
 * given (a URL, or the in-memory handle), runs the real broker and drops them at stop. Its waits
 * and assertions are tested in full on SQLite in memory (src/testing/test-broker.test.ts); here,
 * that the same holds through each database's own paths.
 */
export function testingHarnessSuite(context: SuiteContext): void {
  const { stand } = context;
  for (const form of formsOf(stand)) {
    describe(`${form} tablequeue/testing`, () => {
      it('records an ack, a retry and a dead letter, and drops its tables at stop', async () => {
        const table = jobsTable({ form, name: 'harness_jobs' });
        const queue = table.queue<{ n: number }>('work');
        const harness = await startTestBroker({ database: context.db.brokerDatabase as string | object, tables: [table] });
        try {
          const recorder = harness.record(queue, (message) => (message.payload.n === 1 ? Outcome.ack() : Outcome.retry()), {
            maxAttempts: 2,
            deadLetter: 'work_dead',
          });
          await harness.publish(queue, { n: 1 });
          const deadId = await harness.publish(queue, { n: 2 });

          await recorder.waitForSettled({ outcome: 'deadLetter' });
          await recorder.waitForSettled({ outcome: 'ack' });
          expect([...recorder.outcomes].sort()).toEqual(['ack', 'deadLetter', 'retry']);
          expect(recorder.settlements.find((settlement) => settlement.outcome === 'deadLetter')).toMatchObject({
            id: deadId,
            attempt: 2,
            deadLetter: { group: 'work_dead' },
          });
          await harness.waitForIdle();
          recorder.assertCalledTimes(3);
        } finally {
          await harness.stop();
        }
        expect(await tableExists(context, 'harness_jobs')).toBe(false);
      });
    });
  }

  it("runs over the service's own pool, which it leaves open", async () => {
    const [pool] = openServicePools(stand, context.db);
    let harness: TestBroker | undefined;
    try {
      const table = jobsTable({ form: 'lease', name: 'harness_pool_jobs' });
      const queue = table.queue<string>('work');
      harness = await startTestBroker({ database: pool!.database, tables: [table] });
      const recorder = harness.record(queue);
      await harness.publishMany(queue, [{ payload: 'a' }, { payload: 'b' }]);
      await recorder.waitForSettled({ count: 2, outcome: 'ack' });
      expect([...recorder.payloads].sort()).toEqual(['a', 'b']);
      await harness.stop();
      await pool!.ping();
    } finally {
      await harness?.stop();
      await pool!.end();
    }
  });
}

async function tableExists(context: SuiteContext, name: string): Promise<boolean> {
  const sql =
    context.stand.kind === 'sqlite'
      ? `SELECT name FROM sqlite_master WHERE type = 'table' AND name = '${name}'`
      : context.stand.kind === 'postgres'
        ? `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = '${name}'`
        : `SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = '${name}'`;
  return (await context.db.query(sql)).length > 0;
}
