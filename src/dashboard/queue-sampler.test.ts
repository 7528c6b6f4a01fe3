import { describe, expect, it } from 'vitest';
import type { GroupCounts, PeekedRow, QueueInspector, TableInspection } from '../admin/inspection.js';
import type { BrokerList } from './broker-directory.js';
import { drainedBetween, QueueSampler } from './queue-sampler.js';

function counts(group: string, ready: number, extra: Partial<GroupCounts> = {}): GroupCounts {
  return { group, ready, delayed: 0, inWork: 0, processed: 0, oldestReadyAgeSeconds: null, ...extra };
}

/** An inspector that answers the inspections it is given, one per call, with read times a second apart. */
function scriptedInspector(rounds: { groups: GroupCounts[]; deadLettered?: number }[]): QueueInspector {
  let call = 0;
  return {
    inspect: (): Promise<TableInspection> => {
      const round = rounds[Math.min(call, rounds.length - 1)]!;
      const readAt = new Date(Date.UTC(2030, 0, 1, 0, 0, call));
      call += 1;
      return Promise.resolve({ table: 'jobs', groups: round.groups, deadLettered: round.deadLettered ?? 0, readAt });
    },
    peek: () => Promise.resolve([]),
    requeue: () => Promise.resolve(0),
    purge: () => Promise.resolve(0),
    readInWorkIndex: () => Promise.resolve(null),
    close: () => Promise.resolve(),
  };
}

const NO_BROKERS: BrokerList = { table: 'tablequeue_brokers', brokers: [], staleCount: 0, problem: null };

describe('drainedBetween', () => {
  const at = 0;
  it('counts processed rows exactly on a table that marks them', () => {
    expect(drainedBetween({ at, depth: 10, processed: 5, deadLettered: 0 }, { at, depth: 30, processed: 12, deadLettered: 0 })).toBe(7);
  });

  it('reads the net fall in depth on a table that deletes on ack, dead letters left out', () => {
    expect(drainedBetween({ at, depth: 100, processed: 0, deadLettered: 1 }, { at, depth: 60, processed: 0, deadLettered: 4 })).toBe(37);
    expect(drainedBetween({ at, depth: 60, processed: 0, deadLettered: 0 }, { at, depth: 90, processed: 0, deadLettered: 0 })).toBe(0);
  });
});

