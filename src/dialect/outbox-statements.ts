/**
 * The outbox relay's statements. An outbox table is a lease table whose FIFO group is the record
 * name, so the relay keeps the FIFO rules across replicas: a name's records go out in id order,
 * and while any record of a name holds a live lease no other claim takes a record of it. The
 * dialect's own FIFO group guard and begin run around the claim; what differs from a queue's
 * FIFO claim is written here: the claim takes a name's first `limit` records instead of its head
 * alone, the names query finds the names to claim, and the settlements name a whole batch by its
 * name and token (every record of one claim carries the same expiry).
 */
import type { Statement } from '../statement.js';
import type { TableSpec } from '../table/table-spec.js';
import {
  claimConditions,
  claimOrder,
  columnList,
  leaseIsFree,
  noRowOfGroupInWork,
  requireLeaseColumn,
  tableOf,
  unfinishedRowsOfGroup,
  whereAll,
} from './claim-clauses.js';
import type { Dialect, LeaseClaim, TableColumns } from './dialect.js';
import { leaseStampAssignments, leaseStampOfIds } from './portable-statements.js';
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

export interface OutboxStatements {
  /**
   * Opens the relay's transactions (a claim, a send into the same database): READ COMMITTED on
   * Postgres and MySQL whatever the server's default, so a claim sees what committed before its
   * guard; SQLite's default begin mode.
   */
  readonly begin: Statement[];
  /**
   * Names with unprocessed records and no record in work, the longest waiting first (params
   * `leaseNow`, `limit`); one column, the name column.
   */
  readonly names: Statement;
  /**
   * A name's first records in id order, leased with one expiry (params `group` for the name,
   * `leaseNow`, `limit`, `lockedUntil`; MySQL's stamp `id` per row). Run like a FIFO lease claim:
   * begin, the dialect's group guard (none on SQLite), the claim, commit.
   */
  readonly claim: LeaseClaim;
  /** Marks processed (`now`) or deletes every record of the name that carries the token (`group`, `held`). */
  readonly finish: Statement;
  /**
   * Moves the lease of every record of the name that carries the token (`group`, `held`) to
   * `lockedUntil`: a renewal while a send runs, or the wait after a failed send.
   */
  readonly extend: Statement;
}

/**
 * The statements for one outbox table, whose spec declares the name as a FIFO group, a lease
 * column and generated ids. `columns` are the ones the claim returns.
 */
export function createOutboxStatements(dialect: Dialect, spec: TableSpec, columns: TableColumns): OutboxStatements {
  requireOutboxSpec(spec);
  const style = dialect.name === 'postgres' ? DOUBLE_QUOTE_STYLE : BACKTICK_STYLE;
  const begin = dialect.session.begin({ isolation: dialect.name === 'sqlite' ? undefined : 'read committed' });
  return Object.freeze({
    begin,
    names: renderNames(style, spec),
    claim: renderClaim(dialect, begin, style, spec, columns),
    finish: renderFinish(style, spec),
    extend: renderExtend(style, spec),
  });
}

function requireOutboxSpec(spec: TableSpec): void {
  if (spec.group?.fifo !== true || spec.lockedUntil === undefined || !spec.id.generated) {
    throw new TypeError(`table "${spec.qualifiedName}" is not an outbox table: it needs a FIFO name, a lease column and generated ids`);
  }
}

function renderNames(style: SqlStyle, spec: TableSpec): Statement {
  const name = identifier(spec.group!.column);
  const lockedUntil = identifier(requireLeaseColumn(spec));
  const where = spec.processedAt === undefined ? sql`` : sql` WHERE ${identifier(spec.processedAt)} IS NULL`;
  return renderStatement(
    style,
    'outbox.names',
    sql`SELECT ${name} FROM ${tableOf(spec)}${where} GROUP BY ${name} HAVING COUNT(CASE WHEN ${lockedUntil} > ${param('leaseNow')} THEN 1 END) = 0 ORDER BY MIN(${identifier(spec.id.column)}) LIMIT ${param('limit')}`,
  );
}

/**
 * Unprocessed, lease free, of the name, and no record of the name in work. Once the group guard
 * is held no other claim runs on the name, so these are the name's first records, in id order.
 */
function batchConditions(spec: TableSpec): SqlText {
  return whereAll([...claimConditions(spec, 'lease'), noRowOfGroupInWork(spec)]);
}

/**
 * The first records of the name, to be locked. The guard holds the name, so the only records a
 * locking read skips are ones another statement holds: a service's insert not yet committed, or
 * a committed record that something else locked (see `firstRecords`).
 */
function batchSelect(spec: TableSpec, selected: SqlText): SqlText {
  return sql`SELECT ${selected} FROM ${tableOf(spec)}${batchConditions(spec)} ORDER BY ${claimOrder(spec)} LIMIT ${param('limit')}`;
}

/**
 * The name's first unprocessed records, read without locks: committed records only, so a service's
 * insert still in its transaction is not among them. A batch is the locked records up to the first
 * of these that the locking read skipped. On MariaDB a claim skipped committed records that no
 * claim held and none had in work, and took the records behind them: CI saw records 48, 51 and 54
 * of a name sent before 39, 42 and 45, and a trace of the claims showed the skip. InnoDB's locking
 * reads and updates lock each row they scan and let go of the ones that do not match, so another
 * statement of the relay on the same table can hold a record for an instant. On PostgreSQL only a
 * lock from outside the relay does that (a service's `SELECT ... FOR UPDATE`, or a foreign key
 * check from a row that references the record).
 */
