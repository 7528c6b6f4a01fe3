/**
 * Statements whose text is the same on every database but for quoting and placeholders. Each
 * dialect renders them in its own style and writes the rest (claims, sessions, DDL) itself.
 */
import { DeclarationError, UnsupportedError } from '../errors.js';
import type { Statement } from '../statement.js';
import { validateIdentifier } from '../table/identifier.js';
import { ISOLATION_LEVELS, type IsolationLevel, type TableSpec } from '../table/table-spec.js';
import {
  columnList,
  countAttempt,
  leaseIsFree,
  refuseUnbuiltClaims,
  requireLeaseColumn,
  keyFreed,
  rowFilter,
  skipLockedSelect,
  tableOf,
} from './claim-clauses.js';
import { skipHeldKeys } from './dedupe-statements.js';
import { dueAtOf, nowOf } from './database-clock.js';
import type { HeadersWithLastError } from './last-error-header.js';
import type {
  DeadLetterTarget,
  InsertOptions,
  LeaseStatements,
  RowLockStatements,
  SessionStatements,
  SettleStatements,
  TableColumns,
} from './dialect.js';
import {
  databaseClock,
  fixedSql,
  identifier,
  joinSql,
  param,
  qualifiedName,
  renderStatement,
  sql,
  type SqlStyle,
  type SqlText,
} from './quoting.js';

/** The lease statements other than the claim, which each dialect writes itself. */
export function createLeaseSettlements(style: SqlStyle): Omit<LeaseStatements, 'claim' | 'settleMany'> {
  return {
    release: (spec) => renderLeaseRelease(style, spec),
    retryAfter: (spec) => renderLeaseRetryAfter(style, spec),
    extend: (spec) => renderLeaseExtend(style, spec),
    confirm: (spec) => renderLeaseConfirm(style, spec),
  };
}

/** The savepoint a transactional delivery's handler writes after: one name, one per transaction. */
const HANDLER_SAVEPOINT = 'tablequeue_claimed';

/** Savepoints are spelt alike on the three databases. */
export function createSavepointStatements(style: SqlStyle): Pick<SessionStatements, 'savepoint' | 'rollbackToSavepoint'> {
  return {
    savepoint: () => renderStatement(style, 'session.savepoint', sql`SAVEPOINT ${fixedSql(HANDLER_SAVEPOINT)}`),
    rollbackToSavepoint: () =>
      renderStatement(style, 'session.rollbackToSavepoint', sql`ROLLBACK TO SAVEPOINT ${fixedSql(HANDLER_SAVEPOINT)}`),
  };
}

export type DeadLetterToTable = (
  spec: TableSpec,
  columns: TableColumns,
  target: Extract<DeadLetterTarget, { kind: 'table' }>,
  options: { fenced: boolean },
) => Statement[];

/**
 * Finish and dead letter. A move into a table is a copy then a delete unless the dialect can do
 * it in one statement (Postgres, with a writable CTE). `withLastError` is the dialect's spelling
 * of the headers a dead letter writes.
 */
export function createSettleStatements(
  style: SqlStyle,
  withLastError: HeadersWithLastError,
  deadLetterToTable: DeadLetterToTable = (spec, columns, target, options) =>
    renderDeadLetterCopyThenRemove(style, spec, columns, target, options, withLastError),
): SettleStatements {
  return {
    finish: (spec, options) => renderFinish(style, spec, options),
    deadLetter: (spec, columns, target, options) =>
      target.kind === 'group'
        ? [renderDeadLetterToGroup(style, spec, options, withLastError)]
        : deadLetterToTable(spec, columns, target, options),
  };
}

/** The row lock form, where the database has row locks (Postgres, MySQL, MariaDB). */
export function createRowLockStatements(style: SqlStyle, database: string): RowLockStatements {
  return {
    claim: (spec, columns) => {
      refuseUnbuiltClaims(spec, database);
      return renderStatement(style, 'rowLock.claim', skipLockedSelect(spec, columns, 'rowLock'));
    },
    retry: (spec) => renderRowLockRetry(style, spec),
    retryAfter: (spec) => renderRowLockRetryAfter(style, spec),
  };
}

