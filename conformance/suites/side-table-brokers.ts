/**
 * What the side tables suite's brokers declare, in the test's process and in replica processes
 * alike: everything that makes a broker create a side table when it starts.
 */
import type { Broker, BrokerOptions, QueueTable, TableDeclaration } from '../../src/index.js';

/** A lease table whose rows are kept once processed (retention has something to prune) and keyed (throttled publishes). */
export const SIDE_TABLE_JOBS: TableDeclaration = {
  table: 'jobs',
  id: 'id',
  group: 'queue',
  payload: 'payload',
  headers: 'headers',
  attempt: 'attempt',
  retryAfter: 'retry_after',
  lockedUntil: 'locked_until',
  processedAt: 'processed_at',
  dedupeKey: 'dedupe_key',
};

/**
 * The heartbeat on; no LISTEN, so a cancel from another broker reaches a handler only through the
 * cancellations table that its broker reads every poll; leases long enough that no renewal finds
 * a cancelled row gone first.
 */
export const SIDE_TABLE_BROKER_OPTIONS = {
  heartbeat: { intervalMs: 60_000 },
  listen: false,
  pollIntervalMs: 50,
  leaseMs: 120_000,
  stopTimeoutMs: 2_000,
} as const satisfies Partial<BrokerOptions>;

export interface SideTableWork {
  onHandling(id: string): void;
  onAborted(id: string, reason: unknown): void;
}

/**
 * Declares what creates each side table at start: the heartbeat (an option), a schedule (the
 * schedules table), a retention (the maintenance table), and a subscription to `group` (queue
 * controls and cancellations), whose handler works until its signal aborts.
 */
export function declareEverySideTable(broker: Broker, table: QueueTable, group: string, work: SideTableWork): void {
  // Fires at 03:00 only: a firing during the test would be harmless, into a queue nobody reads.
  broker.schedule('nightly-report', table.queue('reports'), { cron: '0 3 * * *' });
  broker.retain(table, { processedForMs: 3_600_000 });
  broker.subscribe(table.queue(group), async (message, context) => {
    work.onHandling(message.id);
    await new Promise((resolve) => context.signal.addEventListener('abort', resolve, { once: true }));
    work.onAborted(message.id, context.signal.reason);
  });
}
