/**
 * What the operator tools run against a queue table: per-group counts, a peek in claim order,
 * dead letters moved back, purge. The text differs between databases only in quoting and in how
 * a dead-letter table's rows move back (Postgres: one statement; MySQL/MariaDB: rows locked
 * first; SQLite: its single writer holds the file), so one builder renders all four.
 *
 * "In work" counts live leases only (`locked_until` after `now`). A row lock claim in progress is
 * not counted: Postgres and MySQL show row locks only to a reader that takes locks itself
 * (`FOR UPDATE SKIP LOCKED` writes a lock mark into every row it passes), and an inspector must
 * not write to every row of a table to count it.
 */
import type { Statement } from '../statement.js';
import type { TableSpec } from '../table/table-spec.js';
import { claimOrder, columnList, tableOf, whereAll } from './claim-clauses.js';
import type { DialectChoice } from './create-dialect.js';
import type { DeadLetterTarget, TableColumns } from './dialect.js';
import { deadLetterTableOf } from './portable-statements.js';
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

/** The result columns of `counts`, one row per group (one row in all on a table without groups). */
export const COUNT_COLUMNS = Object.freeze({
  group: 'queue_group',
  ready: 'ready_count',
  delayed: 'delayed_count',
  inWork: 'in_work_count',
  processed: 'processed_count',
  total: 'total_count',
  oldestReadyAt: 'oldest_ready_at',
});

/**
 * The attempt a requeued row starts from: the `DEFAULT 1` of the attempt column `init` creates.
 * Written as a literal because SQLite has no `DEFAULT` in an `UPDATE`.
 */
export const REQUEUED_ATTEMPT = 1;

/**
 * Moving dead letters back from a table: the statements in order, run in one transaction, and
 * the index of the one whose affected rows count the rows moved.
 */
export interface RequeueFromTable {
  readonly statements: readonly Statement[];
  readonly countedIndex: number;
}

export interface InspectionStatements {
  /**
   * One statement: per group ready, delayed, in work, processed, total and the retry time of the
   * oldest ready row. Param `now` (every occurrence the same instant).
   */
  counts(spec: TableSpec): Statement;
  /** Unfinished rows in claim order; params `group` (with `byGroup`) and `limit`. */
  peek(spec: TableSpec, columns: TableColumns, options: { byGroup: boolean }): Statement;
  /**
   * Dead letters of a group back to the group `destination`, attempt reset and lease cleared;
   * params `destination`, `group`, and `id` with `byId`. Finished rows stay where they are.
   */
  requeueFromGroup(spec: TableSpec, options: { byId: boolean }): Statement;
  /**
   * Dead letters of a table back into the queue table `spec`, ids kept, attempt reset, lease and
   * processed mark cleared; `toGroup` writes param `destination` into the group column; `byId`
   * moves only the row `id`. `columns` are the queue table's, which the dead-letter table shares.
   */
  requeueFromTable(
    spec: TableSpec,
    columns: TableColumns,
    source: Extract<DeadLetterTarget, { kind: 'table' }>,
    options: { byId: boolean; toGroup: boolean },
  ): RequeueFromTable;
  /** Deletes every row, or (with `byGroup`) the rows of group `group`. */
  purge(spec: TableSpec, options: { byGroup: boolean }): Statement;
}

type TableMove = 'writableCte' | 'lockThenCopy' | 'copyThenRemove';

const MOVES: Record<DialectChoice, { style: SqlStyle; move: TableMove }> = {
  postgres: { style: DOUBLE_QUOTE_STYLE, move: 'writableCte' },
  mysql: { style: BACKTICK_STYLE, move: 'lockThenCopy' },
  mariadb: { style: BACKTICK_STYLE, move: 'lockThenCopy' },
  sqlite: { style: BACKTICK_STYLE, move: 'copyThenRemove' },
};

