/**
 * What the operator tools run against a queue table: per-group counts, a peek in claim order,
 * dead letters moved back, purge. The text differs between databases in quoting, in how a
 * dead-letter table's rows move back (Postgres: one statement; MySQL/MariaDB: rows locked first;
 * SQLite: its single writer holds the file) and in how headers are read as JSON, so one builder
 * renders all four.
 *
 * A dead letter is a row whose headers carry `LAST_ERROR_HEADER` (every dead-letter move sets
 * it), or any unfinished row of the dead-letter group the operator named. Dead letters count
 * apart from ready, delayed and in work, and a requeue takes the header off again.
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
import {
  MYSQL_HEADERS_HAVE_LAST_ERROR,
  MYSQL_HEADERS_WITHOUT_LAST_ERROR,
  POSTGRES_HEADERS_HAVE_LAST_ERROR,
  POSTGRES_HEADERS_WITHOUT_LAST_ERROR,
  SQLITE_HEADERS_HAVE_LAST_ERROR,
  SQLITE_HEADERS_WITHOUT_LAST_ERROR,
  type HeadersHaveLastError,
  type HeadersWithoutLastError,
} from './last-error-header.js';
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
  deadLettered: 'dead_lettered_count',
  total: 'total_count',
  oldestReadyAt: 'oldest_ready_at',
});

/**
 * The attempt a requeued row starts from: the `DEFAULT 1` of the attempt column `init` creates.
 * Written as a literal because SQLite has no `DEFAULT` in an `UPDATE`.
 */
export const REQUEUED_ATTEMPT = 1;

/**
 * Moving dead letters back: the statements in order, run in one transaction, and the index of
 * the one whose affected rows count the rows moved.
 */
export interface RequeueSteps {
  readonly statements: readonly Statement[];
  readonly countedIndex: number;
}

/** Which dead letters a statement knows of besides the header: the unfinished rows of group `deadLetterGroup`. */
export interface DeadLetterGroupOption {
  readonly deadLetterGroup: boolean;
}

export interface InspectionStatements {
  /**
   * One statement: per group ready, delayed, in work, processed, dead-lettered, total and the
   * retry time of the oldest ready row; a dead letter counts only as dead-lettered. Params `now`
   * (every occurrence the same instant) and `deadLetterGroup` with that option.
   */
  counts(spec: TableSpec, options: DeadLetterGroupOption): Statement;
  /**
   * Unfinished rows in claim order; params `group` (with `byGroup`) and `limit`.
   * `withoutDeadLetters` leaves dead letters out (param `deadLetterGroup` with its option).
   */
  peek(
    spec: TableSpec,
    columns: TableColumns,
    options: { byGroup: boolean; withoutDeadLetters?: DeadLetterGroupOption },
  ): Statement;
  /**
   * Dead letters of a group back to the group `destination`: attempt reset, due at `now`, lease
   * cleared, the last error taken off; params `destination`, `group`, `now`, and `id` with
   * `byId`. Finished rows stay where they are.
   */
  requeueFromGroup(spec: TableSpec, options: { byId: boolean }): RequeueSteps;
  /**
   * Dead letters of a table back into the queue table `spec`, ids kept: attempt reset, due at
   * param `now`, lease and processed mark cleared, the last error taken off; `toGroup` writes
   * param `destination` into the group column; `byId` moves only the row `id`. `columns` are the
   * queue table's, which the dead-letter table shares.
   */
  requeueFromTable(
    spec: TableSpec,
    columns: TableColumns,
    source: Extract<DeadLetterTarget, { kind: 'table' }>,
    options: { byId: boolean; toGroup: boolean },
  ): RequeueSteps;
  /** Deletes every row, or (with `byGroup`) the rows of group `group`. */
  purge(spec: TableSpec, options: { byGroup: boolean }): Statement;
}

type TableMove = 'writableCte' | 'lockThenCopy' | 'copyThenRemove';

