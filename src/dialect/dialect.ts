import type { RateLimitsTable } from './rate-limit-statements.js';
import type { Statement } from '../statement.js';
import type { IsolationLevel, SqliteBeginMode, TableSpec } from '../table/table-spec.js';
import type { AdvisoryStatements } from './advisory-statements.js';
import type { DedupeStatements } from './dedupe-statements.js';
import type { NotifyStatements } from './notify.js';

/**
 * The version of the `Dialect` interface this tablequeue implements. It rises whenever a change
 * could break a dialect written for the one before: a statement added, a parameter or result
 * column changed, a shape of a claim or settlement changed (docs/dialects.md lists each version).
 * A dialect declares the version it was written for; the broker refuses any other at `start()`.
 */
export const DIALECT_INTERFACE_VERSION = 1;

/** The wire protocol a dialect's statements run on: which driver runs them, and which spelling side tables use. */
export type DialectName = 'postgres' | 'mysql' | 'sqlite';

/** The dialects tablequeue ships: MariaDB's is the MySQL one with MariaDB's capabilities. */
export type BuiltInDialectName = 'postgres' | 'mysql' | 'mariadb' | 'sqlite';

/** What a database can do; claim forms and suites branch on these, never on the database name. */
export interface DialectCapabilities {
  /** `SELECT … FOR UPDATE SKIP LOCKED` exists: the row lock form is possible. */
  readonly supportsRowLock: boolean;
  /** `UPDATE … RETURNING` (Postgres, SQLite). MariaDB 10.11 and MySQL lack it. */
  readonly supportsUpdateReturning: boolean;
  /** `DELETE … RETURNING` (Postgres, SQLite, MariaDB). */
  readonly supportsDeleteReturning: boolean;
  /** `INSERT … RETURNING` (Postgres, SQLite, MariaDB). */
  readonly supportsInsertReturning: boolean;
  /** One writer at a time: only one claim may run at once (WP-7). */
  readonly hasSingleWriter: boolean;
  /**
   * The pool may be a session the service also uses directly (SQLite's one handle), with a
   * transaction of its own open that no driver sees: a statement run then joins it. Work that
   * must commit on its own (the relay's claim and its send into the same database) begins a
   * transaction first, and a BEGIN refused there means the service's transaction is open.
   */
  readonly sharesSessionWithService: boolean;
  /** The lease claim is a multi-statement transaction that locks what it reads (WP-7). */
  readonly leaseClaimLocksRows: boolean;
  /** The lease claim statement returns rows whose attempt is already counted. */
  readonly leaseClaimReturnsCountedAttempt: boolean;
  /** Isolation levels a claim transaction can be opened at. */
  readonly isolationLevels: readonly IsolationLevel[];
  /** `LISTEN`/`NOTIFY` wake-ups across processes (Postgres): the dialect has `notify` statements. */
  readonly supportsListenNotify: boolean;
  /**
   * Locks held by a session and seen by every session of the server (Postgres advisory locks,
   * MySQL `GET_LOCK`): advisory keys exclude across processes. SQLite keeps them in process.
   */
  readonly supportsSessionLocks: boolean;
}

/**
 * The columns of a queue table as found in the database when a subscription opens, in table
 * order. Statements that copy or return whole rows name them explicitly.
 */
export type TableColumns = readonly string[];

/** A dead-letter destination. */
export type DeadLetterTarget =
  | { readonly kind: 'group'; readonly group: string }
  | { readonly kind: 'table'; readonly schema: string | undefined; readonly name: string };

/**
 * Statements that open, end and mark transactions. MySQL opens a transaction at a level with
 * two statements (`SET TRANSACTION …` then `START TRANSACTION`), so `begin` returns a list.
 */
