import type { Message } from '../delivery/message.js';
import type { TableSpec } from '../table/table-spec.js';
import type { SettledOutcome, SubscriptionMetrics } from './broker-metrics.js';
import type { SubscriptionTracing } from './tracing.js';

/**
 * What a subscription's delivery path reports to: metrics always, spans only when an
 * OpenTelemetry SDK was registered at start (`tracing` is undefined otherwise, checked once per
 * delivery instead of calling a no-op tracer).
 */
export class SubscriptionObserver {
  readonly tracing: SubscriptionTracing | undefined;
  readonly #metrics: SubscriptionMetrics;
  /** The column whose value is the row's publish (due) time on a first attempt; undefined when none is. */
  readonly #dueColumn: string | undefined;

  constructor(options: { spec: TableSpec; metrics: SubscriptionMetrics; tracing: SubscriptionTracing | undefined }) {
    const { spec } = options;
    this.#metrics = options.metrics;
    this.tracing = options.tracing;
    // The publisher writes retry_after as its now plus the delay (the database's now on a
    // database-clock table), and only a settlement or another claim changes it later, each of
    // which counts the attempt. So on a first attempt the column is the publish time (the due
    // time for a delayed row). Without an attempt column a retried row cannot be told apart.
    this.#dueColumn = spec.retryAfter !== undefined && spec.attempt !== undefined ? spec.retryAfter : undefined;
  }

  /**
   * Just before the handler call: observes the publish-to-handler latency of first attempts and
   * returns the start for `handlerEnded`.
   */
  handlerStarting(messages: readonly Message<unknown>[]): number {
    const column = this.#dueColumn;
    if (column !== undefined) {
      const nowMs = Date.now();
      for (const message of messages) {
        if (message.attempt !== 1) continue;
        const dueMs = instantMs(message.row[column]);
        // A host clock behind the database's (database-clock tables) would read negative.
        if (dueMs !== undefined) this.#metrics.publishToHandlerSeconds.observe(Math.max(0, nowMs - dueMs) / 1000);
      }
    }
    return performance.now();
  }

  handlerEnded(startedAt: number): void {
    this.#metrics.handlerSeconds.observe((performance.now() - startedAt) / 1000);
  }

  settled(outcome: SettledOutcome): void {
    this.#metrics.countSettled(outcome);
  }
}

/** A time column as the drivers return it: a Date (pg, mysql2) or fixed-width UTC text (SQLite). */
function instantMs(value: unknown): number | undefined {
  const ms = value instanceof Date ? value.getTime() : typeof value === 'string' ? Date.parse(value) : Number.NaN;
  return Number.isFinite(ms) ? ms : undefined;
}