/** What one database spells its own way. */
interface InspectionSpelling {
  readonly style: SqlStyle;
  readonly move: TableMove;
  readonly hasLastError: HeadersHaveLastError;
  readonly withoutLastError: HeadersWithoutLastError;
}

const SPELLINGS: Record<DialectChoice, InspectionSpelling> = {
  postgres: {
    style: DOUBLE_QUOTE_STYLE,
    move: 'writableCte',
    hasLastError: POSTGRES_HEADERS_HAVE_LAST_ERROR,
    withoutLastError: POSTGRES_HEADERS_WITHOUT_LAST_ERROR,
  },
  mysql: {
    style: BACKTICK_STYLE,
    move: 'lockThenCopy',
    hasLastError: MYSQL_HEADERS_HAVE_LAST_ERROR,
    withoutLastError: MYSQL_HEADERS_WITHOUT_LAST_ERROR,
  },
  mariadb: {
    style: BACKTICK_STYLE,
    move: 'lockThenCopy',
    hasLastError: MYSQL_HEADERS_HAVE_LAST_ERROR,
    withoutLastError: MYSQL_HEADERS_WITHOUT_LAST_ERROR,
  },
  sqlite: {
    style: BACKTICK_STYLE,
    move: 'copyThenRemove',
    hasLastError: SQLITE_HEADERS_HAVE_LAST_ERROR,
    withoutLastError: SQLITE_HEADERS_WITHOUT_LAST_ERROR,
  },
};

export function createInspectionStatements(database: DialectChoice): InspectionStatements {
  const spelling = SPELLINGS[database];
  return Object.freeze({
    counts: (spec: TableSpec, options: DeadLetterGroupOption) => renderCounts(spelling, spec, options),
    peek: (
      spec: TableSpec,
      columns: TableColumns,
      options: { byGroup: boolean; withoutDeadLetters?: DeadLetterGroupOption },
    ) => renderPeek(spelling, spec, columns, options),
    requeueFromGroup: (spec: TableSpec, options: { byId: boolean }) => renderRequeueFromGroup(spelling, spec, options),
    requeueFromTable: (
      spec: TableSpec,
      columns: TableColumns,
      source: Extract<DeadLetterTarget, { kind: 'table' }>,
      options: { byId: boolean; toGroup: boolean },
    ) => renderRequeueFromTable(spelling, spec, columns, source, options),
    purge: (spec: TableSpec, options: { byGroup: boolean }) => renderPurge(spelling.style, spec, options),
  });
}

/**
 * What makes a row a dead letter, parenthesized: the header a dead-letter move set, or (with
 * `deadLetterGroup`) membership of that group. Undefined when the table can tell neither.
 */
function deadLetterCondition(spelling: InspectionSpelling, spec: TableSpec, options: DeadLetterGroupOption): SqlText | undefined {
  const conditions: SqlText[] = [];
  if (spec.headers !== undefined) conditions.push(spelling.hasLastError(identifier(spec.headers)));
  if (options.deadLetterGroup) {
    conditions.push(sql`${identifier(requireGroupColumn(spec, 'dead letters in a group'))} = ${param('deadLetterGroup')}`);
  }
  if (conditions.length === 0) return undefined;
  if (conditions.length === 1) return sql`(${conditions[0]!})`;
  return sql`(${joinSql(
    conditions.map((condition) => sql`(${condition})`),
    ' OR ',
  )})`;
}

