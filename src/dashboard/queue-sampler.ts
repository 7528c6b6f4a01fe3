import type { DeadLetterLocation, GroupCounts, PeekedRow, QueueInspector, TableInspection } from '../admin/inspection.js';
import type { ScheduleList } from '../admin/schedule-listing.js';
import type { PausedQueue } from '../broker/queue-controls.js';
import { abortableSleep } from '../internal/abortable-sleep.js';
import { parseQualifiedName } from '../table/identifier.js';
import type { BrokerList } from './broker-directory.js';
import type { ThroughputPoint } from './dashboard-api.js';
import { queueReadersOf, someReaderCountsRowsInWork, unindexedRowsInWorkOf, type QueueReaders, type UnindexedRowsInWork } from './queue-readers.js';

/** One inspected table as the dashboard needs it. */
export interface WatchedTable {
  /** `schema.name`, or `name` for a table named without a schema; how the page and requeue name it. */
  readonly table: string;
  readonly inspector: QueueInspector;
  readonly deadLetter: DeadLetterLocation | undefined;
}

/** The latest read of one table: its queues (the dead-letter group left out) or why it failed. */
export interface TableSnapshot {
  readonly table: string;
  readonly deadLetter: DeadLetterLocation | null;
  readonly groups: readonly GroupCounts[];
  readonly deadLettered: number;
  /** Milliseconds since the epoch, host clock. */
  readonly readAt: number | null;
  readonly error: string | null;
  /** The queues the reporting brokers leave unread; null when the heartbeats cannot tell (see `queueReadersOf`). */
  readonly readers: QueueReaders | null;
  /** Queues the brokers report counting their rows in work while no index serves the count; null when none do, or when it cannot be told. */
  readonly unindexedRowsInWork: UnindexedRowsInWork | null;
}

/** The first dead letters of one table, as the latest round read them. */
export interface DeadLetterSample {
  readonly table: string;
  readonly deadLetter: DeadLetterLocation | null;
  /** Empty without a dead-letter location, or when the read failed. */
  readonly rows: readonly PeekedRow[];
  readonly error: string | null;
}

export interface QueueSamplerOptions {
  readonly tables: readonly WatchedTable[];
  readonly intervalMs: number;
  /** How many points the chart keeps; older ones are dropped. */
  readonly historySize: number;
  readonly onError: (error: unknown, table: string) => void;
  /** How many dead letters a round reads of each table that has a dead-letter location; none when absent. */
  readonly deadLettersPerTable?: number;
  /** The brokers that report to the heartbeat table, read once a round. */
  readonly readBrokers?: () => Promise<BrokerList>;
  /** The schedules table, read once a round. */
  readonly readSchedules?: () => Promise<ScheduleList>;
  /** The paused queues of every table, read once a round; null when the queue controls table cannot be read. */
  readonly readPaused?: () => Promise<readonly PausedQueue[] | null>;
  /**
   * Rows per second the brokers of a fresh list (read at `readAt`) finish on these tables (see
   * `BrokerDrainRate`); the chart shows the larger of it and the rate the inspections tell.
   */
  readonly drainRateOf?: (brokers: BrokerList, readAt: number) => number;
}

/** What a round keeps of a table to compare the next round with. */
export interface TableTotals {
  readonly at: number;
  readonly depth: number;
  readonly processed: number;
  readonly deadLettered: number;
}

/**
 * Inspects every table each interval and keeps what the page shows: the latest counts, the first
 * dead letters, the brokers, and a throughput history derived from successive inspections. The
 * dashboard's requests read only what the latest round kept, so however many pages poll, the
 * database sees one round per interval. Rounds run whether or not a page is open, so a page
 * opened later still sees the recent past.
 */
export class QueueSampler {
  readonly #options: QueueSamplerOptions;
  readonly #snapshots = new Map<string, TableSnapshot>();
  readonly #deadLetters = new Map<string, DeadLetterSample>();
  #brokers: BrokerList | null = null;
  #schedules: ScheduleList | null = null;
  #paused: readonly PausedQueue[] | null = null;
  readonly #previous = new Map<string, TableTotals>();
  readonly #history: ThroughputPoint[] = [];
  /** Per table, every group seen since start: a queue that drains empty stays listed with zeros. */
  readonly #seenGroups = new Map<string, Set<string | null>>();
  readonly #stopping = new AbortController();
  #round: Promise<void> = Promise.resolve();
  #loop: Promise<void> | undefined;

