/**
 * Cancel (`broker.cancel`): the statements that remove a waiting row, and the cancellations
 * table, where a cancel of a row in work is recorded for the broker that runs it. The table is
 * created if missing when a broker starts, so cancelling needs no migration. Its time is the
 * database's own now, so records can be aged whatever the hosts' clocks say.
 */
import type { Statement } from '../statement.js';
import type { TableSpec } from '../table/table-spec.js';
import { keyFreed, leaseIsFree, requireLeaseColumn, tableOf } from './claim-clauses.js';
import { MYSQL_CLOCK, nowOf, POSTGRES_CLOCK, SQLITE_CLOCK } from './database-clock.js';
import {
  BACKTICK_STYLE,
  DOUBLE_QUOTE_STYLE,
  fixedSql,
  identifier,
  joinSql,
  param,
  renderStatement,
  sql,
  type SqlStyle,
  type SqlText,
} from './quoting.js';
import { parseSideTable, renderCreateSideTable, sideTableName, sideTableTypes, type SideTable, type SideTableDatabase } from './side-table.js';

/** The table a broker records cancels of rows in work in when its options name none. */
export const DEFAULT_CANCELLATIONS_TABLE = 'tablequeue_cancellations';

/** `name` or `schema.name`. */
export type CancellationsTable = SideTable;

/** Column names of the cancellations table, fixed: every broker reads any canceller's records. */
export const CANCELLATION_COLUMNS = Object.freeze({
  /** The queue table as `schema.name` or `name` (its `qualifiedName`). */
  queueTable: 'queue_table',
  /** The row's id as text. */
  rowId: 'row_id',
  cancelledAt: 'cancelled_at',
});

export type CancellationDatabase = SideTableDatabase;

/**
 * Statements over the cancellations table. Values bind as `column:queue_table` and
 * `column:row_id`; `find` binds the ids as `ids` (Postgres, one text array) or `id` repeated.
 */
export interface CancellationRecordStatements {
  /** `CREATE TABLE IF NOT EXISTS`, run by a broker at start. */
  createTable(table: CancellationsTable): string;
  /** Records a cancel; a second cancel of the same row keeps the first record. */
  record(table: CancellationsTable): Statement;
  /**
   * The `row_id` of each of `idCount` ids (padded by the caller with repeats) that has a record
   * for `column:queue_table`. Postgres renders one text for any count.
   */
  find(table: CancellationsTable, idCount: number): Statement;
  /** Deletes a row's record once its delivery settled as cancelled. */
  remove(table: CancellationsTable): Statement;
  /** How `find` binds its ids. */
  readonly idParams: 'array' | 'repeated';
}

/**
 * Statements over the queue table. Every one names the row by `id`, its queue by `group` where
 * the table has groups, and leaves finished rows (processedAt) alone. A removed row is deleted,
 * or marked processed (`now`, or the database's now on a database-clock table) where the table
 * keeps finished rows.
 */
export interface CancelRowStatements {
  /**
   * Lease form: removes the row only while no live lease holds it (`leaseNow`): one statement, so
   * a claim can never take a row this removes.
   */
  removeWaiting(spec: TableSpec): Statement;
  /**
   * Lease form: removes the row whoever holds it, and clears its lease where the row stays, so
   * the holder's renewals and fenced settlements find nothing to change.
   */
  removeInWork(spec: TableSpec): Statement;
  /**
   * Row lock form: locks the row without waiting (`FOR UPDATE SKIP LOCKED`); no row when a
   * claim's transaction holds it (or it is gone), in a transaction the caller opened.
   */
  lockWaiting(spec: TableSpec): Statement;
  /** Row lock form: the row locked by `lockWaiting`, removed in the same transaction. */
  removeLocked(spec: TableSpec): Statement;
  /** Whether the row is still there, unfinished, whoever holds it: its id, or no row. */
  exists(spec: TableSpec): Statement;
}

interface CancellationSpelling {
  readonly style: SqlStyle;
  readonly now: string;
  /** What follows the VALUES list so a second record of one row changes nothing. */
  readonly keepFirst: string;
  readonly idParams: 'array' | 'repeated';
}

const POSTGRES: CancellationSpelling = {
  style: { ...DOUBLE_QUOTE_STYLE, clock: POSTGRES_CLOCK },
  now: POSTGRES_CLOCK.now,
  keepFirst: ' ON CONFLICT DO NOTHING',
  idParams: 'array',
};

const MYSQL: CancellationSpelling = {
  style: { ...BACKTICK_STYLE, clock: MYSQL_CLOCK },
  now: MYSQL_CLOCK.now,
  keepFirst: ` ON DUPLICATE KEY UPDATE \`${CANCELLATION_COLUMNS.cancelledAt}\` = \`${CANCELLATION_COLUMNS.cancelledAt}\``,
  idParams: 'repeated',
};

const SQLITE: CancellationSpelling = {
  style: { ...BACKTICK_STYLE, clock: SQLITE_CLOCK },
  now: SQLITE_CLOCK.now,
  keepFirst: ' ON CONFLICT DO NOTHING',
  idParams: 'repeated',
};

const SPELLINGS: Record<CancellationDatabase, CancellationSpelling> = {
  postgres: POSTGRES,
  mysql: MYSQL,
  mariadb: MYSQL,
  sqlite: SQLITE,
};