function renderCounts(spelling: InspectionSpelling, spec: TableSpec, options: DeadLetterGroupOption): Statement {
  const unfinished = spec.processedAt === undefined ? [] : [sql`${identifier(spec.processedAt)} IS NULL`];
  const lockedUntil = spec.lockedUntil === undefined ? undefined : identifier(spec.lockedUntil);
  const free = lockedUntil === undefined ? [] : [sql`(${lockedUntil} IS NULL OR ${lockedUntil} <= ${param('now')})`];
  const retryAfter = spec.retryAfter === undefined ? undefined : identifier(spec.retryAfter);
  const dead = deadLetterCondition(spelling, spec, options);
  const live = dead === undefined ? [] : [sql`NOT ${dead}`];
  const readyConditions = [...unfinished, ...free, ...live];
  if (retryAfter !== undefined) readyConditions.push(sql`${retryAfter} <= ${param('now')}`);

  const countWhere = (conditions: readonly SqlText[]): SqlText =>
    conditions.length === 0 ? sql`COUNT(*)` : sql`COUNT(CASE WHEN ${joinSql(conditions, ' AND ')} THEN 1 END)`;
  const zero = fixedSql('0');
  const alias = (name: string) => fixedSql(name);

  const selected: SqlText[] = [];
  if (spec.group !== undefined) selected.push(sql`${identifier(spec.group.column)} AS ${alias(COUNT_COLUMNS.group)}`);
  selected.push(sql`${countWhere(readyConditions)} AS ${alias(COUNT_COLUMNS.ready)}`);
  const delayed =
    retryAfter === undefined ? zero : countWhere([...unfinished, ...free, ...live, sql`${retryAfter} > ${param('now')}`]);
  selected.push(sql`${delayed} AS ${alias(COUNT_COLUMNS.delayed)}`);
  const inWork = lockedUntil === undefined ? zero : countWhere([...unfinished, ...live, sql`${lockedUntil} > ${param('now')}`]);
  selected.push(sql`${inWork} AS ${alias(COUNT_COLUMNS.inWork)}`);
  const processed = spec.processedAt === undefined ? zero : sql`COUNT(${identifier(spec.processedAt)})`;
  selected.push(sql`${processed} AS ${alias(COUNT_COLUMNS.processed)}`);
  const deadLettered = dead === undefined ? zero : countWhere([...unfinished, dead]);
  selected.push(sql`${deadLettered} AS ${alias(COUNT_COLUMNS.deadLettered)}`);
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
    spelling.style,
    'inspection.counts',
    sql`SELECT ${joinSql(selected, ', ')} FROM ${tableOf(spec)}${grouping}`,
  );
}

function renderPeek(
  spelling: InspectionSpelling,
  spec: TableSpec,
  columns: TableColumns,
  options: { byGroup: boolean; withoutDeadLetters?: DeadLetterGroupOption },
): Statement {
  const conditions: SqlText[] = [];
  if (options.byGroup) conditions.push(sql`${identifier(requireGroupColumn(spec, 'peek by group'))} = ${param('group')}`);
  if (spec.processedAt !== undefined) conditions.push(sql`${identifier(spec.processedAt)} IS NULL`);
  const dead = options.withoutDeadLetters === undefined ? undefined : deadLetterCondition(spelling, spec, options.withoutDeadLetters);
  if (dead !== undefined) conditions.push(sql`NOT ${dead}`);
  return renderStatement(
    spelling.style,
    'inspection.peek',
    sql`SELECT ${columnList(columns)} FROM ${tableOf(spec)}${whereAll(conditions)} ORDER BY ${claimOrder(spec)} LIMIT ${param('limit')}`,
  );
}

function renderRequeueFromGroup(spelling: InspectionSpelling, spec: TableSpec, options: { byId: boolean }): RequeueSteps {
  const group = identifier(requireGroupColumn(spec, 'dead letters in a group'));
  const assignments = [sql`${group} = ${param('destination')}`, ...resetAssignments(spec)];
  const conditions = [sql`${group} = ${param('group')}`];
  if (spec.processedAt !== undefined) conditions.push(sql`${identifier(spec.processedAt)} IS NULL`);
  if (options.byId) conditions.push(sql`${identifier(spec.id.column)} = ${param('id')}`);
  const move = renderStatement(
    spelling.style,
    'inspection.requeueFromGroup',
    sql`UPDATE ${tableOf(spec)} SET ${joinSql(assignments, ', ')}${whereAll(conditions)}`,
  );
  const unmark = renderUnmark(spelling, spec, tableOf(spec), conditions, 'inspection.requeueFromGroup.unmark');
  return unmark === undefined ? { statements: [move], countedIndex: 0 } : { statements: [unmark, move], countedIndex: 1 };
}

