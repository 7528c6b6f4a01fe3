/**
 * Throttle windows (`dedupeForMs`): one row per queue table, queue and key, open until
 * `expires_at`. A window outlives the row it let in, so it cannot live in the queue table, whose
 * rows are deleted when acked. Times are the publishing host's, bound like every other instant.
 *
 * Opening is one upsert that changes the row only when its window has passed: two publishes of
 * one key race on the primary key, the second waits for the first's row lock (Postgres, MySQL) or
 * the write lock (SQLite) and then finds the window open.
 */
import type { Statement } from '../statement.js';
import {
  BACKTICK_STYLE,
  DOUBLE_QUOTE_STYLE,
  identifier,
  joinSql,
  param,
  renderStatement,
  sql,
  type SqlStyle,
  type SqlText,
} from './quoting.js';
import { PRUNE_COUNT_COLUMN } from './retention-statements.js';
import { parseSideTable, renderCreateSideTable, sideTableName, sideTableTypes, type SideTable } from './side-table.js';

/** The table throttled publishes use when the broker option names none. */
export const DEFAULT_DEDUPE_WINDOWS_TABLE = 'tablequeue_dedupe_windows';

export type DedupeWindowsTable = SideTable;

export type DedupeWindowDatabase = 'postgres' | 'mysql' | 'sqlite';

export const DEDUPE_WINDOW_COLUMNS = Object.freeze({
  queueTable: 'queue_table',
  queueName: 'queue_name',
  dedupeKey: 'dedupe_key',
  openedBy: 'opened_by',
  expiresAt: 'expires_at',
});

export interface DedupeWindowStatements {
  /** `CREATE TABLE IF NOT EXISTS`, run before a broker's first throttled publish. */
  createTable(table: DedupeWindowsTable): string;
  /**
   * Opens the window of `column:queue_table`, `column:queue_name`, `column:dedupe_key` until
   * `column:expires_at`, unless one is open at `now`. With `opensInOneStatement` it returns one
   * row when it opened the window and none otherwise; without (MySQL), `openedBy` reads back
   * whether `column:opened_by` (a token unique to this publish) is the opener.
   */
  open(table: DedupeWindowsTable): Statement;
  readonly opensInOneStatement: boolean;
  /** MySQL: `opened_by` of the window (params as `open`, without the times and the token). */
  openedBy(table: DedupeWindowsTable): Statement;
  /**
   * Retention's batch: deletes up to `limit` windows of `column:queue_table` that passed by `now`
   * (a passed window only waits to be reopened by its key's next publish), in primary key order,
   * skipping windows a publish has locked where the database can (PostgreSQL). MySQL runs it in a
   * READ COMMITTED transaction, which keeps no lock on the live windows it reads past.
   */
  prunePassed(table: DedupeWindowsTable): Statement;
  /** How many windows of `column:queue_table` passed by `now`, as column `row_count`: what a prune would delete. */
  countPassed(table: DedupeWindowsTable): Statement;
}

interface WindowSpelling {
  readonly style: SqlStyle;
  /** The opener's token: a UUID. */
  readonly tokenType: string;
  /** `INSERT INTO` what: the table, under an alias where the update's condition names the existing row by it. */
  into(table: SqlText): SqlText;
  /** What follows the VALUES list: change the window only when it has passed. */
  readonly reopenWhenPassed: SqlText;
  readonly opensInOneStatement: boolean;
  /** A batch of passed windows deleted: by the key among those selected, or (MySQL) with its own LIMIT. */
  prunePassed(table: SqlText, passed: SqlText, keyOrder: SqlText): SqlText;
}

const c = DEDUPE_WINDOW_COLUMNS;
const KEY_COLUMNS = [c.queueTable, c.queueName, c.dedupeKey];
const EXISTING = 'tablequeue_window';
const KEY_LIST = joinSql(KEY_COLUMNS.map(identifier), ', ');
/** A queue table's windows that passed by `now`. */
const PASSED = sql`${identifier(c.queueTable)} = ${param(`column:${c.queueTable}`)} AND ${identifier(c.expiresAt)} <= ${param('now')}`;

/** PostgreSQL and SQLite delete the keys a limited select found, as a row value among the rows. */
function deleteSelectedKeys(lockClause: SqlText): WindowSpelling['prunePassed'] {
  return (table, passed, keyOrder) =>
    sql`DELETE FROM ${table} WHERE (${KEY_LIST}) IN (SELECT ${KEY_LIST} FROM ${table} WHERE ${passed} ORDER BY ${keyOrder} LIMIT ${param('limit')}${lockClause})`;
}

/** Postgres and SQLite spell the upsert alike but for the case of `excluded`, which both accept. */
const UPSERT_REOPENING_WHEN_PASSED = sql` ON CONFLICT (${joinSql(KEY_COLUMNS.map(identifier), ', ')}) DO UPDATE SET ${identifier(c.openedBy)} = excluded.${identifier(c.openedBy)}, ${identifier(c.expiresAt)} = excluded.${identifier(c.expiresAt)} WHERE ${identifier(EXISTING)}.${identifier(c.expiresAt)} <= ${param('now')} RETURNING 1 AS ${identifier('opened')}`;

