import type { DeadLetterLocation, GroupCounts } from '../admin/inspection.js';
import type { BrokerList } from './broker-directory.js';

/** Which queues of one table the live brokers read, as their heartbeats say. */
export interface QueueReaders {
  /** Live brokers (seen within three of their intervals) with a subscription on the table. */
  readonly brokers: number;
  /**
   * Groups with ready rows that none of those brokers subscribes to, in the order given: rows
   * published under a misspelt queue name, say. Never a dead-letter group.
   */
  readonly unreadGroups: readonly string[];
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
  const deadLetterGroups = new Set<string>();
  if (deadLetter?.kind === 'group') deadLetterGroups.add(deadLetter.group);
  for (const broker of list.brokers) {
    let readsTable = false;
    for (const subscription of broker.subscriptions) {
      const read = readOf(subscription);
      if (read === undefined || !isSameTable(read.table, table)) continue;
      readsTable = true;
      readGroups.add(read.group);
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
  return { brokers, unreadGroups };
}

interface SubscriptionRead {
  readonly table: { readonly schema: string | undefined; readonly name: string };
  /** `null`: the whole table (it has no group column). */
  readonly group: string | null;
  readonly deadLetter: string | undefined;
}

/**
 * A heartbeat's subscription: its `queue` is the queue's label, `schema.table/group` or `table`
 * (identifiers are plain names, so the first `/` and the `.` before it split it), and
 * `deadLetter` where its rows go when their attempts run out. Anything else is no read.
 */
function readOf(subscription: unknown): SubscriptionRead | undefined {
  if (subscription === null || typeof subscription !== 'object') return undefined;
  const { queue, deadLetter } = subscription as { queue?: unknown; deadLetter?: unknown };
  if (typeof queue !== 'string') return undefined;
  const slash = queue.indexOf('/');
  const qualified = slash === -1 ? queue : queue.slice(0, slash);
  const dot = qualified.indexOf('.');
  return {
    table: dot === -1 ? { schema: undefined, name: qualified } : { schema: qualified.slice(0, dot), name: qualified.slice(dot + 1) },
    group: slash === -1 ? null : queue.slice(slash + 1),
    deadLetter: typeof deadLetter === 'string' ? deadLetter : undefined,
  };
}

/** The same name, and the same schema where both name one: a table named without one is in the default schema of its session. */
function isSameTable(
  read: { readonly schema: string | undefined; readonly name: string },
  table: { readonly schema?: string | undefined; readonly name: string },
): boolean {
  return read.name === table.name && (read.schema === undefined || table.schema === undefined || read.schema === table.schema);
}
