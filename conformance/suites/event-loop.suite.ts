import { describe, expect, it } from 'vitest';
import { Outcome } from '../../src/index.js';
import { Collector, countRows, createBroker, createTable, formsOf, jobsTable } from '../fixtures.js';
import type { SuiteContext } from '../run-conformance.js';

/**
 * SQLite answers every statement synchronously, so only there can a drain starve the event loop
 * by itself; elsewhere a shorter drain shows the same and keeps the suite quick.
 */
const SINGLE_WRITER_DRAIN_ROWS = 20_000;
const NETWORK_DRAIN_ROWS = 2_000;
const INTERVAL_MS = 50;

/** Counts the ticks of a 50 ms interval between `start()` and `stop()`. */
class IntervalProbe {
  /** One item per tick, so a test can wait for a number of them. */
  readonly tickCollector = new Collector<number>();
  #timer: NodeJS.Timeout | undefined;
  #startedAt = 0;
  #elapsedMs = 0;

  get ticks(): number {
    return this.tickCollector.items.length;
  }

  start(): void {
    this.#startedAt = performance.now();
    this.#timer = setInterval(() => this.tickCollector.push(performance.now()), INTERVAL_MS);
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#elapsedMs = performance.now() - this.#startedAt;
  }

  get elapsedMs(): number {
    return this.#elapsedMs;
  }
}

/**
 * A drain leaves the event loop free: timers, HTTP requests and `stop()` run while a queue has a
 * backlog, also when every statement answers synchronously (SQLite) and when a row is retried at
 * once forever.
 */
export function eventLoopSuite(context: SuiteContext): void {
  const { stand } = context;
  const drainRows = stand.capabilities.hasSingleWriter ? SINGLE_WRITER_DRAIN_ROWS : NETWORK_DRAIN_ROWS;
  for (const form of formsOf(stand)) {
    describe(`${form} drains and the event loop`, () => {
      it(`a ${drainRows}-row drain lets a 50 ms interval fire at least once per 100 ms, and /metrics answers during it`, async () => {
        const table = jobsTable({ form });
        await createTable(stand, context.db, table);
        const queue = table.queue('emails');
        const broker = createBroker(context.db, context.brokers);
        const handled = new Collector<number>();
        broker.subscribe(queue, (message) => handled.push(Number((message.payload as { n: number }).n)), { workers: 8 });
        const publisher = createBroker(context.db, context.brokers);
        await publisher.start();
        await publisher.publishMany(queue, Array.from({ length: drainRows }, (_, n) => ({ payload: { n } })));
        const endpoint = await broker.serveMetrics({ port: 0 });
        const probe = new IntervalProbe();
        probe.start();
        await broker.start();
        await handled.waitFor(100, 60_000);
        const metrics = await fetch(endpoint.url);
        const handledWhenAnswered = handled.items.length;
        expect(metrics.status).toBe(200);
        await handled.waitFor(drainRows, 120_000);
        probe.stop();
        await broker.stop();
        expect(handledWhenAnswered).toBeLessThan(drainRows);
        expect(probe.ticks).toBeGreaterThanOrEqual(Math.floor(probe.elapsedMs / 100));
        expect(await countRows(context.db, 'jobs')).toBe(0);
      });

      it('a handler that always asks for an immediate retry leaves timers running, and stop() resolves within its timeout', async () => {
        const table = jobsTable({ form, withRetryAfter: false });
        await createTable(stand, context.db, table);
        const queue = table.queue('emails');
        const broker = createBroker(context.db, context.brokers);
        const attempts = new Collector<number>();
        broker.subscribe(queue, (message) => {
          attempts.push(message.attempt);
          return Outcome.retry();
        });
        await broker.start();
        await broker.publish(queue, { n: 1 });
        await attempts.waitFor(50);
        const probe = new IntervalProbe();
        probe.start();
        // Six ticks of the interval while the row is retried at once, over and over: a starved
        // event loop would time this out.
        await probe.tickCollector.waitFor(6, 5_000);
        probe.stop();
        const stopStartedAt = performance.now();
        await broker.stop({ timeoutMs: 1_000 });
        expect(performance.now() - stopStartedAt).toBeLessThan(1_000);
        expect(probe.ticks).toBeGreaterThanOrEqual(Math.floor(probe.elapsedMs / 100));
        expect(await countRows(context.db, 'jobs')).toBe(1);
      });
    });
  }
}
