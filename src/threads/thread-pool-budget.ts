import { ConnectionBudgetError } from '../errors.js';

export interface ThreadedSubscription {
  readonly name: string;
  readonly threads: number;
  readonly connections: number;
}

/**
 * WP-13: the service pool, every thread's own pool and the LISTEN session (when the broker opens
 * one) must fit under `connectionLimit`. They are added in that order, and the first that would
 * exceed the limit is named with the limit and the sum.
 */
export function checkConnectionLimit(options: {
  limit: number | undefined;
  poolSize: number;
  subscriptions: readonly ThreadedSubscription[];
  /** 1 when the broker holds a session of its own for LISTEN (Postgres wake-ups), else 0. */
  listenerConnections: number;
}): void {
  const { limit, poolSize, listenerConnections } = options;
  if (limit === undefined) return;
  if (poolSize > limit) {
    throw new ConnectionBudgetError(
      `the service pool of ${poolSize} connections exceeds connectionLimit ${limit}; lower pool.max or raise the limit`,
    );
  }
  let sum = poolSize;
  for (const subscription of options.subscriptions) {
    const added = subscription.threads * subscription.connections;
    sum += added;
    if (sum > limit) {
      throw new ConnectionBudgetError(
        `subscription "${subscription.name}" would open ${subscription.threads} threads x ${subscription.connections} connections; ` +
          `with the service pool of ${poolSize} and the threads before it that makes ${sum}, over connectionLimit ${limit}; ` +
          'lower threads or connections, shrink pool.max, or raise the limit',
      );
    }
  }
  if (sum + listenerConnections > limit) {
    throw new ConnectionBudgetError(
      `the LISTEN connection for wake-ups across processes would make ${sum + listenerConnections} with the service pool of ${poolSize} ` +
        `and the threads' ${sum - poolSize}, over connectionLimit ${limit}; set listen: false, shrink pool.max or threads, or raise the limit`,
    );
  }
}