/**
 * Takes the last error off the dead letters about to move, before they move: a requeued row is
 * live again. Only rows with the header are written, so on Postgres only headers a dead-letter
 * move wrote as JSON are read as JSON. Undefined for a table without headers.
 */
function renderUnmark(
  spelling: InspectionSpelling,
  spec: TableSpec,
  table: SqlText,
  conditions: readonly SqlText[],
  name: string,
): Statement | undefined {
  if (spec.headers === undefined) return undefined;
  const headers = identifier(spec.headers);
  return renderStatement(
    spelling.style,
    name,
    sql`UPDATE ${table} SET ${headers} = ${spelling.withoutLastError(headers)}${whereAll([...conditions, spelling.hasLastError(headers)])}`,
  );
}

function renderRequeueFromTable(
  spelling: InspectionSpelling,
  spec: TableSpec,
  columns: TableColumns,
  source: Extract<DeadLetterTarget, { kind: 'table' }>,
  options: { byId: boolean; toGroup: boolean },
): RequeueSteps {
  const { style, move } = spelling;
  const from = deadLetterTableOf(source);
  const list = columnList(columns);
  const byId = options.byId ? [sql`${identifier(spec.id.column)} = ${param('id')}`] : [];
  const where = whereAll(byId);
  const values = joinSql(
    columns.map((column) => requeuedValue(spec, column, options.toGroup)),
    ', ',
  );
  const unmark = renderUnmark(spelling, spec, from, byId, 'inspection.requeueFromTable.unmark');
  const first = unmark === undefined ? [] : [unmark];
  if (move === 'writableCte') {
    const moved = sql`DELETE FROM ${from}${where} RETURNING ${list}`;
    const copy = sql`INSERT INTO ${tableOf(spec)} (${list}) SELECT ${values} FROM tablequeue_moved`;
    return {
      statements: [...first, renderStatement(style, 'inspection.requeueFromTable', sql`WITH tablequeue_moved AS (${moved}) ${copy}`)],
      countedIndex: first.length,
    };
  }
  const copy = renderStatement(
    style,
    'inspection.requeueFromTable.copy',
    sql`INSERT INTO ${tableOf(spec)} (${list}) SELECT ${values} FROM ${from}${where}`,
  );
  const remove = renderStatement(style, 'inspection.requeueFromTable.remove', sql`DELETE FROM ${from}${where}`);
  if (move === 'copyThenRemove') return { statements: [...first, copy, remove], countedIndex: first.length };
  // At MySQL's default repeatable read the locking read also locks the gaps it scans, so no dead
  // letter can arrive between the copy and the delete and be deleted without being copied.
  const lock = renderStatement(
    style,
    'inspection.requeueFromTable.lock',
    sql`SELECT ${identifier(spec.id.column)} FROM ${from}${where} FOR UPDATE`,
  );
  return { statements: [...first, lock, copy, remove], countedIndex: first.length + 1 };
}

/** A column's value in a requeued copy: as it was, except what a fresh row starts with. */
function requeuedValue(spec: TableSpec, column: string, toGroup: boolean): SqlText {
  if (toGroup && column === requireGroupColumn(spec, 'requeue into a group')) return param('destination');
  if (column === spec.attempt) return fixedSql(String(REQUEUED_ATTEMPT));
  if (column === spec.retryAfter) return param('now');
  if (column === spec.lockedUntil || column === spec.processedAt) return fixedSql('NULL');
  return identifier(column);
}

/**
 * Attempt back to its start, due now, lease cleared: the row is claimed like a new one, and
 * its oldest-ready age counts from the requeue, not from its last failed attempt.
 */
function resetAssignments(spec: TableSpec): SqlText[] {
  const assignments: SqlText[] = [];
  if (spec.attempt !== undefined) assignments.push(sql`${identifier(spec.attempt)} = ${fixedSql(String(REQUEUED_ATTEMPT))}`);
  if (spec.retryAfter !== undefined) assignments.push(sql`${identifier(spec.retryAfter)} = ${param('now')}`);
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