export interface SessionStatements {
  /** Refuses a level the database cannot open with `UnsupportedError`. */
  begin(options?: { isolation?: IsolationLevel | undefined; sqliteBegin?: SqliteBeginMode | undefined }): Statement[];
  commit(): Statement;
  rollback(): Statement;
  /** Transactional mode, row lock form: marks where the handler's writes begin in the claim's transaction. */
  savepoint(): Statement;
  /** Undoes what the handler wrote since `savepoint`, keeping the claim's locks. */
  rollbackToSavepoint(): Statement;
  /** `SELECT VERSION()` or its equivalent; one row, one column named `version`. */
  serverVersion(): Statement;
}

/**
 * Row lock form: the claim runs in a transaction that stays open while the handler works; the
 * settlement statements run in it and the caller commits.
 * Claim params: `group` (grouped tables), `now` (tables with retryAfter on the host clock), `limit`.
 * A table with `clock: 'database'` reads the database's now instead of binding one. On a FIFO table
 * the claim takes the group's head only (no `limit`), and the caller runs `fifo.guard` first in
 * the same transaction.
 */
export interface RowLockStatements {
  claim(spec: TableSpec, columns: TableColumns): Statement;
  /** `attempt = attempt + 1`, or `undefined` without an attempt column (the rollback releases). */
  retry(spec: TableSpec): Statement | undefined;
  /**
   * `retry_after = :retryAfterAt` (database clock: its now plus `:delayMicroseconds`) and
   * `attempt + 1`; `undefined` without a retryAfter column.
   */
  retryAfter(spec: TableSpec): Statement | undefined;
  /**
   * Ack and drop of `rowCount` rows the claim's transaction holds locked, in one statement: `id`
   * repeated once per row (padding with a repeated id is harmless), `now` when the table marks
   * finished rows. No token: the row locks fence it. Postgres: `WHERE id IN (…)`. MySQL and
   * MariaDB: a derived table of the ids joined to the table by its primary key, one unique lookup
   * per id, since InnoDB may scan the whole table for an `IN (…)` list (when its statistics count
   * a small table) and a DELETE's scan waits for the rows other claims hold: two such deletes
   * deadlock. Absent where each row is finished by its own statement.
   */
  readonly finishMany?: (spec: TableSpec, rowCount: number) => Statement;
}

/**
 * Lease form: `locked_until` is the ownership token. Every settlement names it (`held`) and a
 * settlement that affects no row means the lease was lost.
 */
export interface LeaseStatements {
  /**
   * The claim. Postgres and SQLite: one statement (params among `group`, `now`, `leaseNow`,
   * `limit`, `lockedUntil`). MySQL/MariaDB: a `select` run in a READ COMMITTED transaction
   * (`begin`) and a `stamp` per selected row (`lockedUntil`, `id`, `leaseNow`), then commit.
   * On a FIFO table the claim takes the group's head only, and carries the group guard where the
   * database needs one (see `LeaseClaim`).
   */
  claim(spec: TableSpec, columns: TableColumns, options?: LeaseClaimOptions): LeaseClaim;
  /** Clears the lease (`id`, `held`): retry, and rows handed back unhandled on stop. */
  release(spec: TableSpec): Statement;
  /** `retry_after = :retryAfterAt`, lease cleared; `undefined` without a retryAfter column. */
  retryAfter(spec: TableSpec): Statement | undefined;
  /** Renewal: `locked_until = :lockedUntil WHERE id = :id AND locked_until = :held`. */
  extend(spec: TableSpec): Statement;
  /**
   * Locks the row while the lease holds (`id`, `held`) and changes nothing: 0 rows means lost.
   * Transactional mode runs it in the delivery's transaction before the ack.
   */
  confirm(spec: TableSpec): Statement;
  /**
   * Settles `rowCount` leases of one kind together, each row under its own token, in a shape that
   * tells exactly which rows still carried their token (see `LeaseSettleMany`). `undefined` for a
   * kind that is more than one statement per row here (a dead letter into a table on MySQL and
   * SQLite: a copy then a delete).
   */
  settleMany(spec: TableSpec, columns: TableColumns, request: LeaseSettleManyRequest): LeaseSettleMany | undefined;
}

