/**
 * What the operator tools (CLI `stats | peek | requeue | purge`, the dashboard) read and change in
 * a queue table. The dashboard and the CLI share these shapes; the statements behind them are
 * dialect text with exact-SQL tests like every other statement.
 */

/** Counts of one group (queue) of a table, read in one statement. */
export interface GroupCounts {
  /** The group's value; `null` on a table without a group column (the whole table is one queue). */
  readonly group: string | null;
  /** Claimable now: not processed, not leased, retry time passed (or no retry time), not a dead letter. */
  readonly ready: number;
  /** Waiting for a retry time in the future. */
  readonly delayed: number;
  /**
   * Holding a live lease (locked_until in the future). Rows a row lock claim holds are not
   * counted: Postgres and MySQL show row locks only to a reader that takes row locks itself,
   * which would write a lock mark into every row it read.
   */
  readonly inWork: number;
  /** Marked processed (tables with a processedAt column); 0 on tables that delete on ack. */
  readonly processed: number;
  /** Seconds since the oldest ready row became ready; `null` when none is ready or the table cannot tell. */
  readonly oldestReadyAgeSeconds: number | null;
  /** Every row of the group, whatever its state. */
  readonly total?: number;
  /**
   * Dead letters, which count in no other state: unfinished rows whose headers carry the last
   * error a dead-letter move wrote (`LAST_ERROR_HEADER`), every unfinished row of the
   * dead-letter group when the inspector was told of one, and rows of the dead-letter table whose
   * group is this one. A move into a group overwrites the group the row came from, so dead
   * letters in a group count toward that group. Always set by `openQueueInspector`'s inspector.
   */
  readonly deadLettered?: number;
}

/** A snapshot of one queue table. */
export interface TableInspection {
  /** `schema.name` or `name`. */
  readonly table: string;
  readonly groups: readonly GroupCounts[];
  /** Every group's `deadLettered` summed. */
  readonly deadLettered: number;
  /** When the snapshot was read (host clock). */
  readonly readAt: Date;
  /** Where the dead letters counted in `deadLettered` are, when the inspector was told. */
  readonly deadLetter?: DeadLetterLocation;
}

/** One row as `peek` shows it: the payload decoded as text (UTF-8) and JSON when it parses. */
export interface PeekedRow {
  readonly id: string;
  readonly group: string | null;
  /** The attempt column as stored: the attempt the row's next delivery gets (1 for a new row). */
  readonly attempt: number | null;
  /**
   * Deliveries the row has used since it was published or requeued: the attempt column less one.
   * Every form leaves a dead letter's attempt column one past its attempts (`maxAttempts + 1`),
   * so this is what the operator tools show. A row lock delivery in progress is not counted yet.
   */
  readonly attemptsMade: number | null;
  readonly retryAfter: Date | null;
  readonly lockedUntil: Date | null;
  readonly headers: Readonly<Record<string, string>>;
  /** The payload parsed as JSON, or its text when it is not JSON, or `null` without a payload column. */
  readonly payload: unknown;
  /** The last error recorded in the headers by a dead-letter move, when there is one. */
  readonly lastError: string | null;
}

/** Where dead letters of a table go: a group of the same table or another table. */
export type DeadLetterLocation =
  | { readonly kind: 'group'; readonly group: string }
  | { readonly kind: 'table'; readonly table: string };

export interface QueueInspector {
  inspect(): Promise<TableInspection>;
  /**
   * Up to `limit` rows (default 10) in claim order: of one group, or the dead letters (which
   * needs their location), or else every unfinished row that is not a dead letter.
   */
  peek(options?: { group?: string; deadLetters?: boolean; limit?: number }): Promise<PeekedRow[]>;
  /**
   * Moves dead letters back to `toGroup` (a dead-letter group) or into the queue table (a
   * dead-letter table) in one transaction: attempt reset, due now, lease and last error cleared.
   * `ids` picks rows; without it, all. Returns how many moved.
   */
  requeue(options: { ids?: readonly string[]; toGroup?: string }): Promise<number>;
  /** Deletes rows of one group, or every row without `group`, in one statement; returns how many. */
  purge(options?: { group?: string }): Promise<number>;
  /**
   * Whether the table has an index that serves the count of its rows in work, which every lease
   * claim under a concurrency limit (and every claim of a FIFO group) runs. Null on a table
   * without a lease column, or where the dialect cannot read indexes.
   */
  readInWorkIndex(): Promise<InWorkIndexState | null>;
  close(): Promise<void>;
}

/** What `QueueInspector.readInWorkIndex` found. */
export interface InWorkIndexState {
  /** An index leads with the lease column, or with the group column then the lease column. */
  readonly isPresent: boolean;
  /** The statement that adds one: what `createTableSql(…, { inWorkIndex: true })` renders. */
  readonly createIndexSql: string;
}