const POSTGRES: WindowSpelling = {
  style: DOUBLE_QUOTE_STYLE,
  tokenType: 'text',
  into: (table) => sql`${table} AS ${identifier(EXISTING)}`,
  reopenWhenPassed: UPSERT_REOPENING_WHEN_PASSED,
  opensInOneStatement: true,
  prunePassed: deleteSelectedKeys(sql` FOR UPDATE SKIP LOCKED`),
};

/**
 * The keys are the side tables' binary keys: the three make a 3,060-byte key, under InnoDB's
 * 3,072. The update list binds the values again (`VALUES()` is deprecated in MySQL 8.0.20,
 * MariaDB lacks the alias that replaces it) and sets `opened_by` before `expires_at`, since MySQL
 * assigns left to right and the first test must read the old expiry.
 */
const MYSQL: WindowSpelling = {
  style: BACKTICK_STYLE,
  tokenType: 'varchar(64) CHARACTER SET ascii',
  into: (table) => table,
  reopenWhenPassed: sql` ON DUPLICATE KEY UPDATE ${identifier(c.openedBy)} = IF(${identifier(c.expiresAt)} <= ${param('now')}, ${param(`column:${c.openedBy}`)}, ${identifier(c.openedBy)}), ${identifier(c.expiresAt)} = IF(${identifier(c.expiresAt)} <= ${param('now')}, ${param(`column:${c.expiresAt}`)}, ${identifier(c.expiresAt)})`,
  opensInOneStatement: false,
  // MySQL refuses a LIMIT in a subquery under IN; its DELETE takes one itself. ORDER BY makes the
  // rows a LIMIT picks the same on a replica that replays the statement.
  prunePassed: (table, passed, keyOrder) => sql`DELETE FROM ${table} WHERE ${passed} ORDER BY ${keyOrder} LIMIT ${param('limit')}`,
};

const SQLITE: WindowSpelling = {
  style: BACKTICK_STYLE,
  tokenType: 'text',
  into: (table) => sql`${table} AS ${identifier(EXISTING)}`,
  reopenWhenPassed: UPSERT_REOPENING_WHEN_PASSED,
  opensInOneStatement: true,
  prunePassed: deleteSelectedKeys(sql``),
};

const SPELLINGS: Record<DedupeWindowDatabase, WindowSpelling> = { postgres: POSTGRES, mysql: MYSQL, sqlite: SQLITE };

/** Parses and validates `name` or `schema.name` for the windows table on `database`. */
export function parseDedupeWindowsTable(value: string, database: DedupeWindowDatabase): DedupeWindowsTable {
  return parseSideTable(value, database, 'dedupe windows table');
}

export function createDedupeWindowStatements(database: DedupeWindowDatabase): DedupeWindowStatements {
  const spelling = SPELLINGS[database];
  const { style } = spelling;
  const tableOf = sideTableName;
  const keyMatches = joinSql(
    KEY_COLUMNS.map((column) => sql`${identifier(column)} = ${param(`column:${column}`)}`),
    ' AND ',
  );
  return Object.freeze({
    opensInOneStatement: spelling.opensInOneStatement,
    createTable: (table: DedupeWindowsTable) => {
      const types = sideTableTypes(database);
      return renderCreateSideTable(database, table, {
        columns: [
          [c.queueTable, `${types.binaryKey} NOT NULL`],
          [c.queueName, `${types.binaryKey} NOT NULL`],
          [c.dedupeKey, `${types.binaryKey} NOT NULL`],
          [c.openedBy, `${spelling.tokenType} NOT NULL`],
          [c.expiresAt, `${types.time} NOT NULL`],
        ],
        primaryKey: [c.queueTable, c.queueName, c.dedupeKey],
      });
    },
    open: (table: DedupeWindowsTable) => {
      const columns = [...KEY_COLUMNS, c.openedBy, c.expiresAt];
      const values = joinSql(columns.map((column) => param(`column:${column}`)), ', ');
      return renderStatement(
        style,
        'dedupeWindow.open',
        sql`INSERT INTO ${spelling.into(tableOf(table))} (${joinSql(columns.map(identifier), ', ')}) VALUES (${values})${spelling.reopenWhenPassed}`,
      );
    },
    openedBy: (table: DedupeWindowsTable) =>
      renderStatement(
        style,
        'dedupeWindow.openedBy',
        sql`SELECT ${identifier(c.openedBy)} FROM ${tableOf(table)} WHERE ${keyMatches}`,
      ),
    prunePassed: (table: DedupeWindowsTable) =>
      renderStatement(style, 'dedupeWindow.prunePassed', spelling.prunePassed(tableOf(table), PASSED, KEY_LIST)),
    countPassed: (table: DedupeWindowsTable) =>
      renderStatement(style, 'dedupeWindow.countPassed', sql`SELECT COUNT(*) AS ${identifier(PRUNE_COUNT_COLUMN)} FROM ${tableOf(table)} WHERE ${PASSED}`),
  });
}
