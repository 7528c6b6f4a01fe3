import { describe, expect, it } from 'vitest';
import {
  DeclarationError,
  defineTable,
  HandlerTimeoutError,
  Outcome,
  TIMEOUT_HEADER,
  type Broker,
  type Queue,
  type QueueTable,
  type SettledEvent,
} from '../../src/index.js';
import { createDeferred } from '../../src/internal/deferred.js';
import { timeoutGraceMs } from '../../src/subscription/delivery-runner.js';
import { Collector, countRows, createBroker, createTable, formsOf, jobsDeclaration, jobsTable, untilStats } from '../fixtures.js';
import type { SuiteContext } from '../run-conformance.js';
import { advisoryDeclaration } from './advisory-tables.js';
import { hourLongSleep, sleepsRunning, waitForSleep } from './stop-cancel.suite.js';

type TimeoutForm = 'rowLock' | 'lease' | 'advisory';

const POLL_INTERVAL_MS = 50;

function tableOf(form: TimeoutForm): QueueTable {
  return defineTable(form === 'advisory' ? advisoryDeclaration() : jobsDeclaration({ form }));
}

/** Every lifecycle event of `broker`, by name, in the order emitted. */
function collectEvents(broker: Broker): Record<'settled' | 'retrying' | 'deadLettered' | 'timedOut' | 'leaseLost', Collector<Record<string, unknown>>> {
  const events = {
    settled: new Collector<Record<string, unknown>>(),
    retrying: new Collector<Record<string, unknown>>(),
    deadLettered: new Collector<Record<string, unknown>>(),
    timedOut: new Collector<Record<string, unknown>>(),
    leaseLost: new Collector<Record<string, unknown>>(),
  };
  broker.on('settled', (event) => events.settled.push({ ...event }));
  broker.on('retrying', (event) => events.retrying.push({ ...event }));
  broker.on('deadLettered', (event) => events.deadLettered.push({ ...event }));
  broker.on('timedOut', (event) => events.timedOut.push({ ...event }));
  broker.on('leaseLost', (event) => events.leaseLost.push({ ...event }));
  return events;
}

function delivery(queue: Queue<unknown>, id: string, attempt: number): Record<string, unknown> {
  return { queue: queue.label, id, attempt, durationMs: expect.any(Number) as unknown };
}