export function createInspectionStatements(database: DialectChoice): InspectionStatements {
  const { style, move } = MOVES[database];
  return Object.freeze({
    counts: (spec: TableSpec) => renderCounts(style, spec),
    peek: (spec: TableSpec, columns: TableColumns, options: { byGroup: boolean }) =>
      renderPeek(style, spec, columns, options),
    requeueFromGroup: (spec: TableSpec, options: { byId: boolean }) => renderRequeueFromGroup(style, spec, options),
    requeueFromTable: (
      spec: TableSpec,
      columns: TableColumns,
      source: Extract<DeadLetterTarget, { kind: 'table' }>,
      options: { byId: boolean; toGroup: boolean },
    ) => renderRequeueFromTable(style, move, spec, columns, source, options),
    purge: (spec: TableSpec, options: { byGroup: boolean }) => renderPurge(style, spec, options),
  });
}

function renderCounts(style: SqlStyle, spec: TableSpec): Statement {
  const unfinished = spec.processedAt === undefined ? [] : [sql`${identifier(spec.processedAt)} IS NULL`];
  const lockedUntil = spec.lockedUntil === undefined ? undefined : identifier(spec.lockedUntil);
  const free = lockedUntil === undefined ? [] : [sql`(${lockedUntil} IS NULL OR ${lockedUntil} <= ${param('now')})`];
  const retryAfter = spec.retryAfter === undefined ? undefined : identifier(spec.retryAfter);
  const readyConditions = [...unfinished, ...free];
  if (retryAfter !== undefined) readyConditions.push(sql`${retryAfter} <= ${param('now')}`);

  const countWhere = (conditions: readonly SqlText[]): SqlText =>
    conditions.length === 0 ? sql`COUNT(*)` : sql`COUNT(CASE WHEN ${joinSql(conditions, ' AND ')} THEN 1 END)`;
  const zero = fixedSql('0');
  const alias = (name: string) => fixedSql(name);

  const selected: SqlText[] = [];
  if (spec.group !== undefined) selected.push(sql`${identifier(spec.group.column)} AS ${alias(COUNT_COLUMNS.group)}`);
  selected.push(sql`${countWhere(readyConditions)} AS ${alias(COUNT_COLUMNS.ready)}`);
  const delayed =
    retryAfter === undefined ? zero : countWhere([...unfinished, ...free, sql`${retryAfter} > ${param('now')}`]);
  selected.push(sql`${delayed} AS ${alias(COUNT_COLUMNS.delayed)}`);
  const inWork = lockedUntil === undefined ? zero : countWhere([...unfinished, sql`${lockedUntil} > ${param('now')}`]);
  selected.push(sql`${inWork} AS ${alias(COUNT_COLUMNS.inWork)}`);
  const processed = spec.processedAt === undefined ? zero : sql`COUNT(${identifier(spec.processedAt)})`;
  selected.push(sql`${processed} AS ${alias(COUNT_COLUMNS.processed)}`);
  selected.push(sql`COUNT(*) AS ${alias(COUNT_COLUMNS.total)}`);
  const oldestReady =
    retryAfter === undefined
      ? fixedSql('NULL')
      : sql`MIN(CASE WHEN ${joinSql(readyConditions, ' AND ')} THEN ${retryAfter} END)`;
  selected.push(sql`${oldestReady} AS ${alias(COUNT_COLUMNS.oldestReadyAt)}`);

  const grouping =
    spec.group === undefined
      ? sql``
      : sql` GROUP BY ${identifier(spec.group.column)} ORDER BY ${identifier(spec.group.column)}`;
  return renderStatement(
    style,
    'inspection.counts',
    sql`SELECT ${joinSql(selected, ', ')} FROM ${tableOf(spec)}${grouping}`,
  );
}

function renderPeek(style: SqlStyle, spec: TableSpec, columns: TableColumns, options: { byGroup: boolean }): Statement {
  const conditions: SqlText[] = [];
  if (options.byGroup) conditions.push(sql`${identifier(requireGroupColumn(spec, 'peek by group'))} = ${param('group')}`);
  if (spec.processedAt !== undefined) conditions.push(sql`${identifier(spec.processedAt)} IS NULL`);
  return renderStatement(
    style,
    'inspection.peek',
    sql`SELECT ${columnList(columns)} FROM ${tableOf(spec)}${whereAll(conditions)} ORDER BY ${claimOrder(spec)} LIMIT ${param('limit')}`,
  );
}