export function renderRowLockFinishMany(style: SqlStyle, spec: TableSpec, rowCount: number): Statement {
  if (!Number.isInteger(rowCount) || rowCount < 1) {
    throw new TypeError(`rowLock.finishMany needs a whole number of rows of at least 1, got ${rowCount}`);
  }
  const ids = joinSql(Array.from({ length: rowCount }, () => param('id')), ', ');
  const where = sql`${identifier(spec.id.column)} IN (${ids})`;
  const write =
    spec.processedAt === undefined
      ? sql`DELETE FROM ${tableOf(spec)}`
      : sql`UPDATE ${tableOf(spec)} SET ${joinSql([sql`${identifier(spec.processedAt)} = ${nowOf(spec)}`, ...keyFreed(spec)], ', ')}`;
  return renderStatement(style, 'rowLock.finishMany', sql`${write} WHERE ${where}`);
}

function renderRowLockRetry(style: SqlStyle, spec: TableSpec): Statement | undefined {
  if (spec.attempt === undefined) return undefined;
  return renderStatement(
    style,
    'rowLock.retry',
    sql`UPDATE ${tableOf(spec)} SET ${countAttempt(spec.attempt)} WHERE ${rowFilter(spec, { fenced: false })}`,
  );
}

function renderRowLockRetryAfter(style: SqlStyle, spec: TableSpec): Statement | undefined {
  if (spec.retryAfter === undefined) return undefined;
  const assignments = [sql`${identifier(spec.retryAfter)} = ${dueAtOf(spec)}`];
  if (spec.attempt !== undefined) assignments.push(countAttempt(spec.attempt));
  return renderStatement(
    style,
    'rowLock.retryAfter',
    sql`UPDATE ${tableOf(spec)} SET ${joinSql(assignments, ', ')} WHERE ${rowFilter(spec, { fenced: false })}`,
  );
}

/**
 * What a lease claim writes: the new expiry, and the attempt, counted at claim so a holder that
 * dies mid-handler still spends one.
 */
export function leaseStampAssignments(spec: TableSpec): SqlText {
  const assignments = [sql`${identifier(requireLeaseColumn(spec))} = ${param('lockedUntil')}`];
  if (spec.attempt !== undefined) assignments.push(countAttempt(spec.attempt));
  return joinSql(assignments, ', ');
}

/**
 * Leases `rowCount` rows that a claim's select locked, in one statement: params `lockedUntil`,
 * `id` once per row, then `leaseNow`. The lease condition is repeated so a stamp never overwrites
 * a live lease. `statement` names it in the error for a bad count.
 */
export function leaseStampOfIds(spec: TableSpec, rowCount: number, statement: string): SqlText {
  if (!Number.isInteger(rowCount) || rowCount < 1) {
    throw new TypeError(`${statement} needs a whole number of rows of at least 1, got ${rowCount}`);
  }
  const ids = joinSql(Array.from({ length: rowCount }, () => param('id')), ', ');
  return sql`UPDATE ${tableOf(spec)} SET ${leaseStampAssignments(spec)} WHERE ${identifier(spec.id.column)} IN (${ids}) AND ${leaseIsFree(spec)}`;
}

function renderLeaseRelease(style: SqlStyle, spec: TableSpec): Statement {
  return renderStatement(
    style,
    'lease.release',
    sql`UPDATE ${tableOf(spec)} SET ${clearLease(spec)} WHERE ${rowFilter(spec, { fenced: true })}`,
  );
}

/** No attempt change: the lease form counted the attempt when it claimed the row. */
function renderLeaseRetryAfter(style: SqlStyle, spec: TableSpec): Statement | undefined {
  if (spec.retryAfter === undefined) return undefined;
  return renderStatement(
    style,
    'lease.retryAfter',
    sql`UPDATE ${tableOf(spec)} SET ${identifier(spec.retryAfter)} = ${param('retryAfterAt')}, ${clearLease(spec)} WHERE ${rowFilter(spec, { fenced: true })}`,
  );
}

function renderLeaseExtend(style: SqlStyle, spec: TableSpec): Statement {
  return renderStatement(
    style,
    'lease.extend',
    sql`UPDATE ${tableOf(spec)} SET ${identifier(requireLeaseColumn(spec))} = ${param('lockedUntil')} WHERE ${rowFilter(spec, { fenced: true })}`,
  );
}

