import type { DeadLetterLocation, GroupCounts, InWorkIndexState } from '../admin/inspection.js';
import type { RowsInWorkReason } from '../subscription/subscription.js';
import type { BrokerList } from './broker-directory.js';
import type { RelayView } from './dashboard-api.js';

/** Which queues of one table the live brokers read, as their heartbeats say. */
export interface QueueReaders {
  /** Live brokers (seen within three of their intervals) with a subscription on the table. */
  readonly brokers: number;
  /**
   * Groups with ready rows that none of those brokers subscribes to, in the order given: rows
   * published under a misspelt queue name, say. Never a dead-letter group.
   */
  readonly unreadGroups: readonly string[];
  /**
   * Per queue the reporting subscriptions read, in the order first reported: the limits they
   * declare (`at most 3 in work`, `at most 50 per 1000 ms`) and what they counted, summed over
   * brokers since each started.
   */
  readonly reported: readonly ReportedQueue[];
}

export interface ReportedQueue {
  /** `null`: the whole table (it has no group column). */
  readonly group: string | null;
  readonly limits: readonly string[];
  /**
   * Why a reporting lease subscription's claims count the queue's rows in work: a concurrency
   * limit, or FIFO groups; null when none counts (the row lock form holds a limit with slot rows).
   */
  readonly countsRowsInWork: RowsInWorkReason | null;
  readonly timedOut: number;
  readonly cancelled: number;
}

/** Queues whose claims count their rows in work while the table has no index for the count. */
export interface UnindexedRowsInWork {
  /** The queues, in the order `reported` has them (`null`: a table without groups), and why each counts. */
  readonly queues: readonly { readonly group: string | null; readonly reason: RowsInWorkReason }[];
  /** The statement that adds the in-work index. */
  readonly createIndexSql: string;
}

/**
 * The reported queues that count their rows in work, when `index` says the table has no index
 * for it: each such count reads the whole table (49 ms a claim at 1,000,000 rows on PostgreSQL
 * against 0.05 ms with the index; docs/benchmarks.md, "Rows in work under a limit"). Null when no
 * queue counts, the index is there, or either cannot be told.
 */
export function unindexedRowsInWorkOf(readers: QueueReaders | null, index: InWorkIndexState | null): UnindexedRowsInWork | null {
  if (readers === null || index === null || index.isPresent) return null;
  const queues = readers.reported.flatMap(({ group, countsRowsInWork: reason }) => (reason === null ? [] : [{ group, reason }]));
  return queues.length === 0 ? null : { queues, createIndexSql: index.createIndexSql };
}

/** Whether any reported queue counts its rows in work, so that the table's indexes are worth a read. */
export function someReaderCountsRowsInWork(readers: QueueReaders | null): boolean {
  return readers !== null && readers.reported.some((queue) => queue.countsRowsInWork !== null);
}

/**
 * What the heartbeats tell about the table's `groups`, or `null` when they cannot tell: the
 * heartbeat table could not be read, or no live broker reports a subscription on this table.
 * Heartbeats are opt-in, so a broker that does not report may read any queue; a table is judged
 * only while at least one broker that reads it reports. A group is read when a reporting
 * subscription reads it (on a table without groups, any subscription reads every row), and is
 * not a queue at all when it is a dead-letter group: `deadLetter`, or a reporting subscription's.
 */
export function queueReadersOf(
  list: BrokerList,
  table: { readonly schema?: string | undefined; readonly name: string },
  groups: readonly GroupCounts[],
  deadLetter?: DeadLetterLocation,
): QueueReaders | null {
  if (list.problem !== null) return null;
  let brokers = 0;
  const readGroups = new Set<string | null>();
  const reported = new Map<string | null, { limits: Set<string>; countsRowsInWork: RowsInWorkReason | null; timedOut: number; cancelled: number }>();
  const deadLetterGroups = new Set<string>();
  if (deadLetter?.kind === 'group') deadLetterGroups.add(deadLetter.group);
  for (const broker of list.brokers) {
    let readsTable = false;
    for (const subscription of broker.subscriptions) {
      const read = readOf(subscription);
      if (read === undefined || !isSameTable(read.table, table)) continue;
      readsTable = true;
      readGroups.add(read.group);
      const queue = reported.get(read.group) ?? { limits: new Set<string>(), countsRowsInWork: null, timedOut: 0, cancelled: 0 };
      for (const limit of read.limits) queue.limits.add(limit);
      queue.countsRowsInWork ??= read.countsRowsInWork;
      queue.timedOut += read.timedOut;
      queue.cancelled += read.cancelled;
      reported.set(read.group, queue);
      if (read.deadLetter !== undefined) deadLetterGroups.add(read.deadLetter);
    }
    if (readsTable) brokers += 1;
  }
  if (brokers === 0) return null;
  const readsEveryGroup = readGroups.has(null);
  const unreadGroups = groups.flatMap((counts) => {
    const { group } = counts;
    const isUnread = !readsEveryGroup && counts.ready > 0 && group !== null && !readGroups.has(group) && !deadLetterGroups.has(group);
    return isUnread ? [group] : [];
  });
  return {
    brokers,
    unreadGroups,
    reported: [...reported].map(([group, queue]) => ({
      group,
      limits: [...queue.limits],
      countsRowsInWork: queue.countsRowsInWork,
      timedOut: queue.timedOut,
      cancelled: queue.cancelled,
    })),
  };
}

