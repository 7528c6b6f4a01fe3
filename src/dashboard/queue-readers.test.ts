import { describe, expect, it } from 'vitest';
import type { GroupCounts } from '../admin/inspection.js';
import type { BrokerList, BrokerSeen } from './broker-directory.js';
import type { RelayView } from './dashboard-api.js';
import { queueReadersOf, relaysOfTable, someReaderCountsRowsInWork, unindexedRowsInWorkOf } from './queue-readers.js';

function broker(id: string, subscriptions: unknown[]): BrokerSeen {
  return { id, host: 'h', pid: 1, intervalMs: 1_000, seenMsAgo: 0, startedMsAgo: 0, subscriptions, relays: [] };
}

function list(brokers: BrokerSeen[], problem: string | null = null): BrokerList {
  return { table: 'tablequeue_brokers', brokers, staleCount: 0, problem };
}

function counts(group: string | null, ready: number): GroupCounts {
  return { group, ready, delayed: 0, inWork: 0, processed: 0, oldestReadyAgeSeconds: null, total: ready };
}

const jobs = { schema: undefined, name: 'jobs' };

describe('queueReadersOf', () => {
  it('flags groups with ready rows that no reporting subscription of the table reads', () => {
    const brokers = list([
      broker('a', [{ queue: 'jobs/emails', deadLetter: null }, { queue: 'other/emial' }]),
      broker('b', [{ queue: 'jobs/reports', deadLetter: 'reports.dead' }]),
    ]);
    const groups = [counts('emails', 3), counts('emial', 2), counts('reports', 1), counts('reports.dead', 4), counts('quiet', 0)];
    expect(queueReadersOf(brokers, jobs, groups)).toMatchObject({ brokers: 2, unreadGroups: ['emial'] });
  });

  it('leaves out the dead-letter group the operator names', () => {
    const brokers = list([broker('a', [{ queue: 'jobs/emails' }])]);
    expect(queueReadersOf(brokers, jobs, [counts('dead', 2), counts('emial', 1)], { kind: 'group', group: 'dead' })).toMatchObject({
      brokers: 1,
      unreadGroups: ['emial'],
    });
  });

  it('sums what the reporting subscriptions of each queue declare and count', () => {
    const brokers = list([
      broker('a', [{ queue: 'jobs/payments', form: 'rowLock', concurrency: { global: 5, perKey: 1 }, timedOut: 2, cancelled: 1 }, { queue: 'jobs/emails' }]),
      broker('b', [{ queue: 'jobs/payments', concurrency: { global: 5 }, rate: { limit: 50, perMs: 1_000, key: true }, timedOut: 1, cancelled: 'many' }]),
    ]);
    expect(queueReadersOf(brokers, jobs, [counts('payments', 1)])?.reported).toEqual([
      {
        group: 'payments',
        limits: ['at most 5 in work', 'at most 1 in work per key', 'at most 50 per 1000 ms per key'],
        countsRowsInWork: null,
        timedOut: 3,
        cancelled: 1,
      },
      { group: 'emails', limits: [], countsRowsInWork: null, timedOut: 0, cancelled: 0 },
    ]);
  });

  it('tells the queues whose lease claims count their rows in work, and names them while no index serves the count', () => {
    const brokers = list([
      broker('a', [
        { queue: 'jobs/payments', form: 'lease', concurrency: { global: 5 }, countsRowsInWork: 'concurrency' },
        { queue: 'jobs/emails', form: 'lease', countsRowsInWork: null },
        { queue: 'jobs/ordered', form: 'lease', countsRowsInWork: 'fifo' },
      ]),
      // The row lock form holds its limit with slot rows: it counts nothing.
      broker('b', [
        { queue: 'jobs/reports', form: 'rowLock', concurrency: { global: 2 }, countsRowsInWork: null },
        { queue: 'jobs/payments', form: 'lease', countsRowsInWork: null },
      ]),
      // A broker from before the report: a lease subscription under a limit counts.
      broker('c', [{ queue: 'jobs/older', form: 'lease', concurrency: { perKey: 1 } }, { queue: 'jobs/older-rows', form: 'rowLock', concurrency: { global: 1 } }]),
    ]);
    const readers = queueReadersOf(brokers, jobs, [counts('payments', 1)]);
    expect(readers?.reported.map((queue) => [queue.group, queue.countsRowsInWork])).toEqual([
      ['payments', 'concurrency'],
      ['emails', null],
      ['ordered', 'fifo'],
      ['reports', null],
      ['older', 'concurrency'],
      ['older-rows', null],
    ]);
    expect(someReaderCountsRowsInWork(readers)).toBe(true);
    const createIndexSql = 'CREATE INDEX jobs_in_work ON jobs (queue, locked_until)';
    expect(unindexedRowsInWorkOf(readers, { isPresent: false, createIndexSql })).toEqual({
      queues: [
        { group: 'payments', reason: 'concurrency' },
        { group: 'ordered', reason: 'fifo' },
        { group: 'older', reason: 'concurrency' },
      ],
      createIndexSql,
    });
    expect(unindexedRowsInWorkOf(readers, { isPresent: true, createIndexSql })).toBeNull();
    expect(unindexedRowsInWorkOf(readers, null)).toBeNull();
    expect(unindexedRowsInWorkOf(null, { isPresent: false, createIndexSql })).toBeNull();

    const uncounted = queueReadersOf(list([broker('a', [{ queue: 'jobs/emails', form: 'lease', concurrency: null, countsRowsInWork: null }])]), jobs, []);
    expect(someReaderCountsRowsInWork(uncounted)).toBe(false);
    expect(unindexedRowsInWorkOf(uncounted, { isPresent: false, createIndexSql })).toBeNull();
  });

  it('cannot tell without a heartbeat table or a reporting broker that reads the table', () => {
    const groups = [counts('emial', 2)];
    expect(queueReadersOf(list([], 'heartbeat table "tablequeue_brokers" cannot be read'), jobs, groups)).toBeNull();
    expect(queueReadersOf(list([]), jobs, groups)).toBeNull();
    expect(queueReadersOf(list([broker('a', [{ queue: 'other/emails' }, null, 'text', { queue: 7 }])]), jobs, groups)).toBeNull();
  });

  it('matches schemas where both name one, and a table without groups is read whole', () => {
    const brokers = list([broker('a', [{ queue: 'app.jobs/emails' }, { queue: 'flat' }])]);
    expect(queueReadersOf(brokers, { schema: 'app', name: 'jobs' }, [counts('emial', 1)])).toMatchObject({ brokers: 1, unreadGroups: ['emial'] });
    expect(queueReadersOf(brokers, jobs, [counts('emial', 1)])).toMatchObject({ brokers: 1, unreadGroups: ['emial'] });
    expect(queueReadersOf(brokers, { schema: 'other', name: 'jobs' }, [counts('emial', 1)])).toBeNull();
    expect(queueReadersOf(brokers, { schema: undefined, name: 'flat' }, [counts(null, 5)])).toMatchObject({ brokers: 1, unreadGroups: [] });
  });
});