/** Parses and validates `name` or `schema.name` for a cancellations table on `database`. */
export function parseCancellationsTable(value: string, database: CancellationDatabase): CancellationsTable {
  return parseSideTable(value, database, 'cancellations table');
}

export function createCancellationRecordStatements(database: CancellationDatabase): CancellationRecordStatements {
  const spelling = SPELLINGS[database];
  const { style } = spelling;
  const c = CANCELLATION_COLUMNS;
  const tableOfRecords = sideTableName;
  const byQueueTable = sql`${identifier(c.queueTable)} = ${param(`column:${c.queueTable}`)}`;
  return Object.freeze({
    idParams: spelling.idParams,
    /**
     * Both text columns compare exactly whatever the database's default collation: ids that differ
     * only in case are different rows. 255 characters fit a qualified name and any id; the key
     * stays within InnoDB's 3,072 bytes.
     */
    createTable: (table: CancellationsTable) => {
      const types = sideTableTypes(database);
      return renderCreateSideTable(database, table, {
        columns: [
          [c.queueTable, `${types.exactText(255)} NOT NULL`],
          [c.rowId, `${types.exactText(255)} NOT NULL`],
          [c.cancelledAt, `${types.time} NOT NULL`],
        ],
        primaryKey: [c.queueTable, c.rowId],
      });
    },
    record: (table: CancellationsTable) =>
      renderStatement(
        style,
        'cancellations.record',
        sql`INSERT INTO ${tableOfRecords(table)} (${identifier(c.queueTable)}, ${identifier(c.rowId)}, ${identifier(c.cancelledAt)}) VALUES (${param(`column:${c.queueTable}`)}, ${param(`column:${c.rowId}`)}, ${fixedSql(spelling.now)})${fixedSql(spelling.keepFirst)}`,
      ),
    find: (table: CancellationsTable, idCount: number) => {
      if (!Number.isInteger(idCount) || idCount < 1) {
        throw new TypeError(`cancellations.find needs a whole number of ids of at least 1, got ${idCount}`);
      }
      const ids =
        spelling.idParams === 'array'
          ? sql`= ANY(${param('ids')}::text[])`
          : sql`IN (${joinSql(Array.from({ length: idCount }, () => param('id')), ', ')})`;
      return renderStatement(
        style,
        'cancellations.find',
        sql`SELECT ${identifier(c.rowId)} FROM ${tableOfRecords(table)} WHERE ${byQueueTable} AND ${identifier(c.rowId)} ${ids}`,
      );
    },
    remove: (table: CancellationsTable) =>
      renderStatement(
        style,
        'cancellations.remove',
        sql`DELETE FROM ${tableOfRecords(table)} WHERE ${byQueueTable} AND ${identifier(c.rowId)} = ${param(`column:${c.rowId}`)}`,
      ),
  });
}

/** The row by id, in its queue's group, unfinished. */
function rowConditions(spec: TableSpec): SqlText[] {
  const conditions = [sql`${identifier(spec.id.column)} = ${param('id')}`];
  if (spec.group !== undefined) conditions.push(sql`${identifier(spec.group.column)} = ${param('group')}`);
  if (spec.processedAt !== undefined) conditions.push(sql`${identifier(spec.processedAt)} IS NULL`);
  return conditions;
}

/** Deletes the row, or marks it processed (its dedupe key freed, and `extra` assignments). */
function removal(spec: TableSpec, extra: readonly SqlText[]): SqlText {
  if (spec.processedAt === undefined) return sql`DELETE FROM ${tableOf(spec)}`;
  const assignments = [sql`${identifier(spec.processedAt)} = ${nowOf(spec)}`, ...keyFreed(spec), ...extra];
  return sql`UPDATE ${tableOf(spec)} SET ${joinSql(assignments, ', ')}`;
}

export function createCancelRowStatements(database: CancellationDatabase): CancelRowStatements {
  const { style } = SPELLINGS[database];
  const where = (conditions: readonly SqlText[]) => joinSql(conditions, ' AND ');
  return Object.freeze({
    removeWaiting: (spec: TableSpec) =>
      renderStatement(style, 'cancel.removeWaiting', sql`${removal(spec, [])} WHERE ${where([...rowConditions(spec), leaseIsFree(spec)])}`),
    removeInWork: (spec: TableSpec) => {
      const clearLease = sql`${identifier(requireLeaseColumn(spec))} = NULL`;
      return renderStatement(style, 'cancel.removeInWork', sql`${removal(spec, [clearLease])} WHERE ${where(rowConditions(spec))}`);
    },
    lockWaiting: (spec: TableSpec) =>
      renderStatement(
        style,
        'cancel.lockWaiting',
        sql`SELECT ${identifier(spec.id.column)} FROM ${tableOf(spec)} WHERE ${where(rowConditions(spec))} FOR UPDATE SKIP LOCKED`,
      ),
    removeLocked: (spec: TableSpec) =>
      renderStatement(style, 'cancel.removeLocked', sql`${removal(spec, [])} WHERE ${where(rowConditions(spec))}`),
    exists: (spec: TableSpec) =>
      renderStatement(
        style,
        'cancel.exists',
        sql`SELECT ${identifier(spec.id.column)} FROM ${tableOf(spec)} WHERE ${where(rowConditions(spec))}`,
      ),
  });
}