  constructor(options: QueueSamplerOptions) {
    this.#options = options;
    for (const watched of options.tables) {
      this.#snapshots.set(watched.table, {
        table: watched.table,
        deadLetter: watched.deadLetter ?? null,
        groups: [],
        deadLettered: 0,
        readAt: null,
        error: null,
        readers: null,
        unindexedRowsInWork: null,
      });
      this.#deadLetters.set(watched.table, { table: watched.table, deadLetter: watched.deadLetter ?? null, rows: [], error: null });
    }
  }

  /** Reads every table once, then keeps reading every interval until `stop()`. */
  async start(): Promise<void> {
    await this.refresh();
    this.#loop = this.#run();
  }

  async stop(): Promise<void> {
    this.#stopping.abort();
    await this.#loop;
    await this.#round;
  }

  /** Reads every table now (after a requeue, say), one round at a time. */
  refresh(): Promise<void> {
    this.#round = this.#round.then(() => this.#sample());
    return this.#round;
  }

  snapshots(): TableSnapshot[] {
    return [...this.#snapshots.values()];
  }

  history(): ThroughputPoint[] {
    return [...this.#history];
  }

  deadLetters(): DeadLetterSample[] {
    return [...this.#deadLetters.values()];
  }

  /** Null until a round read the heartbeat table, or without `readBrokers`. */
  brokers(): BrokerList | null {
    return this.#brokers;
  }

  /** Null until a round read the queue controls table, when it cannot be read, or without `readPaused`. */
  paused(): readonly PausedQueue[] | null {
    return this.#paused;
  }

  /** Null until a round read the schedules table, or without `readSchedules`. */
  schedules(): ScheduleList | null {
    return this.#schedules;
  }

  async #run(): Promise<void> {
    const signal = this.#stopping.signal;
    for (;;) {
      await abortableSleep(this.#options.intervalMs, signal);
      if (signal.aborted) return;
      await this.refresh();
    }
  }

  #seenGroupsOf(table: string): Set<string | null> {
    let seen = this.#seenGroups.get(table);
    if (seen === undefined) {
      seen = new Set();
      this.#seenGroups.set(table, seen);
    }
    return seen;
  }

  async #sample(): Promise<void> {
    const brokerRate = this.#readBrokers().catch(() => 0);
    const scheduleRead = this.#readSchedules().catch((error: unknown) => this.#options.onError(error, 'schedules'));
    const pausedRead = this.#readPaused().catch((error: unknown) => this.#options.onError(error, 'queue controls'));
    const deadLetterReads = Promise.all(this.#options.tables.map((watched) => this.#readDeadLetters(watched)));
    const reads = await Promise.all(
      this.#options.tables.map(async (watched) => {
        try {
          return { watched, inspection: await watched.inspector.inspect() };
        } catch (error) {
          this.#options.onError(error, watched.table);
          return { watched, error };
        }
      }),
    );
    // Before the snapshots are kept, so that each one is kept with what the heartbeats say of it.
    const reportedPerSecond = await brokerRate;
    let depth = 0;
    let drainedPerSecond = 0;
    let isComplete = true;
    let at = Date.now();
    for (const read of reads) {
      const { watched } = read;
      if (read.inspection === undefined) {
        isComplete = false;
        const previous = this.#snapshots.get(watched.table);
        this.#snapshots.set(watched.table, { ...previous!, error: messageOf(read.error) });
        continue;
      }
      const snapshot = snapshotOf(watched, read.inspection, this.#seenGroupsOf(watched.table), this.#brokers);
      this.#snapshots.set(watched.table, { ...snapshot, unindexedRowsInWork: await this.#unindexedRowsInWork(watched, snapshot.readers) });
      const totals = totalsOf(snapshot, read.inspection);
      at = totals.at;
      depth += totals.depth;
      const previous = this.#previous.get(watched.table);
      if (previous !== undefined && totals.at > previous.at) {
        drainedPerSecond += (drainedBetween(previous, totals) * 1000) / (totals.at - previous.at);
      }
      this.#previous.set(watched.table, totals);
    }
    for (const sample of await deadLetterReads) this.#deadLetters.set(sample.table, sample);
    await scheduleRead;
    await pausedRead;
    if (!isComplete) return;
    const drained = Math.max(drainedPerSecond, reportedPerSecond);
    this.#history.push({ at, depth, drainedPerSecond: Math.round(drained * 10) / 10 });
    if (this.#history.length > this.#options.historySize) this.#history.splice(0, this.#history.length - this.#options.historySize);
  }

  /** The table's indexes are read only while a reporting broker counts rows in work on it; a failed read tells nothing. */
  async #unindexedRowsInWork(watched: WatchedTable, readers: QueueReaders | null): Promise<UnindexedRowsInWork | null> {
    if (!someReaderCountsRowsInWork(readers)) return null;
    try {
      return unindexedRowsInWorkOf(readers, await watched.inspector.readInWorkIndex());
    } catch (error) {
      this.#options.onError(error, watched.table);
      return null;
    }
  }

  /** Reads the schedules and keeps them; the listing answers a failed read as its problem, never a throw. */
  async #readSchedules(): Promise<void> {
    if (this.#options.readSchedules !== undefined) this.#schedules = await this.#options.readSchedules();
  }

  /** Reads the paused queues and keeps them. */
  async #readPaused(): Promise<void> {
    if (this.#options.readPaused !== undefined) this.#paused = await this.#options.readPaused();
  }

  /** Reads the broker list, keeps it, and returns the drain rate it tells. */
  async #readBrokers(): Promise<number> {
    if (this.#options.readBrokers === undefined) return 0;
    const readAt = Date.now();
    const brokers = await this.#options.readBrokers();
    this.#brokers = brokers;
    return this.#options.drainRateOf?.(brokers, readAt) ?? 0;
  }

  async #readDeadLetters(watched: WatchedTable): Promise<DeadLetterSample> {
    const sample = { table: watched.table, deadLetter: watched.deadLetter ?? null };
    const limit = this.#options.deadLettersPerTable ?? 0;
    if (watched.deadLetter === undefined || limit === 0) return { ...sample, rows: [], error: null };
    try {
      return { ...sample, rows: await watched.inspector.peek({ deadLetters: true, limit }), error: null };
    } catch (error) {
      return { ...sample, rows: [], error: messageOf(error) };
    }
  }
}

