/**
 * The queue controls table: which queues an operator paused (`broker.pause`, `tablequeue pause`,
 * the dashboard). One row per queue table and queue name, written only when someone pauses or
 * resumes; a queue without a row runs. The row whose queue name is empty text stands for the whole
 * table: a table without groups, or every queue of a grouped table at once.
 *
 * Times are the database's own, so `paused_ms_ago` reads the same from any host.
 */
import type { Statement } from '../statement.js';
import { MYSQL_CLOCK, POSTGRES_CLOCK, SQLITE_CLOCK } from './database-clock.js';
import {
  BACKTICK_STYLE,
  DOUBLE_QUOTE_STYLE,
  fixedSql,
  identifier,
  joinSql,
  param,
  renderStatement,
  sql,
  type DatabaseClockSpelling,
  type SqlStyle,
  type SqlText,
} from './quoting.js';
import { parseSideTable, renderCreateSideTable, sideTableName, sideTableTypes, type SideTable, type SideTableDatabase } from './side-table.js';

/** The table pause and resume write when the broker option `queueControlsTable` names none. */
export const DEFAULT_QUEUE_CONTROLS_TABLE = 'tablequeue_queue_controls';

/** The queue name of the row that pauses a whole table. */
export const WHOLE_TABLE_QUEUE_NAME = '';

export type QueueControlsTable = SideTable;

export type QueueControlDatabase = SideTableDatabase;

export const QUEUE_CONTROL_COLUMNS = Object.freeze({
  queueTable: 'queue_table',
  queueName: 'queue_name',
  /** When the queue was paused; NULL while it runs. */
  pausedAt: 'paused_at',
  updatedAt: 'updated_at',
});

/** What `listPaused` computes: whole milliseconds from `paused_at` to the database's now. */
export const PAUSED_MS_AGO_COLUMN = 'paused_ms_ago';

/**
 * Statements over the queue controls table. Keys are bound as `column:queue_table` (the queue
 * table's qualified name as declared) and `column:queue_name`; times are never bound.
 */
export interface QueueControlStatements {
  /** `CREATE TABLE IF NOT EXISTS`, run by a broker with subscriptions at start and before a pause. */
  createTable(table: QueueControlsTable): string;
  /** Marks the queue paused; a queue already paused keeps the time it was first paused. */
  pause(table: QueueControlsTable): Statement;
  /** Marks the queue running. */
  resume(table: QueueControlsTable): Statement;
  /**
   * One row (`queue_name`) for each of the queue's own row and its table's whole-table row that
   * is paused: no rows means the queue runs. What a subscription reads once per poll interval.
   */
  pausedRows(table: QueueControlsTable): Statement;
  /** Every paused queue of every table, with `paused_ms_ago`, by table and queue name. */
  listPaused(table: QueueControlsTable): Statement;
}

interface ControlSpelling {
  readonly style: SqlStyle;
  readonly clock: DatabaseClockSpelling;
  /** `INSERT INTO` what: the table, under an alias where the update names the existing row by it. */
  into(table: SqlText): SqlText;
  /** What follows the VALUES list so that a second write of one queue updates its row. */
  upsert(pausedAt: SqlText): SqlText;
  millisecondsSince(column: string): SqlText;
}

const c = QUEUE_CONTROL_COLUMNS;
const KEY_COLUMNS = [c.queueTable, c.queueName];
const EXISTING = 'tablequeue_control';

/** Postgres and SQLite spell the upsert alike: the existing row by its alias, the new one as `excluded`. */
function onConflictUpdate(pausedAt: SqlText): SqlText {
  return sql` ON CONFLICT (${joinSql(KEY_COLUMNS.map(identifier), ', ')}) DO UPDATE SET ${identifier(c.pausedAt)} = ${pausedAt}, ${identifier(c.updatedAt)} = excluded.${identifier(c.updatedAt)}`;
}

const POSTGRES: ControlSpelling = {
  style: DOUBLE_QUOTE_STYLE,
  clock: POSTGRES_CLOCK,
  into: (table) => sql`${table} AS ${identifier(EXISTING)}`,
  upsert: onConflictUpdate,
  millisecondsSince: (column) =>
    sql`CAST(EXTRACT(EPOCH FROM (${fixedSql(POSTGRES_CLOCK.now)} - ${identifier(column)})) * 1000 AS bigint)`,
};

