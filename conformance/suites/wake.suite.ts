import { describe, expect, it } from 'vitest';
import { testHooksOf } from '../../src/broker/broker.js';
import { Collector, createBroker, createTable, formsOf, jobsTable } from '../fixtures.js';
import type { SuiteContext } from '../run-conformance.js';

/** A publish wakes this broker's subscriptions of its table and group at once. */
export function wakeSuite(context: SuiteContext): void {
  const { stand } = context;
  for (const form of formsOf(stand)) {
    describe(`${form} same-process wake`, () => {
      it('a publish is handled long before a 60 s poll interval', async () => {
        const table = jobsTable({ form });
        await createTable(stand, context.db, table);
        const queue = table.queue('emails');
        const broker = createBroker(context.db, context.brokers, { pollIntervalMs: 60_000 });
        const seen = new Collector<string>();
        broker.subscribe(queue, (message) => {
          seen.push(message.id);
        });
        const loop = testHooksOf(broker, queue).loop;
        loop.waiting.turnOn();
        await broker.start();
        // The first claim came back empty: the subscription waits out its 60 s interval.
        expect(await loop.waiting.next({ what: 'the wait after the first empty claim' })).toBe(60_000);
        const ids = [await broker.publish(queue, 1)];
        await seen.waitFor(1, 5_000);
        ids.push(await broker.publish(queue, 2));
        await seen.waitFor(2, 5_000);
        expect(seen.items).toEqual(ids);
        const stats = broker.stats().subscriptions[0]!;
        expect(stats.claims).toBeLessThanOrEqual(6);
      });
    });
  }
}