interface SubscriptionRead {
  readonly table: { readonly schema: string | undefined; readonly name: string };
  /** `null`: the whole table (it has no group column). */
  readonly group: string | null;
  readonly deadLetter: string | undefined;
  readonly limits: readonly string[];
  readonly countsRowsInWork: RowsInWorkReason | null;
  readonly timedOut: number;
  readonly cancelled: number;
}

/**
 * A heartbeat's subscription: its `queue` is the queue's label, `schema.table/group` or `table`
 * (identifiers are plain names, so the first `/` and the `.` before it split it), and
 * `deadLetter` where its rows go when their attempts run out. Anything else is no read.
 */
function readOf(subscription: unknown): SubscriptionRead | undefined {
  if (subscription === null || typeof subscription !== 'object') return undefined;
  const { queue, deadLetter, timedOut, cancelled } = subscription as { queue?: unknown; deadLetter?: unknown; timedOut?: unknown; cancelled?: unknown };
  if (typeof queue !== 'string') return undefined;
  const slash = queue.indexOf('/');
  return {
    table: tableNamed(slash === -1 ? queue : queue.slice(0, slash)),
    group: slash === -1 ? null : queue.slice(slash + 1),
    deadLetter: typeof deadLetter === 'string' ? deadLetter : undefined,
    limits: limitsOf(subscription),
    countsRowsInWork: rowsInWorkReasonOf(subscription),
    timedOut: typeof timedOut === 'number' ? timedOut : 0,
    cancelled: typeof cancelled === 'number' ? cancelled : 0,
  };
}

/**
 * Why the subscription's claims count its rows in work, as its heartbeat reports it; a broker
 * from before that report counts them when it reads a lease table under a concurrency limit.
 */
function rowsInWorkReasonOf(subscription: object): RowsInWorkReason | null {
  const reported = subscription as { countsRowsInWork?: unknown; form?: unknown; concurrency?: unknown };
  if (reported.countsRowsInWork === 'concurrency' || reported.countsRowsInWork === 'fifo') return reported.countsRowsInWork;
  if (reported.countsRowsInWork !== undefined) return null;
  return reported.form === 'lease' && typeof reported.concurrency === 'object' && reported.concurrency !== null ? 'concurrency' : null;
}

/** A subscription's `concurrency` and `rate` as its heartbeat reports them, in words. */
function limitsOf(subscription: object): string[] {
  const { concurrency, rate } = subscription as { concurrency?: unknown; rate?: unknown };
  const limits: string[] = [];
  if (typeof concurrency === 'object' && concurrency !== null) {
    const { global, perKey } = concurrency as { global?: unknown; perKey?: unknown };
    if (typeof global === 'number') limits.push(`at most ${global} in work`);
    if (typeof perKey === 'number') limits.push(`at most ${perKey} in work per key`);
  }
  if (typeof rate === 'object' && rate !== null) {
    const { limit, perMs, key } = rate as { limit?: unknown; perMs?: unknown; key?: unknown };
    if (typeof limit === 'number' && typeof perMs === 'number') limits.push(`at most ${limit} per ${perMs} ms${key === true ? ' per key' : ''}`);
  }
  return limits;
}

/** `schema.table` or `table`, as a heartbeat names a table. */
function tableNamed(qualified: string): { schema: string | undefined; name: string } {
  const dot = qualified.indexOf('.');
  return dot === -1 ? { schema: undefined, name: qualified } : { schema: qualified.slice(0, dot), name: qualified.slice(dot + 1) };
}

/** The same name, and the same schema where both name one: a table named without one is in the default schema of its session. */
function isSameTable(
  read: { readonly schema: string | undefined; readonly name: string },
  table: { readonly schema?: string | undefined; readonly name: string },
): boolean {
  return read.name === table.name && (read.schema === undefined || table.schema === undefined || read.schema === table.schema);
}

/** An outbox relay of one table as a live broker's heartbeat reports it. */
export interface ReportedRelay extends Omit<RelayView, 'outbox'> {
  readonly broker: { readonly id: string; readonly host: string; readonly pid: number };
}

/** The relays of the outbox table `table` that live brokers report, or null when the heartbeat table could not be read. */
export function relaysOfTable(list: BrokerList, table: { readonly schema?: string | undefined; readonly name: string }): ReportedRelay[] | null {
  if (list.problem !== null) return null;
  return list.brokers.flatMap(({ id, host, pid, relays }) =>
    relays.filter((relay) => isSameTable(tableNamed(relay.outbox), table)).map(({ outbox: _outbox, ...relay }) => ({ ...relay, broker: { id, host, pid } })),
  );
}