/**
 * Rows that left the queues between two reads. A table that marks rows processed says so
 * exactly; a table that deletes on ack shows only the net fall in depth, so rows published in
 * the same interval hide as many drained ones. Rows that became dead letters are not drained.
 */
export function drainedBetween(before: TableTotals, after: TableTotals): number {
  const processed = after.processed - before.processed;
  if (processed > 0) return processed;
  const deadLettered = Math.max(0, after.deadLettered - before.deadLettered);
  return Math.max(0, before.depth - after.depth - deadLettered);
}

function snapshotOf(
  watched: WatchedTable,
  inspection: TableInspection,
  seenGroups: Set<string | null>,
  brokers: BrokerList | null,
): TableSnapshot {
  const deadGroup = watched.deadLetter?.kind === 'group' ? watched.deadLetter.group : undefined;
  const groups = inspection.groups.filter((group) => deadGroup === undefined || group.group !== deadGroup);
  for (const group of groups) seenGroups.add(group.group);
  const present = new Set(groups.map((group) => group.group));
  for (const group of seenGroups) {
    if (!present.has(group)) groups.push({ group, ready: 0, delayed: 0, inWork: 0, processed: 0, oldestReadyAgeSeconds: null, total: 0, deadLettered: 0 });
  }
  groups.sort((a, b) => (a.group ?? '').localeCompare(b.group ?? ''));
  return {
    table: watched.table,
    deadLetter: watched.deadLetter ?? null,
    groups,
    deadLettered: inspection.deadLettered,
    readAt: inspection.readAt.getTime(),
    error: null,
    readers: brokers === null ? null : queueReadersOf(brokers, parseQualifiedName(watched.table, 'table'), groups, watched.deadLetter),
    unindexedRowsInWork: null,
  };
}

function totalsOf(snapshot: TableSnapshot, inspection: TableInspection): TableTotals {
  let depth = 0;
  let processed = 0;
  for (const group of snapshot.groups) {
    depth += group.ready + group.delayed + group.inWork;
    processed += group.processed;
  }
  return { at: inspection.readAt.getTime(), depth, processed, deadLettered: inspection.deadLettered };
}

export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
