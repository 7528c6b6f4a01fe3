import { describe, expect, it } from 'vitest';
import { testHooksOf } from '../../src/broker/broker.js';
import { Collector, createBroker, createTable, formsOf, jobsTable, untilStats } from '../fixtures.js';
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
       * empty claims in the first second after one message, 14,000 by the third. The next claim
       * must come only once the wait it began has passed (without LISTEN, nothing else wakes it).
       */
      it('after claims side by side come back empty, the loop waits its poll instead of claiming again and again', async () => {
        const table = jobsTable({ form });
        await createTable(stand, context.db, table);
        const queue = table.queue('emails');
        const broker = createBroker(context.db, context.brokers, { pollIntervalMs: 1_600, listen: false });
        const seen = new Collector<string>();
        broker.subscribe(queue, (message) => void seen.push(message.id), { workers: 4 });
        const loop = testHooksOf(broker, queue).loop;
        loop.waiting.turnOn();
        loop.claimStarted.turnOn();
        await broker.start();
        expect(await loop.waiting.next({ what: 'the wait after the first empty claim' })).toBe(1_600);
        await broker.publish(queue, 1);
        await seen.waitFor(1, 5_000);
        // The row's settlement frees its worker, which ends a wait early by design (a settlement
        // can make rows claimable): the wait measured is one that begins after it.
        await untilStats(broker, queue, (stats) => stats.acked === 1 && stats.inWork === 0, 'the row settled and its worker idle');
        loop.waiting.clear();
        // Read before the wait begins, not after its signal: a pause of this process (a GC) between
        // the two would shorten the time measured below (CI saw 96.3 ms of a 100 ms wait).
        const waitBegan = performance.now();
        // A quick wait after rows: 1,600 ms / 16, doubled for each empty wait since.
        const waitMs = await loop.waiting.next({ what: 'a quick wait after the row' });
        expect(waitMs).toBeGreaterThanOrEqual(100);
        expect(waitMs).toBeLessThanOrEqual(1_600);
        loop.claimStarted.clear();
        await loop.claimStarted.next({ what: 'the claim after the quick wait' });
        // A timer may fire a millisecond early by the monotonic clock.
        expect(performance.now() - waitBegan).toBeGreaterThanOrEqual(waitMs - 2);
      });
    });
  }
}