/**
 * Locks the row and checks the token without changing it: run first in a transaction that
 * settles a lease together with other writes, so they commit only while the lease holds.
 */
function renderLeaseConfirm(style: SqlStyle, spec: TableSpec): Statement {
  const lockedUntil = identifier(requireLeaseColumn(spec));
  return renderStatement(
    style,
    'lease.confirm',
    sql`UPDATE ${tableOf(spec)} SET ${lockedUntil} = ${lockedUntil} WHERE ${rowFilter(spec, { fenced: true })}`,
  );
}

function renderFinish(style: SqlStyle, spec: TableSpec, options: { fenced: boolean }): Statement {
  const where = rowFilter(spec, options);
  if (spec.processedAt === undefined) {
    return renderStatement(style, 'settle.finish', sql`DELETE FROM ${tableOf(spec)} WHERE ${where}`);
  }
  const assignments = [sql`${identifier(spec.processedAt)} = ${nowOf(spec)}`, ...keyFreed(spec)];
  if (options.fenced) assignments.push(clearLease(spec));
  return renderStatement(
    style,
    'settle.finish',
    sql`UPDATE ${tableOf(spec)} SET ${joinSql(assignments, ', ')} WHERE ${where}`,
  );
}

/** Moves the row to the destination group; the destination is a parameter like any value. */
function renderDeadLetterToGroup(
  style: SqlStyle,
  spec: TableSpec,
  options: { fenced: boolean },
  withLastError: HeadersWithLastError,
): Statement {
  if (spec.group === undefined) {
    throw new DeclarationError(
      `table "${spec.qualifiedName}" has no group column, so rows cannot be dead-lettered into a group; name a dead-letter table instead`,
    );
  }
  const assignments = [sql`${identifier(spec.group.column)} = ${param('destination')}`, ...keyFreed(spec)];
  if (options.fenced) assignments.push(clearLease(spec));
  if (spec.headers !== undefined) {
    const headers = identifier(spec.headers);
    assignments.push(sql`${headers} = ${withLastError(headers)}`);
  }
  return renderStatement(
    style,
    'settle.deadLetter',
    sql`UPDATE ${tableOf(spec)} SET ${joinSql(assignments, ', ')} WHERE ${rowFilter(spec, options)}`,
  );
}

/** Copy, then delete, both fenced, run by the caller in one transaction (MySQL, SQLite). */
function renderDeadLetterCopyThenRemove(
  style: SqlStyle,
  spec: TableSpec,
  columns: TableColumns,
  target: Extract<DeadLetterTarget, { kind: 'table' }>,
  options: { fenced: boolean },
  withLastError: HeadersWithLastError,
): Statement[] {
  const where = rowFilter(spec, options);
  const copy = sql`INSERT INTO ${deadLetterTableOf(target)} (${columnList(columns)}) SELECT ${copiedColumns(spec, columns, options, withLastError)} FROM ${tableOf(spec)} WHERE ${where}`;
  return [
    renderStatement(style, 'settle.deadLetter.copy', copy),
    renderStatement(style, 'settle.deadLetter.remove', sql`DELETE FROM ${tableOf(spec)} WHERE ${where}`),
  ];
}

/** The destination table, validated like a declared table name; the caller may check more. */
export function deadLetterTableOf(target: Extract<DeadLetterTarget, { kind: 'table' }>): SqlText {
  const name = validateIdentifier(target.name, 'dead-letter table');
  const schema = target.schema === undefined ? undefined : validateIdentifier(target.schema, `schema of dead-letter table "${name}"`);
  return qualifiedName(schema, name);
}

/**
 * The copied row; a fenced copy writes NULL for the lease, which the dead-letter table must not
 * inherit, and every copy NULL for the dedupe key, which a dead letter never holds. With `withLastError`, the headers column is copied with the last error set.
 */