/** How a lease claim is rendered beyond the table's own roles. */
export interface LeaseClaimOptions {
  /**
   * `concurrency.perKey`: rows whose partition key has no room under `:perKey` are not claimable
   * (claim-clauses.ts `perKeyConditions`). Run only behind the concurrency guard.
   */
  readonly perKey?: boolean;
  /**
   * `rate: { key: true }`: rows whose partition key took `:rateLimit` rows since `:rateFreeSince`
   * (in the uses table of this rate limits table) are not claimable, and a claim takes no more of
   * a key than its room (claim-clauses.ts `rateKeyConditions`). Run only behind the rate guard.
   */
  readonly rateByKey?: RateLimitsTable;
}

/**
 * What many lease settlements do: `finish` (delete, or mark processedAt), `release` (retry, and
 * rows handed back), `retryAfter` (delay, lease cleared), `deadLetter` (into a group or a table).
 * `rowCount` sizes statements that take a placeholder per row (MySQL, MariaDB, SQLite); Postgres
 * binds arrays and renders one text for any count.
 */
export interface LeaseSettleManyRequest {
  readonly kind: 'finish' | 'release' | 'retryAfter' | 'deadLetter';
  readonly rowCount: number;
  /** The dead-letter destination, for `deadLetter`. */
  readonly target?: DeadLetterTarget;
}

/**
 * How many lease settlements run; each returns or locks the ids (in the table's id column) of
 * the rows whose token matched, and only those rows change.
 * - `returning`: one statement that settles the rows and returns their ids.
 * - `lockThenWrite` (no `UPDATE … RETURNING`): `begin`, then `lock` selects the matching rows
 *   `FOR UPDATE`, then `write` settles them under the same condition, then commit. The lock's
 *   rows are the ones settled: nothing can change their tokens between the two statements.
 *
 * Row values bind as `rowParams` says: `arrays` binds `ids`, `helds` and `retryAfterAts`, one
 * array each; `repeated` repeats `id`, `held` and `retryAfterAt` once per row, and occurrence
 * `k` of such a parameter belongs to row `k` modulo `rowCount`. Other parameters (`now`,
 * `destination`) are shared by every row.
 */
export type LeaseSettleMany = (
  | { readonly kind: 'returning'; readonly statement: Statement }
  | { readonly kind: 'lockThenWrite'; readonly begin: Statement[]; readonly lock: Statement; readonly write: Statement }
) & { readonly rowParams: 'arrays' | 'repeated' };

/**
 * How a lease claim runs.
 * - `single`: one statement on its own. With `guarded` (FIFO tables on Postgres) the caller runs
 *   `begin`, then the guard, then the statement, then commits; a guard that reads 0 ends the
 *   transaction with a rollback and the claim takes nothing.
 * - `selectThenStamp`: `begin`, the `guard` when present (FIFO tables) with the same rule, the
 *   `select`, a `stamp` per selected row (or, with `stampAll`, one statement for every selected
 *   row), then commit.
 */
export type LeaseClaim =
  | {
      readonly kind: 'single';
      readonly statement: Statement;
      readonly guarded?: { readonly begin: Statement[]; readonly guard: Statement };
    }
  | {
      readonly kind: 'selectThenStamp';
      readonly begin: Statement[];
      readonly guard?: Statement;
      readonly select: Statement;
      readonly stamp: Statement;
      /**
       * Stamps `rowCount` selected rows in one statement: params `lockedUntil`, then `id` once per
       * row (a list padded with repeats is harmless), then `leaseNow`. The select locked every row
       * it returned, so all of them are stamped; fewer means something else held one.
       */
      readonly stampAll?: (rowCount: number) => Statement;
      /**
       * The group's first unfinished rows in claim order, their id column alone, read without
       * locks (params `group`, `limit`): the outbox relay's batch, which must have no gap. Run
       * after the select, it shows a row the select skipped because another statement held it,
       * if only for an instant; the claim takes the selected rows up to that one.
       */
      readonly firstRows?: Statement;
    };