describe('relaysOfTable', () => {
  const relay = (outbox: string): RelayView => ({
    outbox,
    destination: 'nats jetstream at 127.0.0.1:4222',
    relayed: 7,
    failedSends: 3,
    namesInWork: 1,
    namesWaitingToRetry: 1,
    waitingNames: [{ name: 'orders', failedSends: 3, retryInMs: 5_000, error: 'DestinationError: down' }],
  });
  const relaying = (relays: RelayView[]): BrokerSeen => ({ ...broker('a', []), relays });

  it('lists the relays of the table with the broker that runs each', () => {
    const reported = relaysOfTable(list([relaying([relay('public.outbox'), relay('other')])]), { schema: 'public', name: 'outbox' });
    const { outbox: _outbox, ...shown } = relay('public.outbox');
    expect(reported).toEqual([{ ...shown, broker: { id: 'a', host: 'h', pid: 1 } }]);
  });

  it('matches a table named with or without its schema', () => {
    const brokers = list([relaying([relay('outbox'), relay('audit.outbox'), relay('public.outbox')])]);
    expect(relaysOfTable(brokers, { schema: 'public', name: 'outbox' })).toHaveLength(2);
    expect(relaysOfTable(brokers, { name: 'outbox' })).toHaveLength(3);
  });

  it('tells nothing when the heartbeat table cannot be read', () => {
    expect(relaysOfTable(list([], 'heartbeat table "tablequeue_brokers" cannot be read'), { name: 'outbox' })).toBeNull();
  });
});