function firstRecords(spec: TableSpec, selected: SqlText): SqlText {
  return sql`SELECT ${selected} FROM ${tableOf(spec)}${whereAll(unfinishedRowsOfGroup(spec))} ORDER BY ${claimOrder(spec)} LIMIT ${param('limit')}`;
}

function renderClaim(dialect: Dialect, begin: Statement[], style: SqlStyle, spec: TableSpec, columns: TableColumns): LeaseClaim {
  const guard = dialect.fifo.guard(spec);
  switch (dialect.name) {
    case 'postgres': {
      const statement = renderPostgresClaim(style, spec, columns);
      return guard === undefined ? { kind: 'single', statement } : { kind: 'single', statement, guarded: { begin, guard } };
    }
    case 'mysql': {
      const select = renderStatement(style, 'outbox.claim', sql`${batchSelect(spec, columnList(columns))} FOR UPDATE SKIP LOCKED`);
      const stamp = renderStatement(
        style,
        'outbox.stamp',
        sql`UPDATE ${tableOf(spec)} SET ${leaseStampAssignments(spec)} WHERE ${identifier(spec.id.column)} = ${param('id')} AND ${leaseIsFree(spec)}`,
      );
      const firstRows = renderStatement(style, 'outbox.first', firstRecords(spec, identifier(spec.id.column)));
      // One statement for the batch: a stamp per record spent a round trip each while the claim held the name.
      const stampAll = (rowCount: number) => renderStatement(style, 'outbox.stampAll', leaseStampOfIds(spec, rowCount, 'outbox.stampAll'));
      const claim = { kind: 'selectThenStamp', begin, select, stamp, stampAll, firstRows } as const;
      return guard === undefined ? claim : { ...claim, guard };
    }
    case 'sqlite':
      // One statement under the single writer: no other claim can run between its read and write.
      return { kind: 'single', statement: renderSqliteClaim(style, spec, columns) };
  }
}

/**
 * As the lease claim, with the gap check of `firstRecords`: `tablequeue_locked` locks the records,
 * `tablequeue_claimed` keeps those before the first record of `tablequeue_first` that was not
 * locked, the stamp leases them, the SELECT returns them in order. Every part reads one snapshot,
 * so a locked record is always among the first ones. Outbox records go in id order.
 */
function renderPostgresClaim(style: SqlStyle, spec: TableSpec, columns: TableColumns): Statement {
  const id = identifier(spec.id.column);
  const first = firstRecords(spec, id);
  const locked = sql`${batchSelect(spec, columnList(columns))} FOR UPDATE SKIP LOCKED`;
  const skipped = sql`SELECT 1 FROM tablequeue_first WHERE tablequeue_first.${id} < tablequeue_locked.${id} AND NOT EXISTS (SELECT 1 FROM tablequeue_locked AS tablequeue_taken WHERE tablequeue_taken.${id} = tablequeue_first.${id})`;
  const claimed = sql`SELECT ${columnList(columns)} FROM tablequeue_locked WHERE NOT EXISTS (${skipped})`;
  const stamp = sql`UPDATE ${tableOf(spec)} SET ${leaseStampAssignments(spec)} WHERE ${id} = ANY(ARRAY(SELECT tablequeue_claimed.${id} FROM tablequeue_claimed))`;
  return renderStatement(
    style,
    'outbox.claim',
    sql`WITH tablequeue_first AS (${first}), tablequeue_locked AS (${locked}), tablequeue_claimed AS (${claimed}), tablequeue_stamp AS (${stamp}) SELECT ${columnList(columns)} FROM tablequeue_claimed ORDER BY ${claimOrder(spec)}`,
  );
}

/** RETURNING reports the rows in no particular order; the relay sorts them by id. */
function renderSqliteClaim(style: SqlStyle, spec: TableSpec, columns: TableColumns): Statement {
  const id = identifier(spec.id.column);
  return renderStatement(
    style,
    'outbox.claim',
    sql`UPDATE ${tableOf(spec)} SET ${leaseStampAssignments(spec)} WHERE ${id} IN (${batchSelect(spec, id)}) RETURNING ${columnList(columns)}`,
  );
}

/** The records of the name under the token: exactly the ones one claim took and still holds. */
function heldBatch(spec: TableSpec): SqlText {
  return sql`${identifier(spec.group!.column)} = ${param('group')} AND ${identifier(requireLeaseColumn(spec))} = ${param('held')}`;
}

function renderFinish(style: SqlStyle, spec: TableSpec): Statement {
  if (spec.processedAt === undefined) {
    return renderStatement(style, 'outbox.finish', sql`DELETE FROM ${tableOf(spec)} WHERE ${heldBatch(spec)}`);
  }
  const assignments = joinSql(
    [sql`${identifier(spec.processedAt)} = ${param('now')}`, sql`${identifier(requireLeaseColumn(spec))} = NULL`],
    ', ',
  );
  return renderStatement(style, 'outbox.finish', sql`UPDATE ${tableOf(spec)} SET ${assignments} WHERE ${heldBatch(spec)}`);
}

function renderExtend(style: SqlStyle, spec: TableSpec): Statement {
  return renderStatement(
    style,
    'outbox.extend',
    sql`UPDATE ${tableOf(spec)} SET ${identifier(requireLeaseColumn(spec))} = ${param('lockedUntil')} WHERE ${heldBatch(spec)}`,
  );
}