/** The one column of the group guard's one row: 1 when this claim owns the group, 0 otherwise. */
export const GROUP_GUARD_COLUMN = 'owned';

/**
 * FIFO groups (WP-11): at most one row of a group in work at a time, across every broker and
 * process. Claims take only the group's head; the guard keeps two claims from taking it (or a
 * head that appeared beside a row in work) at once.
 */
export interface FifoStatements {
  /**
   * The group guard (param `group`), run first in the claim's transaction; one row with an
   * integer column named `GROUP_GUARD_COLUMN`. Postgres: a transaction-scoped advisory lock on
   * the table and group. MySQL/MariaDB: 1 only when the claim could lock the group's row in
   * `tablequeue_fifo_guards` without waiting, which it then holds until the transaction ends; a
   * second column, `tablequeue_guard_row`, is 0 when the group has no row yet, and the claim then
   * adds it and asks again (dialect/fifo-guard-statements.ts). `undefined` on a table without
   * FIFO groups, and on SQLite, whose single writer runs one claim at a time.
   */
  guard(spec: TableSpec): Statement | undefined;
}

/**
 * Settlements that finish or move a row. With `fenced: true` (lease form) each statement also
 * requires `locked_until = :held` and clears the lease where the row stays.
 * Params: `id`, `held` when fenced, `now` for the processedAt mark (none on a database-clock
 * table, which reads the database's now), `destination` for groups.
 */
export interface SettleStatements {
  /** Ack and drop: delete, or mark `processed_at = :now`. */
  finish(spec: TableSpec, options: { fenced: boolean }): Statement;
  /**
   * Dead letter. Into a group: one update. Into a table: Postgres one statement; MySQL and
   * SQLite an insert-select then a delete, run by the caller in one transaction. A fenced copy
   * writes NULL into the destination's lockedUntil column. On a table with a headers column the
   * row's headers gain `LAST_ERROR_HEADER` set to `lastError`, the rest kept (last-error-header.ts).
   */
  deadLetter(
    spec: TableSpec,
    columns: TableColumns,
    target: DeadLetterTarget,
    options: { fenced: boolean },
  ): Statement[];
}

/** Inserts written by publish. */
export interface InsertStatements {
  /**
   * A multi-row insert of `rowCount` rows over `columns` (params `column:<name>` repeated per row,
   * row after row). Returns the id column where the database supports `INSERT … RETURNING`.
   */
  rows(spec: TableSpec, columns: readonly string[], rowCount: number, options?: InsertOptions): Statement;
}

export interface InsertOptions {
  /**
   * Database-clock tables: the retryAfter column's values are delays in microseconds, and each
   * row is due at the database's now plus its delay. Otherwise the values are instants.
   */
  readonly retryAfterAsDelay?: boolean;
  /**
   * Rows whose dedupe key another row of their group holds are skipped, not written (`ON
   * CONFLICT … DO NOTHING`), where `dedupe.heldKeyOnInsert` is `skipped`; refused elsewhere.
   */
  readonly skipHeldKeys?: boolean;
}

/** What `createTableSql` renders beyond what the roles need. */
export interface CreateTableOptions {
  /**
   * The `<table>_in_work` index over `(group, locked_until)` on a lease table that is not FIFO
   * (FIFO lease tables always get it): concurrency limits count a queue's rows in work on every
   * claim, which without it is a scan of the whole table (docs/benchmarks.md, "Rows in work").
   * Its price: a claim's stamp changes an indexed column, so it is no longer a HOT update.
   */
  readonly inWorkIndex?: boolean;
}

/** Statements about the table itself. */
export interface SchemaStatements {
  /** Selects no row but every column, so a driver can read the table's column names. */
  probeColumns(spec: TableSpec): Statement;
  /** `CREATE TABLE` for the declared roles plus the claim-order index, as separate statements. */
  createTable(spec: TableSpec, options?: CreateTableOptions): string[];
  /**
   * How the text columns that name rows compare, where a table made by hand can compare them
   * loosely: MySQL and MariaDB, whose default collations ignore case, accents and trailing spaces.
   */
  readonly textCollation?: TextCollationStatements;
  /**
   * The indexes on a queue table, read at start so that a lease subscription whose claims count
   * the queue's rows in work (concurrency limits, FIFO groups) can warn when no index serves that
   * count; a dialect without it skips the check.
   */
  readonly indexes?: IndexStatements;
}

