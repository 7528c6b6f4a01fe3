/**
 * A statement as a dialect renders it: SQL text and the meaning of each placeholder, in order.
 * Dialects never see values; the claim forms and the publisher bind them by parameter name.
 */
export interface Statement {
  /** Stable name, used in errors, prepared-statement names and tests (`lease.claim`). */
  readonly name: string;
  readonly sql: string;
  /** What each placeholder carries, in placeholder order. */
  readonly params: readonly ParamName[];
}

/**
 * Every value a statement can bind. Column values of an insert are named `column:<role>`.
 * - `now`: the claim's or settlement's instant; `leaseNow`: the same instant for the lease check.
 * - `lockedUntil`: the new lease expiry written by a claim or renewal; `held`: the lease token
 *   the caller holds (the expiry it wrote).
 * - `retryAfterAt`: when a delayed row becomes due. `destination`: a dead-letter group.
 * - `deadLetterGroup`: the group whose rows the operator tools count as dead letters.
 * - `lastError`: a dead letter's last failure as text, written into its headers.
 * - `delayMicroseconds`: a delay the database adds to its own now (tables with `clock: 'database'`).
 * - `olderThan`: retention's cutoff, the host's now less the age; `cutoffDelayMicroseconds`: the same
 *   cutoff as a negative delay from the database's own now (tables with `clock: 'database'`).
 * - `channel`: a Postgres notification channel (see `NotifyStatements`).
 * - `key`: an advisory lock key as the candidate select rendered it (see `AdvisoryStatements`), or
 *   a partition key whose slot a row lock claim holds (see `KeySlotStatements`); `slot`: the
 *   number of one of that key's slots.
 * - `passedKeys`, `offset`: the partition keys a row lock claim passes over, and how many
 *   candidate rows it has read (see `KeySlotTake`, `KeySlotClaim`).
 * - `candidates`: how many claimable ids a row lock claim on MySQL reads before it locks any
 *   (see `candidatesThenLockSelect`).
 * - `ids`, `helds`, `retryAfterAts`: one array each, element `i` belonging to row `i`, where one
 *   statement settles many leases (see `LeaseStatements.settleMany`).
 * - `slots`, `freeSince`, `usedAt`, `taken`: a rate limit's slot count, the host milliseconds a
 *   slot's last use must be at or before to be free, the host milliseconds a claim stamps on the
 *   slots it uses, and how many it uses (see `RateLimitStatements`).
 */
export type ParamName =
  | 'id'
  | 'group'
  | 'now'
  | 'leaseNow'
  | 'limit'
  | 'perKey'
  | 'global'
  | 'firstSlot'
  | 'lockedUntil'
  | 'held'
  | 'retryAfterAt'
  | 'delayMicroseconds'
  | 'olderThan'
  | 'cutoffDelayMicroseconds'
  | 'destination'
  | 'deadLetterGroup'
  | 'lastError'
  | 'channel'
  | 'key'
  | 'slot'
  | 'passedKeys'
  | 'keys'
  | 'window'
  | 'offset'
  | 'candidates'
  | 'ids'
  | 'helds'
  | 'retryAfterAts'
  | 'dedupeKey'
  | 'slots'
  | 'freeSince'
  | 'usedAt'
  | 'taken'
  | 'unused'
  | 'rateKey'
  | 'uses'
  | 'rateFreeSince'
  | 'rateLimit'
  | `column:${string}`;

/** A statement with its values, ready for a driver. */
export interface BoundStatement {
  readonly name: string;
  readonly sql: string;
  readonly values: readonly unknown[];
}

export type ParamValues = Partial<Record<ParamName, unknown>>;

/** Binds values to a statement by parameter name; a missing value is a programming error. */
export function bindStatement(statement: Statement, values: ParamValues): BoundStatement {
  const bound = statement.params.map((param) => {
    if (!(param in values)) {
      throw new TypeError(`statement "${statement.name}" needs a value for parameter "${param}"`);
    }
    return values[param];
  });
  return { name: statement.name, sql: statement.sql, values: bound };
}

/** Binds a statement whose values are already in placeholder order (multi-row inserts). */
export function bindPositional(statement: Statement, values: readonly unknown[]): BoundStatement {
  if (values.length !== statement.params.length) {
    throw new TypeError(
      `statement "${statement.name}" has ${statement.params.length} placeholders, got ${values.length} values`,
    );
  }
  return { name: statement.name, sql: statement.sql, values };
}

/** The parameters a statement rendered for many rows repeats once per row. */
export type RowParam = 'id' | 'held' | 'retryAfterAt' | 'key' | 'slot';

const ROW_PARAMS: ReadonlySet<ParamName> = new Set<RowParam>(['id', 'held', 'retryAfterAt', 'key', 'slot']);

/**
 * Binds a statement rendered for a number of rows that repeats row parameters once per row:
 * occurrence `k` of a row parameter takes row `k` modulo the row count, which is the number of
 * occurrences of `countedBy` (a parameter each row has once). Rows short of the count are padded
 * with the last row, which changes nothing twice. Other parameters take `shared` values.
 */
export function bindRepeated(
  statement: Statement,
  rows: readonly Partial<Record<RowParam, unknown>>[],
  shared: ParamValues,
  countedBy: RowParam,
): BoundStatement {
  const occurrences: Partial<Record<RowParam, number>> = {};
  const rowCount = statement.params.filter((name) => name === countedBy).length;
  const last = rows[rows.length - 1]!;
  const values = statement.params.map((param) => {
    if (!ROW_PARAMS.has(param)) {
      if (!(param in shared)) throw new TypeError(`statement "${statement.name}" needs a value for parameter "${param}"`);
      return shared[param];
    }
    const rowParam = param as RowParam;
    const occurrence = occurrences[rowParam] ?? 0;
    occurrences[rowParam] = occurrence + 1;
    return (rows[occurrence % rowCount] ?? last)[rowParam];
  });
  return { name: statement.name, sql: statement.sql, values };
}