/** Per-message timeouts (`timeoutMs` on a subscription or a publish) and the broker's lifecycle events. */
export function timeoutsSuite(context: SuiteContext): void {
  const { stand } = context;
  const forms: TimeoutForm[] = [...formsOf(stand), 'advisory'];

  describe('handler timeouts', () => {
    for (const form of forms) {
      it(`${form}: a handler that ignores its signal loses its row to another broker within timeoutMs and the grace`, async () => {
        const table = tableOf(form);
        await createTable(stand, context.db, table);
        const queue = table.queue('emails');
        const timeoutMs = 400;
        // The retry comes due this long after the timeout's settlement: time for the test to stop
        // the first broker, whose freed worker would otherwise claim the row again itself.
        const backoffMs = 300;
        const stuck = createDeferred();
        const started = createDeferred<number>();
        const signals: AbortSignal[] = [];
        const first = createBroker(context.db, context.brokers);
        const errors = new Collector<unknown>();
        first.on('error', (error) => errors.push(error));
        first.subscribe(
          queue,
          async (_message, handlerContext) => {
            signals.push(handlerContext.signal);
            started.resolve(performance.now());
            // Ignores its signal: waits on something the test releases only at the end.
            await stuck.promise;
          },
          { timeoutMs, retryBackoff: { initialMs: backoffMs, maxMs: backoffMs } },
        );
        try {
          await first.start();
          const id = await first.publish(queue, { n: 1 });
          const startedAt = await started.promise;

          const second = createBroker(context.db, context.brokers, { pollIntervalMs: POLL_INTERVAL_MS });
          const retried = new Collector<{ attempt: number; at: number }>();
          second.subscribe(queue, (message) => {
            retried.push({ attempt: message.attempt, at: performance.now() });
          });
          await second.start();
          // Its worker is free again although the handler never returned.
          await untilStats(first, queue, (stats) => stats.timedOut === 1 && stats.inWork === 0, 'the timed-out delivery to leave its worker');
          expect(first.metrics()).toMatch(/^tablequeue_timed_out_total\{[^}]*\} 1$/m);
          await first.stop();
          const [again] = await retried.waitFor(1);
          expect(again!.attempt).toBe(2);
          // The bound: the timeout, its grace, the retry's backoff, a poll of the other broker, and
          // room for a loaded machine's claim and settlement round trips.
          expect(again!.at - startedAt).toBeLessThan(timeoutMs + timeoutGraceMs(timeoutMs) + backoffMs + POLL_INTERVAL_MS + 1_500);
          expect(signals[0]!.aborted).toBe(true);
          expect(signals[0]!.reason).toBeInstanceOf(HandlerTimeoutError);
          const [reported] = await errors.waitFor(1);
          expect(reported).toBeInstanceOf(HandlerTimeoutError);
          expect((reported as HandlerTimeoutError).id).toBe(id);
          await second.stop();
          expect(await countRows(context.db, 'jobs')).toBe(0);
        } finally {
          stuck.resolve();
        }
      });
    }

    // SQLite statements run to their end inside their call: none waits on the server.
    const waitingForms = stand.capabilities.hasSingleWriter ? [] : forms;
    for (const form of waitingForms) {
      it(`${form}: a transactional handler blocked in a statement on context.tx past timeoutMs has it cancelled, and the row is retried`, async () => {
        const table = tableOf(form);
        await createTable(stand, context.db, table);
        const queue = table.queue('emails');
        const backoffMs = 300;
        const first = createBroker(context.db, context.brokers);
        first.on('error', () => undefined);
        const started = new Collector<number>();
        first.subscribe(
          queue,
          async (message, handlerContext) => {
            started.push(message.attempt);
            await handlerContext.tx!.query(hourLongSleep(context));
          },
          { transactional: true, timeoutMs: 300, retryBackoff: { initialMs: backoffMs, maxMs: backoffMs } },
        );
        await first.start();
        await first.publish(queue, {});
        await started.waitFor(1);
        await waitForSleep(context);
        const second = createBroker(context.db, context.brokers, { pollIntervalMs: POLL_INTERVAL_MS });
        const retried = new Collector<number>();
        second.subscribe(queue, (message) => retried.push(message.attempt));
        await second.start();
        await untilStats(first, queue, (stats) => stats.timedOut === 1 && stats.inWork === 0, 'the timed-out delivery to settle');
        // The retry is written after the cancel, in the delivery's own transaction or fenced: the
        // attempt counts, and nothing of the handler's runs on the server any more.
        expect(await sleepsRunning(context)).toBe(0);
        await first.stop();
        expect(await retried.waitFor(1)).toEqual([2]);
        await second.stop();
        expect(await countRows(context.db, 'jobs')).toBe(0);
      });
    }

    for (const form of formsOf(stand)) {
      it(`${form}: a handler that honours its signal fails with the timeout, and the row is retried by the same broker`, async () => {
        const table = jobsTable({ form });
        await createTable(stand, context.db, table);
        const queue = table.queue('emails');
        const broker = createBroker(context.db, context.brokers);
        broker.on('error', () => undefined);
        const events = collectEvents(broker);
        const attempts = new Collector<number>();
        broker.subscribe(
          queue,
          async (message, handlerContext) => {
            attempts.push(message.attempt);
            if (message.attempt > 1) return Outcome.ack();
            await new Promise((resolve) => handlerContext.signal.addEventListener('abort', resolve, { once: true }));
            throw handlerContext.signal.reason;
          },
          { timeoutMs: 200, retryBackoff: { initialMs: 1, maxMs: 1 } },
        );
        await broker.start();
        const id = await broker.publish(queue, {});
        await events.settled.waitFor(2);
        expect(attempts.items).toEqual([1, 2]);
        expect(events.timedOut.items).toEqual([{ ...delivery(queue, id, 1), timeoutMs: 200 }]);
        const [failed, acked] = events.settled.items as unknown as [SettledEvent, SettledEvent];
        expect(failed).toEqual({ ...delivery(queue, id, 1), outcome: 'retryAfter', nextAttemptAt: expect.any(Date), error: expect.any(HandlerTimeoutError) });
        expect(acked).toEqual({ ...delivery(queue, id, 2), outcome: 'ack' });
        expect(failed.durationMs).toBeGreaterThanOrEqual(200);
        expect(broker.stats().subscriptions[0]!.timedOut).toBe(1);
      });
    }

    it("a message's own timeoutMs from publish overrides the subscription's", async () => {
      const table = jobsTable({ form: 'lease' });
      await createTable(stand, context.db, table);
      const queue = table.queue('emails');
      const broker = createBroker(context.db, context.brokers);
      broker.on('error', () => undefined);
      const events = collectEvents(broker);
      const headers = new Collector<Record<string, string>>();
      broker.subscribe(
        queue,
        async (message, handlerContext) => {
          headers.push(message.headers);
          if (message.attempt > 1) return Outcome.ack();
          await new Promise((resolve) => handlerContext.signal.addEventListener('abort', resolve, { once: true }));
          throw handlerContext.signal.reason;
        },
        { timeoutMs: 60_000, retryBackoff: { initialMs: 1, maxMs: 1 } },
      );
      await broker.start();
      const id = await broker.publish(queue, {}, { timeoutMs: 150, headers: { tenant: 't1' } });
      await events.settled.waitFor(2);
      expect(headers.items[0]).toEqual({ tenant: 't1', [TIMEOUT_HEADER]: '150' });
      expect(events.timedOut.items).toEqual([{ ...delivery(queue, id, 1), timeoutMs: 150 }]);
    });

    it('refuses timeoutMs at publish on a table without a headers column', async () => {
      const table = defineTable({ ...jobsDeclaration({ form: 'lease' }), headers: undefined });
      await createTable(stand, context.db, table);
      const queue = table.queue('emails');
      const broker = createBroker(context.db, context.brokers);
      await broker.start();
      await expect(broker.publish(queue, {}, { timeoutMs: 100 })).rejects.toThrow(DeclarationError);
      await expect(broker.publish(queue, {}, { timeoutMs: 100 })).rejects.toThrow(/timeoutMs option travels in the header "tablequeue-timeout-ms".*no headers column/);
      expect(await countRows(context.db, 'jobs')).toBe(0);
    });
  });

  describe('lifecycle events', () => {
    for (const form of formsOf(stand)) {
      it(`${form}: settled, retrying and deadLettered carry the queue, id, attempt, duration and what applies`, async () => {
        const table = jobsTable({ form });
        await createTable(stand, context.db, table);
        const queue = table.queue('emails');
        const broker = createBroker(context.db, context.brokers);
        broker.on('error', () => undefined);
        broker.on('warning', () => undefined);
        const events = collectEvents(broker);
        const failure = new Error('always fails');
        broker.subscribe(
          queue,
          (message) => {
            const kind = (message.payload as { kind: string }).kind;
            if (kind === 'ack') return Outcome.ack();
            if (kind === 'drop') return Outcome.drop();
            if (kind === 'retry' && message.attempt === 1) return Outcome.retry();
            if (kind === 'retry') return Outcome.ack();
            throw failure;
          },
          { maxAttempts: 2, deadLetter: 'emails.dead', retryBackoff: { initialMs: 1, maxMs: 1 } },
        );
        await broker.start();
        const acked = await broker.publish(queue, { kind: 'ack' });
        await events.settled.waitFor(1);
        const dropped = await broker.publish(queue, { kind: 'drop' });
        await events.settled.waitFor(2);
        const retried = await broker.publish(queue, { kind: 'retry' });
        await events.settled.waitFor(4);
        const failing = await broker.publish(queue, { kind: 'fail' });
        await events.settled.waitFor(6);
        expect(events.settled.items).toEqual([
          { ...delivery(queue, acked, 1), outcome: 'ack' },
          { ...delivery(queue, dropped, 1), outcome: 'drop' },
          { ...delivery(queue, retried, 1), outcome: 'retry', nextAttemptAt: expect.any(Date) },
          { ...delivery(queue, retried, 2), outcome: 'ack' },
          { ...delivery(queue, failing, 1), outcome: 'retryAfter', nextAttemptAt: expect.any(Date), error: failure },
          { ...delivery(queue, failing, 2), outcome: 'deadLetter', error: failure },
        ]);
        expect(events.retrying.items).toEqual([
          { ...delivery(queue, retried, 1), nextAttemptAt: expect.any(Date) },
          { ...delivery(queue, failing, 1), nextAttemptAt: expect.any(Date), error: failure },
        ]);
        expect(events.deadLettered.items).toEqual([{ ...delivery(queue, failing, 2), deadLetter: { group: 'emails.dead' }, error: failure }]);
        expect(events.timedOut.items).toEqual([]);
        expect(events.leaseLost.items).toEqual([]);
      });
    }

    it('leaseLost: a lease that ran out while the handler ran, found by its settlement', async () => {
      const table = jobsTable({ form: 'lease' });
      await createTable(stand, context.db, table);
      const queue = table.queue('emails');
      const first = createBroker(context.db, context.brokers, { leaseMs: 30_000 });
      first.on('error', () => undefined);
      const events = collectEvents(first);
      const started = createDeferred();
      const release = createDeferred();
      first.subscribe(queue, async () => {
        started.resolve();
        await release.promise;
      });
      await first.start();
      const id = await first.publish(queue, {});
      await started.promise;
      // The lease runs out as if the holder stalled past it (lease.suite.ts does the same), and a
      // second broker with a longer lease, so another token, takes the row.
      await context.db.exec("UPDATE jobs SET locked_until = '2000-01-01 00:00:00'");
      const second = createBroker(context.db, context.brokers, { leaseMs: 60_000 });
      const taken = new Collector<number>();
      const releaseSecond = createDeferred();
      second.subscribe(queue, async (message) => {
        taken.push(message.attempt);
        await releaseSecond.promise;
      });
      await second.start();
      await taken.waitFor(1);
      release.resolve();
      const [lost] = await events.leaseLost.waitFor(1);
      expect(lost).toEqual(delivery(queue, id, 1));
      expect(events.settled.items).toEqual([]);
      releaseSecond.resolve();
    });

    it('cancelled: a message cancelled while its handler runs', async () => {
      const table = jobsTable({ form: 'lease' });
      await createTable(stand, context.db, table);
      const queue = table.queue('emails');
      const broker = createBroker(context.db, context.brokers);
      const cancelled = new Collector<Record<string, unknown>>();
      broker.on('cancelled', (event) => cancelled.push({ ...event }));
      const settled = collectEvents(broker).settled;
      const started = createDeferred();
      broker.subscribe(queue, async (_message, handlerContext) => {
        started.resolve();
        await new Promise((resolve) => handlerContext.signal.addEventListener('abort', resolve, { once: true }));
      });
      await broker.start();
      const id = await broker.publish(queue, {});
      await started.promise;
      await broker.cancel(queue, id);
      expect(await cancelled.waitFor(1)).toEqual([delivery(queue, id, 1)]);
      expect(settled.items).toEqual([]);
    });

    it('builds no event while nothing listens, and starts when a listener comes', async () => {
      const table = jobsTable({ form: 'lease' });
      await createTable(stand, context.db, table);
      const queue = table.queue('emails');
      const broker = createBroker(context.db, context.brokers);
      broker.subscribe(queue, () => Outcome.ack());
      await broker.start();
      await broker.publish(queue, {});
      await untilStats(broker, queue, (stats) => stats.acked === 1, 'the first message acked');
      const settled = new Collector<SettledEvent>();
      broker.on('settled', (event) => settled.push(event));
      const id = await broker.publish(queue, {});
      const [event] = await settled.waitFor(1);
      expect(event).toEqual({ ...delivery(queue, id, 1), outcome: 'ack' });
      expect(settled.items).toHaveLength(1);
    });
  });
}