export function copiedColumns(
  spec: TableSpec,
  columns: TableColumns,
  options: { fenced: boolean },
  withLastError?: HeadersWithLastError,
): SqlText {
  const leaseColumn = options.fenced ? requireLeaseColumn(spec) : undefined;
  const copied = (column: string): SqlText => {
    if (column === leaseColumn || column === spec.dedupeKey) return fixedSql('NULL');
    if (column === spec.headers && withLastError !== undefined) return withLastError(identifier(column));
    return identifier(column);
  };
  return joinSql(columns.map(copied), ', ');
}

export interface InsertShape {
  /** `RETURNING <id>` exists. */
  readonly returnsId: boolean;
  /** A row of defaults only: `DEFAULT VALUES` (one row per statement) or `() VALUES ()` repeated. */
  readonly rowOfDefaults: 'defaultValues' | 'emptyValueLists';
}

export function renderInsertRows(
  style: SqlStyle,
  spec: TableSpec,
  columns: readonly string[],
  rowCount: number,
  shape: InsertShape,
  options: InsertOptions = {},
): Statement {
  if (!Number.isInteger(rowCount) || rowCount < 1) {
    throw new TypeError(`insert.rows needs a whole number of rows of at least 1, got ${rowCount}`);
  }
  const returning = shape.returnsId ? sql` RETURNING ${identifier(spec.id.column)}` : sql``;
  if (columns.length === 0) {
    if (shape.rowOfDefaults === 'emptyValueLists') {
      const rows = joinSql(Array.from({ length: rowCount }, () => sql`()`), ', ');
      return renderStatement(style, 'insert.rows', sql`INSERT INTO ${tableOf(spec)} () VALUES ${rows}${returning}`);
    }
    if (rowCount > 1) {
      throw new TypeError(`insert.rows with no columns writes DEFAULT VALUES, one row per statement; got ${rowCount} rows`);
    }
    return renderStatement(style, 'insert.rows', sql`INSERT INTO ${tableOf(spec)} DEFAULT VALUES${returning}`);
  }
  const value = (column: string): SqlText =>
    options.retryAfterAsDelay === true && column === spec.retryAfter
      ? databaseClock(`column:${column}`)
      : param(`column:${column}`);
  const valueList = sql`(${joinSql(columns.map(value), ', ')})`;
  const rows = joinSql(Array.from({ length: rowCount }, () => valueList), ', ');
  const onHeldKey = options.skipHeldKeys === true ? skipHeldKeys(spec) : sql``;
  return renderStatement(
    style,
    'insert.rows',
    sql`INSERT INTO ${tableOf(spec)} (${columnList(columns)}) VALUES ${rows}${onHeldKey}${returning}`,
  );
}

/** Reads no row but every column, so the driver sees the table's columns as they are. */
export function renderProbeColumns(style: SqlStyle, spec: TableSpec): Statement {
  return renderStatement(style, 'schema.probeColumns', sql`SELECT * FROM ${tableOf(spec)} WHERE 1 = 0`);
}

const ISOLATION_LEVEL_SQL: Record<IsolationLevel, string> = {
  'read uncommitted': 'READ UNCOMMITTED',
  'read committed': 'READ COMMITTED',
  'repeatable read': 'REPEATABLE READ',
  serializable: 'SERIALIZABLE',
};

/** The level as SQL keywords; a level from untyped input is checked, never pasted. */
export function isolationLevelSql(level: IsolationLevel): SqlText {
  if (!ISOLATION_LEVELS.includes(level)) {
    throw new DeclarationError(
      `unknown isolation level ${JSON.stringify(level)}; use one of ${ISOLATION_LEVELS.join(', ')}`,
    );
  }
  return fixedSql(ISOLATION_LEVEL_SQL[level]);
}

/**
 * Postgres and MySQL open transactions at an isolation level; a SQLite begin mode declared for
 * them would silently change nothing, so it is refused.
 */
export function refuseSqliteBeginMode(spec: TableSpec, database: string): void {
  if (spec.sqliteBegin === undefined) return;
  throw new UnsupportedError({
    database,
    feature: 'sqliteBegin',
    message: `table "${spec.qualifiedName}" declares sqliteBegin: "${spec.sqliteBegin}", which only SQLite has; remove it, and declare isolation to choose how ${database} opens its transactions`,
  });
}

function clearLease(spec: TableSpec): SqlText {
  return sql`${identifier(requireLeaseColumn(spec))} = NULL`;
}