describe('QueueSampler', () => {
  it('keeps the latest counts, leaves the dead-letter group out and lists drained queues with zeros', async () => {
    const sampler = new QueueSampler({
      tables: [
        {
          table: 'jobs',
          deadLetter: { kind: 'group', group: 'dead' },
          inspector: scriptedInspector([
            { groups: [counts('dead', 2), counts('emails', 30), counts('reports', 4)], deadLettered: 2 },
            { groups: [counts('dead', 2), counts('reports', 4)], deadLettered: 2 },
          ]),
        },
      ],
      intervalMs: 60_000,
      historySize: 10,
      onError: () => undefined,
    });
    await sampler.refresh();
    await sampler.refresh();
    const [snapshot] = sampler.snapshots();
    expect(snapshot!.groups.map((group) => [group.group, group.ready])).toEqual([
      ['emails', 0],
      ['reports', 4],
    ]);
    expect(snapshot!.deadLettered).toBe(2);
    expect(sampler.history().map((point) => [point.depth, point.drainedPerSecond])).toEqual([
      [34, 0],
      [4, 30],
    ]);
  });

  it('charts the brokers’ own rate when it is higher, and keeps at most historySize points', async () => {
    let reported = 0;
    const sampler = new QueueSampler({
      tables: [{ table: 'jobs', deadLetter: undefined, inspector: scriptedInspector([{ groups: [counts('emails', 10)] }]) }],
      intervalMs: 60_000,
      historySize: 2,
      onError: () => undefined,
      readBrokers: () => Promise.resolve(NO_BROKERS),
      drainRateOf: () => reported,
    });
    await sampler.refresh();
    reported = 12.5;
    await sampler.refresh();
    await sampler.refresh();
    expect(sampler.history().map((point) => point.drainedPerSecond)).toEqual([12.5, 12.5]);
  });

  it('reads the dead letters and the brokers once a round, and answers from that round until the next', async () => {
    const dead: PeekedRow = {
      id: '7', group: 'dead', attempt: 3, attemptsMade: 2, retryAfter: null, lockedUntil: null, headers: {}, payload: { n: 7 }, lastError: 'smtp refused',
    };
    const reads = { peeks: 0, brokers: 0 };
    const inspector: QueueInspector = {
      ...scriptedInspector([{ groups: [counts('dead', 1), counts('emails', 3)], deadLettered: 1 }]),
      peek: (options) => {
        reads.peeks += 1;
        expect(options).toEqual({ deadLetters: true, limit: 50 });
        return Promise.resolve([dead]);
      },
    };
    const sampler = new QueueSampler({
      tables: [
        { table: 'jobs', deadLetter: { kind: 'group', group: 'dead' }, inspector },
        { table: 'other', deadLetter: undefined, inspector: scriptedInspector([{ groups: [] }]) },
      ],
      intervalMs: 60_000,
      historySize: 10,
      onError: () => undefined,
      deadLettersPerTable: 50,
      readBrokers: () => {
        reads.brokers += 1;
        return Promise.resolve(NO_BROKERS);
      },
    });
    expect(sampler.brokers()).toBeNull();
    await sampler.refresh();
    for (let request = 0; request < 100; request += 1) {
      expect(sampler.deadLetters()).toEqual([
        { table: 'jobs', deadLetter: { kind: 'group', group: 'dead' }, rows: [dead], error: null },
        { table: 'other', deadLetter: null, rows: [], error: null },
      ]);
      expect(sampler.brokers()).toEqual(NO_BROKERS);
    }
    expect(reads).toEqual({ peeks: 1, brokers: 1 });
    await sampler.refresh();
    expect(reads).toEqual({ peeks: 2, brokers: 2 });
  });

  it('shows a failed read on its table and adds no point for that round', async () => {
    const failing: QueueInspector = { ...scriptedInspector([]), inspect: () => Promise.reject(new Error('connection refused')) };
    const errors: string[] = [];
    const sampler = new QueueSampler({
      tables: [{ table: 'jobs', deadLetter: undefined, inspector: failing }],
      intervalMs: 60_000,
      historySize: 10,
      onError: (_error, table) => errors.push(table),
    });
    await sampler.refresh();
    expect(sampler.snapshots()[0]!.error).toBe('connection refused');
    expect(sampler.history()).toEqual([]);
    expect(errors).toEqual(['jobs']);
  });

  it('reads the indexes of a table only while a reporting lease broker counts rows in work on it', async () => {
    const createIndexSql = 'CREATE INDEX jobs_in_work ON jobs (queue, locked_until)';
    let indexReads = 0;
    const inspector: QueueInspector = {
      ...scriptedInspector([{ groups: [counts('payments', 4)] }]),
      readInWorkIndex: () => {
        indexReads += 1;
        return Promise.resolve({ isPresent: false, createIndexSql });
      },
    };
    let subscriptions: unknown[] = [{ queue: 'jobs/payments', form: 'lease', countsRowsInWork: null }];
    const sampler = new QueueSampler({
      tables: [{ table: 'jobs', deadLetter: undefined, inspector }],
      intervalMs: 60_000,
      historySize: 10,
      onError: () => undefined,
      readBrokers: () =>
        Promise.resolve({
          ...NO_BROKERS,
          brokers: [{ id: 'a', host: 'h', pid: 1, intervalMs: 1_000, seenMsAgo: 0, startedMsAgo: 0, subscriptions, relays: [] }],
        }),
    });
    await sampler.refresh();
    expect(sampler.snapshots()[0]!.unindexedRowsInWork).toBeNull();
    expect(indexReads).toBe(0);
    subscriptions = [{ queue: 'jobs/payments', form: 'lease', concurrency: { global: 2 }, countsRowsInWork: 'concurrency' }];
    await sampler.refresh();
    expect(sampler.snapshots()[0]!.unindexedRowsInWork).toEqual({ queues: [{ group: 'payments', reason: 'concurrency' }], createIndexSql });
    expect(indexReads).toBe(1);
  });
});
