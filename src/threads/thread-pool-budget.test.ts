import { describe, expect, it } from 'vitest';
import { ConnectionBudgetError } from '../errors.js';
import { checkConnectionLimit } from './thread-pool-budget.js';

const threaded = [{ name: 'jobs/render', threads: 2, connections: 2 }];

describe('checkConnectionLimit', () => {
  it('counts the LISTEN session after the pool and the threads', () => {
    expect(() => checkConnectionLimit({ limit: 15, poolSize: 10, subscriptions: threaded, listenerConnections: 1 })).not.toThrow();
    expect(() => checkConnectionLimit({ limit: 14, poolSize: 10, subscriptions: threaded, listenerConnections: 0 })).not.toThrow();
    expect(() => checkConnectionLimit({ limit: 14, poolSize: 10, subscriptions: threaded, listenerConnections: 1 })).toThrow(
      new ConnectionBudgetError(
        "the LISTEN connection for wake-ups across processes would make 15 with the service pool of 10 and the threads' 4, " +
          'over connectionLimit 14; set listen: false, shrink pool.max or threads, or raise the limit',
      ),
    );
  });

  it('names the subscription whose threads pass the limit before the listener is counted', () => {
    expect(() => checkConnectionLimit({ limit: 13, poolSize: 10, subscriptions: threaded, listenerConnections: 1 })).toThrow(
      'subscription "jobs/render" would open 2 threads x 2 connections; with the service pool of 10 and the threads before it that makes 14',
    );
  });

  it('checks nothing without a limit', () => {
    expect(() => checkConnectionLimit({ limit: undefined, poolSize: 100, subscriptions: threaded, listenerConnections: 1 })).not.toThrow();
  });
});
