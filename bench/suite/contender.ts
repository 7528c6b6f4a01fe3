import type { BenchDatabase, BenchDatabaseName } from '../bench-database.js';
import type { DrainMeasurement } from '../partitioning/drain-watch.js';

/** Who drains: the library, a hand-written loop of its statements, or another queue library. */
export type ContenderKind = 'service' | 'raw' | 'peer';

/** One drain of a fresh database: the contender fills it with `messages` rows, then drains them. */
export interface ContenderRun {
  readonly database: BenchDatabase;
  readonly workers: number;
  readonly messages: number;
  /**
   * The growth runs: rows waiting before the drain starts, when more than `messages`. The peer
   * fills them with one server-side INSERT … SELECT per 100,000 rows into its own tables (its
   * bulk insert call by call would take most of an hour for a million), and the drain is timed
   * over its first `messages`; the rows left afterwards are then expected.
   */
  readonly backlog?: number;
  /** The growth runs: rows filled the same way as the backlog but due a day from now, which no claim may take. */
  readonly delayed?: number;
  /** Aborts on the run's timeout or an interrupt. */
  readonly signal: AbortSignal;
}

/** Rows per server-side INSERT … SELECT when a peer fills a growth backlog. */
export const PEER_FILL_STATEMENT_ROWS = 100_000;

/** One server-side fill statement's series `[from, to]`, and whether its rows are due now or a day from now. */
export interface FillRange {
  readonly from: number;
  readonly to: number;
  readonly isDelayed: boolean;
}

/** The fill statements of a growth run: the backlog due now, then the delayed rows. */
export function fillRanges(run: ContenderRun): FillRange[] {
  const ranges: FillRange[] = [];
  const add = (first: number, rows: number, isDelayed: boolean) => {
    for (let from = first; from < first + rows; from += PEER_FILL_STATEMENT_ROWS) ranges.push({ from, to: Math.min(first + rows, from + PEER_FILL_STATEMENT_ROWS) - 1, isDelayed });
  };
  const backlog = run.backlog ?? run.messages;
  add(1, backlog, false);
  add(backlog + 1, run.delayed ?? 0, true);
  return ranges;
}

/** Whether a run has rows filled on the server (a growth run) rather than through the peer's bulk insert. */
export function isGrowthRun(run: ContenderRun): boolean {
  return (run.backlog ?? run.messages) > run.messages || (run.delayed ?? 0) > 0;
}

export interface ContenderOutcome {
  readonly measurement: DrainMeasurement;
  /** Messages not finished after the drain (rows left, or a peer's jobs not completed). */
  readonly remaining: number;
  /** The database server's (or SQLite's) version. */
  readonly serverVersion: string | undefined;
  /** Peers: rows per second of their own bulk insert while filling, in calls of 1,000 jobs. */
  readonly insertRowsPerSecond?: number;
}

export interface Contender {
  /** Stable name used by `--only` and in the results: `service.lease`, `raw.lease`, `peer.bullmq`. */
  readonly id: string;
  readonly kind: ContenderKind;
  /** What the tables and the chart show. */
  readonly label: string;
  readonly databases: readonly BenchDatabaseName[];
  /** A service contender's raw loop: the same statements by hand, the ceiling it is held against. */
  readonly rawBaseline?: string;
  /** Rows per claim or handler call; absent for one message at a time. */
  readonly batch?: number;
  run(run: ContenderRun): Promise<ContenderOutcome>;
}

/** Peers fill in calls of this many jobs, as their documentation's examples do. */
export const PEER_INSERT_CHUNK = 1_000;

/** Rows per second over `rows` inserted between `startedAt` and now (`performance.now()` times). */
export function rowsPerSecondSince(rows: number, startedAt: number): number {
  const seconds = (performance.now() - startedAt) / 1000;
  return seconds > 0 ? rows / seconds : 0;
}