/** The key columns of a table's indexes, and the in-work index that `createTableSql` can add. */
export interface IndexStatements {
  /**
   * Selects `index` (its name), `position` (from 1) and `column` (NULL for an expression) for each
   * key column of each usable index on the table, ordered by index and position.
   */
  read(spec: TableSpec): Statement;
  /** The `CREATE INDEX` of `createTableSql`'s `inWorkIndex` for the table (a lease table). */
  renderInWorkIndex(spec: TableSpec): string;
}

/** The collations of a table's group, partition key and supplied id columns, and their fix. */
export interface TextCollationStatements {
  /**
   * Selects `column`, `collation`, `type` and `nullable` ('YES' or 'NO') of each of those columns
   * that holds text; undefined when the table has none of them.
   */
  read(spec: TableSpec): Statement | undefined;
  /** What `collation` ignores when it compares ('case', 'accents', 'trailing spaces'); empty when nothing. */
  ignoredBy(collation: string): readonly string[];
  /** `ALTER TABLE … MODIFY` that makes one column compare exactly, keeping its type and nullability. */
  renderFix(spec: TableSpec, column: { name: string; type: string; isNullable: boolean }): string;
}

/**
 * Every statement tablequeue runs on a queue table, grouped by concern. The built-in dialects
 * implement it (`builtInDialect`); a service can bring its own for a database that speaks one of
 * the three protocols with differences (a fork, a proxy, an older server), usually through
 * `defineDialect`, which extends a built-in. Side tables (schedules, heartbeats, pauses, cancels,
 * rate and concurrency limits, retention, the outbox relay's bookkeeping) keep the built-in
 * spelling of `name`. A dialect that cannot render a statement for a table throws; it never
 * renders a statement that does something else. docs/dialects.md has the contract.
 */
export interface Dialect {
  /**
   * The `DIALECT_INTERFACE_VERSION` the dialect was written for, as a number literal in its own
   * code: the broker refuses a dialect of another version with a `DialectVersionError`.
   */
  readonly interfaceVersion: number;
  readonly name: DialectName;
  /** What errors call the dialect: the built-in's name, or the service's own name for its dialect. */
  readonly label: string;
  /**
   * The built-in dialect this one follows (a built-in names itself). At `start()` the broker
   * renders every statement of each table it reads with both, and refuses a statement this
   * dialect throws for, or renders with other parameters, where the built-in renders one.
   */
  readonly basedOn: BuiltInDialectName;
  readonly capabilities: DialectCapabilities;
  readonly session: SessionStatements;
  readonly rowLock: RowLockStatements;
  readonly lease: LeaseStatements;
  readonly fifo: FifoStatements;
  readonly advisory: AdvisoryStatements;
  readonly settle: SettleStatements;
  readonly insert: InsertStatements;
  readonly dedupe: DedupeStatements;
  readonly schema: SchemaStatements;
  /**
   * Checks a table against what this database can do (row lock on SQLite, identifier limits,
   * isolation levels, FIFO row lock tables at serializable on MySQL); throws `UnsupportedError` or `DeclarationError` naming the fix.
   */
  validateTable(spec: TableSpec): void;
  /**
   * Checks `session.serverVersion()`'s `version` against the oldest server the dialect supports
   * and throws a `ServerVersionError` saying what is needed (the built-ins: PostgreSQL 11, MySQL
   * 8.0.1, MariaDB 10.6, SQLite 3.35); a MySQL-family built-in also refuses the other flavour.
   */
  checkServerVersion(version: string): void;
  /** Wake-ups across processes; only on databases with `supportsListenNotify`. */
  readonly notify?: NotifyStatements;
}
