import type { BenchDatabase, BenchDatabaseName } from '../bench-database.js';
import type { DrainMeasurement } from '../partitioning/drain-watch.js';

/** Who drains: the library, a hand-written loop of its statements, or another queue library. */
export type ContenderKind = 'service' | 'raw' | 'peer';

/** One drain of a fresh database: the contender fills it with `messages` rows, then drains them. */
export interface ContenderRun {
  readonly database: BenchDatabase;
  readonly workers: number;
  readonly messages: number;
  /** Aborts on the run's timeout or an interrupt. */
  readonly signal: AbortSignal;
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
