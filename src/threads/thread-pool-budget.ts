import { ConnectionBudgetError } from '../errors.js';

export interface ThreadedSubscription {
  readonly name: string;
  readonly threads: number;
  readonly connections: number;
}

/**
 * WP-13: the service pool plus every thread's own pool must fit under `connectionLimit`. The
 * first subscription that would exceed it is named with the limit and the sum.
 */
export function checkConnectionLimit(options: {
  limit: number | undefined;
  poolSize: number;
  subscriptions: readonly ThreadedSubscription[];
}): void {
  const { limit, poolSize } = options;
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
}
