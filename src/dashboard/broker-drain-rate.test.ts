import { describe, expect, it } from 'vitest';
import type { BrokerList, BrokerSeen } from './broker-directory.js';
import { BrokerDrainRate } from './broker-drain-rate.js';

function listOf(brokers: BrokerSeen[]): BrokerList {
  return { table: 'tablequeue_brokers', brokers, staleCount: 0, problem: null };
}

function broker(id: string, seenMsAgo: number, subscriptions: unknown[]): BrokerSeen {
  return { id, host: 'h', pid: 1, intervalMs: 1_000, seenMsAgo, startedMsAgo: 60_000, subscriptions, relays: [] };
}

describe('BrokerDrainRate', () => {
  it('derives each broker’s rate from acked and dropped rows between two beats, on the watched tables only', () => {
    const rate = new BrokerDrainRate(['jobs']);
    const first = [{ queue: 'jobs/emails', acked: 100, dropped: 0 }, { queue: 'other/x', acked: 5_000 }];
    expect(rate.update(listOf([broker('a', 0, first)]), 10_000)).toBe(0);
    // The same beat read again half a second later changes nothing.
    expect(rate.update(listOf([broker('a', 500, first)]), 10_500)).toBe(0);
    const second = [{ queue: 'jobs/emails', acked: 280, dropped: 20 }, { queue: 'other/x', acked: 9_000 }];
    expect(rate.update(listOf([broker('a', 0, second)]), 12_000)).toBe(100);
    // Until the next beat the rate holds.
    expect(rate.update(listOf([broker('a', 400, second)]), 12_400)).toBe(100);
  });

  it('sums brokers, forgets the ones gone, and ignores subscriptions it cannot read', () => {
    const rate = new BrokerDrainRate(['app.jobs']);
    rate.update(listOf([broker('a', 0, [{ queue: 'app.jobs/q', acked: 0 }]), broker('b', 0, [{ queue: 'app.jobs', acked: 0 }, 'junk'])]), 0);
    const total = rate.update(
      listOf([broker('a', 0, [{ queue: 'app.jobs/q', acked: 10 }]), broker('b', 0, [{ queue: 'app.jobs', acked: 30 }, null])]),
      1_000,
    );
    expect(total).toBe(40);
    expect(rate.update(listOf([broker('b', 100, [{ queue: 'app.jobs', acked: 30 }])]), 1_100)).toBe(30);
  });
});
