/** Where and when a published row goes. */
export interface PublishOptions {
  /** Routes the row to a `workersByKey` lane; needs a partitionKey column. */
  partitionKey?: string | null;
  /** Smaller first; needs a priority column. */
  priority?: number;
  /** Due this many milliseconds from now; needs a retryAfter column. */
  delayMs?: number;
  /** Due at this instant; needs a retryAfter column. */
  runAt?: Date;
  /** String headers, stored as JSON; needs a headers column. */
  headers?: Record<string, string>;
  /** The id, for tables whose ids the publisher supplies (`id: { column, generated: false }`). */
  id?: string | number;
  /**
   * A connection of the service's own, inside its transaction (a pg client, a mysql2
   * connection, a better-sqlite3 handle), or a transactional handler's `context.tx`: the row
   * commits or rolls back with it.
   */
  tx?: unknown;
}

/** One row of `publishMany`. */
export interface PublishItem<Payload> extends Omit<PublishOptions, 'tx'> {
  payload: Payload;
}
