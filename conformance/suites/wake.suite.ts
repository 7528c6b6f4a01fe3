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

      /**
       * Four workers claim side by side once a row was taken; after it, their claims come back
       * empty together (on Postgres in one gathered statement). They used to begin a wait each,
       * the second ending the first, and the two waits took turns claiming without pause: 2,000
       * empty claims in the first second after one message, 14,000 by the third. The poll's first
       * quick wait here is 60 s / 16 = 3.75 s, so the half second watched holds no further claim.
       */
      it('after claims side by side come back empty, the loop waits its poll instead of claiming again and again', async () => {
        const table = jobsTable({ form });
        await createTable(stand, context.db, table);
        const queue = table.queue('emails');
        const broker = createBroker(context.db, context.brokers, { pollIntervalMs: 60_000 });
        const seen = new Collector<string>();
        broker.subscribe(queue, (message) => void seen.push(message.id), { workers: 4 });
        const loop = testHooksOf(broker, queue).loop;
        loop.waiting.turnOn();
        await broker.start();
        expect(await loop.waiting.next({ what: 'the wait after the first empty claim' })).toBe(60_000);
        await broker.publish(queue, 1);
        await seen.waitFor(1, 5_000);
        loop.waiting.clear();
        expect(await loop.waiting.next({ what: 'the quick wait after the row' })).toBe(3_750);
        const claims = broker.stats().subscriptions[0]!.claims;
        // Watching for claims that should not come: only the passing of real time can show it. On
        // Postgres the publish's own notification may arrive after the row was handled and wake
        // the loop for one more claim.
        await new Promise((resolve) => setTimeout(resolve, 500));
        expect(broker.stats().subscriptions[0]!.claims).toBeLessThanOrEqual(claims + 2);
      });
    });
  }
}