const MYSQL: ControlSpelling = {
  style: BACKTICK_STYLE,
  clock: MYSQL_CLOCK,
  into: (table) => table,
  upsert: (pausedAt) =>
    sql` ON DUPLICATE KEY UPDATE ${identifier(c.pausedAt)} = ${pausedAt}, ${identifier(c.updatedAt)} = ${fixedSql(MYSQL_CLOCK.now)}`,
  millisecondsSince: (column) => sql`TIMESTAMPDIFF(MICROSECOND, ${identifier(column)}, ${fixedSql(MYSQL_CLOCK.now)}) DIV 1000`,
};

const SQLITE: ControlSpelling = {
  style: BACKTICK_STYLE,
  clock: SQLITE_CLOCK,
  into: (table) => sql`${table} AS ${identifier(EXISTING)}`,
  upsert: onConflictUpdate,
  // julianday reads the fixed-width text the clock writes, offset included; a day is 86,400,000 ms.
  millisecondsSince: (column) => sql`CAST((julianday('now') - julianday(${identifier(column)})) * 86400000 AS integer)`,
};

const SPELLINGS: Record<QueueControlDatabase, ControlSpelling> = { postgres: POSTGRES, mysql: MYSQL, mariadb: MYSQL, sqlite: SQLITE };

/** Parses and validates `name` or `schema.name` for the queue controls table on `database`. */
export function parseQueueControlsTable(value: string, database: QueueControlDatabase): QueueControlsTable {
  return parseSideTable(value, database, 'queue controls table');
}

export function createQueueControlStatements(database: QueueControlDatabase): QueueControlStatements {
  const spelling = SPELLINGS[database];
  const { style } = spelling;
  const tableOf = sideTableName;
  const now = fixedSql(spelling.clock.now);
  const isMysql = spelling === MYSQL;
  const write = (table: QueueControlsTable, name: string, pausedAt: SqlText, pausedAtOnUpdate: SqlText) => {
    const columns = [...KEY_COLUMNS, c.pausedAt, c.updatedAt];
    const values = [param(`column:${c.queueTable}`), param(`column:${c.queueName}`), pausedAt, now];
    return renderStatement(
      style,
      name,
      sql`INSERT INTO ${spelling.into(tableOf(table))} (${joinSql(columns.map(identifier), ', ')}) VALUES (${joinSql(values, ', ')})${spelling.upsert(pausedAtOnUpdate)}`,
    );
  };
  const existingPausedAt = isMysql ? identifier(c.pausedAt) : sql`${identifier(EXISTING)}.${identifier(c.pausedAt)}`;
  const newPausedAt = isMysql ? now : sql`excluded.${identifier(c.pausedAt)}`;
  return Object.freeze({
    /** Binary keys on MySQL and MariaDB: names compare exactly; the two make 2,040 bytes. */
    createTable: (table: QueueControlsTable) => {
      const types = sideTableTypes(database);
      return renderCreateSideTable(database, table, {
        columns: [
          [c.queueTable, `${types.binaryKey} NOT NULL`],
          [c.queueName, `${types.binaryKey} NOT NULL`],
          [c.pausedAt, `${types.time} NULL`],
          [c.updatedAt, `${types.time} NOT NULL`],
        ],
        primaryKey: [c.queueTable, c.queueName],
      });
    },
    pause: (table: QueueControlsTable) =>
      write(table, 'queueControl.pause', now, sql`COALESCE(${existingPausedAt}, ${newPausedAt})`),
    resume: (table: QueueControlsTable) => write(table, 'queueControl.resume', sql`NULL`, sql`NULL`),
    pausedRows: (table: QueueControlsTable) =>
      renderStatement(
        style,
        'queueControl.pausedRows',
        sql`SELECT ${identifier(c.queueName)} FROM ${tableOf(table)} WHERE ${identifier(c.queueTable)} = ${param(`column:${c.queueTable}`)} AND ${identifier(c.queueName)} IN (${param(`column:${c.queueName}`)}, '') AND ${identifier(c.pausedAt)} IS NOT NULL`,
      ),
    listPaused: (table: QueueControlsTable) =>
      renderStatement(
        style,
        'queueControl.listPaused',
        sql`SELECT ${identifier(c.queueTable)}, ${identifier(c.queueName)}, ${spelling.millisecondsSince(c.pausedAt)} AS ${identifier(PAUSED_MS_AGO_COLUMN)} FROM ${tableOf(table)} WHERE ${identifier(c.pausedAt)} IS NOT NULL ORDER BY ${identifier(c.queueTable)}, ${identifier(c.queueName)}`,
      ),
  });
}
