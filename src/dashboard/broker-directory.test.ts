import { describe, expect, it } from 'vitest';
import { HEARTBEAT_AGE_COLUMNS, HEARTBEAT_COLUMNS } from '../dialect/heartbeat-statements.js';
import { brokerOf } from './broker-directory.js';

function row(entries: unknown): Record<string, unknown> {
  const c = HEARTBEAT_COLUMNS;
  return {
    [c.brokerId]: 'b1',
    [c.host]: 'app-1',
    [c.pid]: 4121,
    [c.intervalMs]: 10_000,
    [c.subscriptions]: typeof entries === 'string' ? entries : JSON.stringify(entries),
    [HEARTBEAT_AGE_COLUMNS.seenMsAgo]: 800,
    [HEARTBEAT_AGE_COLUMNS.startedMsAgo]: 60_000,
  };
}

const relay = {
  kind: 'relay',
  outbox: 'outbox',
  destination: 'billing webhook',
  isTransactional: false,
  relayed: 3,
  sends: 2,
  failedSends: 4,
  claims: 6,
  emptyClaims: 0,
  leasesLost: 0,
  namesInWork: 0,
  namesWaitingToRetry: 1,
  waitingNames: [{ name: 'invoices', failedSends: 4, retryInMs: 5_000, error: 'DestinationError: HTTP 503' }],
};

describe('brokerOf', () => {
  it('tells the relays in a beat from the subscriptions, a waiting name due again counted from the read', () => {
    const subscription = { queue: 'jobs/emails', form: 'lease' };
    const broker = brokerOf(row([subscription, relay]));
    expect(broker.subscriptions).toEqual([subscription]);
    expect(broker.relays).toEqual([
      {
        outbox: 'outbox',
        destination: 'billing webhook',
        relayed: 3,
        failedSends: 4,
        namesInWork: 0,
        namesWaitingToRetry: 1,
        waitingNames: [{ name: 'invoices', failedSends: 4, retryInMs: 4_200, error: 'DestinationError: HTTP 503' }],
      },
    ]);
    // Beaten 800 ms before the read: a name due 500 ms after the beat is due now, never overdue.
    const due = { ...relay, waitingNames: [{ ...relay.waitingNames[0], retryInMs: 500 }] };
    expect(brokerOf(row([due])).relays[0]!.waitingNames[0]!.retryInMs).toBe(0);
  });

  it('leaves out relay entries and waiting names written without the fields it reads, and a row that is not JSON', () => {
    const broken = { ...relay, waitingNames: [{ name: 'orders' }, 'junk', null, { name: 'x', failedSends: 1, retryInMs: 0, error: 7 }] };
    const broker = brokerOf(row([{ kind: 'relay', outbox: 'outbox' }, broken, null]));
    expect(broker.relays.map((found) => found.waitingNames)).toEqual([[]]);
    expect(broker.subscriptions).toEqual([null]);
    expect(brokerOf(row('{not json'))).toMatchObject({ subscriptions: [], relays: [] });
  });
});