function renderRequeueFromGroup(style: SqlStyle, spec: TableSpec, options: { byId: boolean }): Statement {
  const group = identifier(requireGroupColumn(spec, 'dead letters in a group'));
  const assignments = [sql`${group} = ${param('destination')}`, ...resetAssignments(spec)];
  const conditions = [sql`${group} = ${param('group')}`];
  if (spec.processedAt !== undefined) conditions.push(sql`${identifier(spec.processedAt)} IS NULL`);
  if (options.byId) conditions.push(sql`${identifier(spec.id.column)} = ${param('id')}`);
  return renderStatement(
    style,
    'inspection.requeueFromGroup',
    sql`UPDATE ${tableOf(spec)} SET ${joinSql(assignments, ', ')}${whereAll(conditions)}`,
  );
}

function renderRequeueFromTable(
  style: SqlStyle,
  move: TableMove,
  spec: TableSpec,
  columns: TableColumns,
  source: Extract<DeadLetterTarget, { kind: 'table' }>,
  options: { byId: boolean; toGroup: boolean },
): RequeueFromTable {
  const from = deadLetterTableOf(source);
  const list = columnList(columns);
  const where = options.byId ? sql` WHERE ${identifier(spec.id.column)} = ${param('id')}` : sql``;
  const values = joinSql(
    columns.map((column) => requeuedValue(spec, column, options.toGroup)),
    ', ',
  );
  if (move === 'writableCte') {
    const moved = sql`DELETE FROM ${from}${where} RETURNING ${list}`;
    const copy = sql`INSERT INTO ${tableOf(spec)} (${list}) SELECT ${values} FROM tablequeue_moved`;
    return {
      statements: [renderStatement(style, 'inspection.requeueFromTable', sql`WITH tablequeue_moved AS (${moved}) ${copy}`)],
      countedIndex: 0,
    };
  }
  const copy = renderStatement(
    style,
    'inspection.requeueFromTable.copy',
    sql`INSERT INTO ${tableOf(spec)} (${list}) SELECT ${values} FROM ${from}${where}`,
  );
  const remove = renderStatement(style, 'inspection.requeueFromTable.remove', sql`DELETE FROM ${from}${where}`);
  if (move === 'copyThenRemove') return { statements: [copy, remove], countedIndex: 0 };
  // At MySQL's default repeatable read the locking read also locks the gaps it scans, so no dead
  // letter can arrive between the copy and the delete and be deleted without being copied.
  const lock = renderStatement(
    style,
    'inspection.requeueFromTable.lock',
    sql`SELECT ${identifier(spec.id.column)} FROM ${from}${where} FOR UPDATE`,
  );
  return { statements: [lock, copy, remove], countedIndex: 1 };
}

/** A column's value in a requeued copy: as it was, except what a fresh row starts with. */
function requeuedValue(spec: TableSpec, column: string, toGroup: boolean): SqlText {
  if (toGroup && column === requireGroupColumn(spec, 'requeue into a group')) return param('destination');
  if (column === spec.attempt) return fixedSql(String(REQUEUED_ATTEMPT));
  if (column === spec.lockedUntil || column === spec.processedAt) return fixedSql('NULL');
  return identifier(column);
}

/** Attempt back to its start; lease and processed mark cleared. The retry time stays: it is past. */
function resetAssignments(spec: TableSpec): SqlText[] {
  const assignments: SqlText[] = [];
  if (spec.attempt !== undefined) assignments.push(sql`${identifier(spec.attempt)} = ${fixedSql(String(REQUEUED_ATTEMPT))}`);
  if (spec.lockedUntil !== undefined) assignments.push(sql`${identifier(spec.lockedUntil)} = NULL`);
  return assignments;
}

function renderPurge(style: SqlStyle, spec: TableSpec, options: { byGroup: boolean }): Statement {
  const where = options.byGroup
    ? sql` WHERE ${identifier(requireGroupColumn(spec, 'purge by group'))} = ${param('group')}`
    : sql``;
  return renderStatement(style, 'inspection.purge', sql`DELETE FROM ${tableOf(spec)}${where}`);
}

function requireGroupColumn(spec: TableSpec, what: string): string {
  if (spec.group === undefined) {
    throw new TypeError(`table "${spec.qualifiedName}" has no group column; ${what} needs one`);
  }
  return spec.group.column;
}
