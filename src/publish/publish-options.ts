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
  /**
   * This message's handler timeout in milliseconds, overriding the subscription's `timeoutMs`;
   * carried in the header `tablequeue-timeout-ms` (`TIMEOUT_HEADER`), so it needs a headers column.
   */
  timeoutMs?: number;
  /** The id, for tables whose ids the publisher supplies (`id: { column, generated: false }`). */
  id?: string | number;
  /**
   * A connection of the service's own, inside its transaction (a pg client, a mysql2
   * connection, a better-sqlite3 handle), or a transactional handler's `context.tx`: the row
   * commits or rolls back with it.
   */
  tx?: unknown;
}

/**
 * How long a dedupe key keeps a second publish of it out:
 * - `'queued-or-running'` (the default): while a row with the key waits or a handler runs it; freed
 *   when the row is acked, dropped or dead-lettered, kept through retries.
 * - `'queued'`: only while the row waits; once a handler runs it, a new row with the key is
 *   written (lease tables).
 * - `'replace'`: like `'queued'`, but a waiting row takes the new publish's payload, headers,
 *   priority and due time, so a burst of publishes ends as one row with the last values
 *   (debounce, with `delayMs`; lease tables).
 */
export type DedupeMode = 'queued' | 'queued-or-running' | 'replace';

export const DEDUPE_MODES: readonly DedupeMode[] = ['queued', 'queued-or-running', 'replace'];

/** A publish with a dedupe key: needs a dedupeKey column. */
export interface KeyedPublishOptions extends PublishOptions {
  /** Unique per queue among the rows that hold a key; at most 255 characters. */
  dedupeKey: string;
  dedupe?: DedupeMode;
  /**
   * Throttle: besides `dedupe`, at most one row with this key per window of this many
   * milliseconds from the publish that opened it, even after that row was handled.
   */
  dedupeForMs?: number;
}

/** What a keyed publish did. */
export interface KeyedPublishResult {
  /**
   * `published`: a new row. `duplicate`: another row holds the key (or a `dedupeForMs` window
   * is open) and nothing was written. `replaced`: the waiting row holding the key took this
   * publish's values (`dedupe: 'replace'`).
   */
  readonly status: 'published' | 'duplicate' | 'replaced';
  /**
   * The new row's id; for a duplicate or a replacement, the id of the row holding the key, and
   * undefined when only a `dedupeForMs` window refused the publish after that row was handled.
   */
  readonly id: string | undefined;
}

/** One row of `publishMany`; a `dedupeKey` here keeps it out while another row holds the key. */
export interface PublishItem<Payload> extends Omit<PublishOptions, 'tx'> {
  payload: Payload;
  dedupeKey?: string;
}
