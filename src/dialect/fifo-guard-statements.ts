/**
 * FIFO groups on MySQL and MariaDB: one guard row per group in `tablequeue_fifo_guards`, beside
 * the queue table (in its schema when it names one). A FIFO claim locks its group's row with
 * SKIP LOCKED first in its transaction (`fifo.guard`), so a second claim of the group finds it
 * held and takes nothing until the first transaction ends: at the lease claim's commit, or in the
 * row lock form at the settlement's. MySQL and MariaDB have no transaction-scoped advisory lock,
 * which is PostgreSQL's guard; SQLite's claims run one at a time under its single writer.
 *
 * The guard reads one row whatever the group holds. The guard it replaced counted the group's
 * unfinished rows twice, once with SKIP LOCKED, and locked every one of them: a claim of a group
 * of 100,000 rows took 143 ms on MariaDB (docs/benchmarks.md, "One FIFO group").
 */
import type { Statement } from '../statement.js';
import type { TableSpec } from '../table/table-spec.js';
import type { DialectName } from './dialect.js';
import { BACKTICK_STYLE, fixedSql, identifier, param, qualifiedName, renderDdl, renderStatement, sql, textLiteral, type SqlText } from './quoting.js';

export const FIFO_GUARDS_TABLE = 'tablequeue_fifo_guards';

/**
 * The guard's second column: 0 when the group has no guard row yet (a name the outbox relay meets
 * for the first time, or a row removed by hand). The claim then adds it (`addRow`) in its own
 * transaction and asks again, holding the row it inserted.
 */
export const GUARD_ROW_COLUMN = 'tablequeue_guard_row';

export interface FifoGuardRows {
  /** `CREATE TABLE IF NOT EXISTS` of the guard rows, run when a FIFO subscription or a relay opens. */
  createTable(spec: TableSpec): string;
  /** Whether the group's row is there (param `group`): one row, column `GUARD_ROW_COLUMN`; a plain read that locks nothing. */
  hasRow(spec: TableSpec): Statement;
  /** Adds the group's row (param `group`) unless it is there. */
  addRow(spec: TableSpec): Statement;
  /** The guard itself, as `fifo.guard` renders it: the SKIP LOCKED count of the group's row, and `GUARD_ROW_COLUMN`. */
  guard(spec: TableSpec, ownedColumn: string): Statement;
}

/** The guard rows where the database needs them (MySQL, MariaDB); undefined elsewhere. */
export function fifoGuardRowsFor(database: DialectName): FifoGuardRows | undefined {
  return database === 'mysql' ? MYSQL_FIFO_GUARD_ROWS : undefined;
}

function guardsTableOf(spec: TableSpec): SqlText {
  return qualifiedName(spec.schema, FIFO_GUARDS_TABLE);
}

function ofGroup(spec: TableSpec): SqlText {
  return sql`${identifier('table_name')} = ${textLiteral(spec.qualifiedName)} AND ${identifier('queue_name')} = ${param('group')}`;
}

function countOfGroup(spec: TableSpec): SqlText {
  return sql`SELECT COUNT(*) FROM ${guardsTableOf(spec)} WHERE ${ofGroup(spec)}`;
}

export const MYSQL_FIFO_GUARD_ROWS: FifoGuardRows = {
  // utf8mb4_bin, as the concurrency guards: names compare exactly in both flavours. A qualified
  // table name is at most 129 characters (two identifiers of 64 and a dot); a group at most 255.
  createTable: (spec) => {
    const text = (length: number) => fixedSql(`varchar(${length}) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL`);
    return renderDdl(
      BACKTICK_STYLE,
      sql`CREATE TABLE IF NOT EXISTS ${guardsTableOf(spec)} (\n  ${identifier('table_name')} ${text(129)},\n  ${identifier('queue_name')} ${text(255)},\n  PRIMARY KEY (${identifier('table_name')}, ${identifier('queue_name')})\n)`,
    );
  },
  hasRow: (spec) => renderStatement(BACKTICK_STYLE, 'fifo.hasGuardRow', sql`SELECT CAST((${countOfGroup(spec)}) AS SIGNED) AS ${identifier(GUARD_ROW_COLUMN)}`),
  // IGNORE: a claim of the group that added the row first (not yet committed) makes this wait
  // for its end, then skip the duplicate.
  addRow: (spec) =>
    renderStatement(
      BACKTICK_STYLE,
      'fifo.addGuardRow',
      sql`INSERT IGNORE INTO ${guardsTableOf(spec)} (${identifier('table_name')}, ${identifier('queue_name')}) VALUES (${textLiteral(spec.qualifiedName)}, ${param('group')})`,
    ),
  // 1 and 1: this claim holds the row. 0 and 1: another transaction holds it. 0 and 0: missing.
  guard: (spec, ownedColumn) =>
    renderStatement(
      BACKTICK_STYLE,
      'fifo.guard',
      sql`SELECT CAST((${countOfGroup(spec)} FOR UPDATE SKIP LOCKED) AS SIGNED) AS ${identifier(ownedColumn)}, CAST((${countOfGroup(spec)}) AS SIGNED) AS ${identifier(GUARD_ROW_COLUMN)}`,
    ),
};
