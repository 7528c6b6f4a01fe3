import { Broker, type BrokerStats } from '../../src/broker/broker.js';
import type { SubscribeOptionsBase } from '../../src/subscription/subscription-options.js';
import { BENCH_QUEUE_NAME } from './bench-table.js';
import { DrainWatch, settlesWithin, type DrainMeasurement, type DrainRun } from './drain-watch.js';

/** Handlers are no-ops, so stop only waits for settlements and claims in flight. */
const STOP_TIMEOUT_MS = 10_000;
/** Beyond the stop timeout, how long to wait for the pool to close before moving on. */
const CLOSE_GRACE_MS = 10_000;

/** Subscription options beyond `workers` and `batch`, e.g. a setting of the lease form. */
export type ExtraSubscribeOptions = Omit<SubscribeOptionsBase<unknown>, 'workers' | 'batch'>;

/**
 * Drains the table with the service as a user runs it: one subscription with `workers` no-op
 * handlers (a batch handler with `run.batch`) on a pool of `workers + 2` connections, every other
 * option at its default unless `extraOptions` sets it.
 */
export async function drainWithService(run: DrainRun, extraOptions: ExtraSubscribeOptions = {}): Promise<DrainMeasurement> {
  const watch = new DrainWatch(run.messages, run.signal);
  const broker = new Broker({ database: run.database.url, pool: { max: run.workers + 2 } });
  broker.on('error', (error) => watch.recordError(error));
  const queue = run.table.queue(BENCH_QUEUE_NAME);
  if (run.batch === undefined) {
    broker.subscribe(queue, () => watch.recordHandled(), { ...extraOptions, workers: run.workers });
  } else {
    const handleBatch = (messages: readonly unknown[]) => {
      for (let index = 0; index < messages.length; index += 1) watch.recordHandled();
    };
    broker.subscribe(queue, handleBatch, { ...extraOptions, workers: run.workers, batch: run.batch });
  }
  await broker.start();
  let stats: BrokerStats;
  try {
    await watch.finished;
  } finally {
    stats = broker.stats();
    await settlesWithin(broker.stop({ timeoutMs: STOP_TIMEOUT_MS }), STOP_TIMEOUT_MS + CLOSE_GRACE_MS);
  }
  const [subscription] = stats.subscriptions;
  return watch.measurement({
    claims: subscription?.claims ?? 0,
    emptyClaims: subscription?.emptyClaims ?? 0,
    maxConnectionsHeld: stats.pool.maxHeld,
    deadlocksRetried: subscription?.deadlocksRetried ?? 0,
  });
}
