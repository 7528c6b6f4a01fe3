/**
 * Many lease settlements in one go on MySQL, MariaDB and SQLite: one placeholder pair per row,
 * `(id = ? AND locked_until = ?) OR …`, so every row is still fenced by its own token. Where the
 * statement can return the rows it changed (SQLite always, MariaDB for DELETE) it is one
 * statement; otherwise a locking select of the same rows runs first in one transaction, and its
 * answer says which rows the write settles. Postgres binds arrays instead
 * (postgres/postgres-lease-settle-many.ts).
 */
import type { Statement } from '../statement.js';
import type { TableSpec } from '../table/table-spec.js';
import { keyFreed, requireLeaseColumn, tableOf } from './claim-clauses.js';
import { nowOf } from './database-clock.js';
import type { LeaseSettleMany, LeaseSettleManyRequest } from './dialect.js';
import { identifier, joinSql, param, renderStatement, sql, type SqlStyle, type SqlText } from './quoting.js';

export interface PairedSettleManyOptions {
  readonly style: SqlStyle;
  /** `UPDATE … RETURNING` exists (SQLite). */
  readonly updateReturns: boolean;
  /** `DELETE … RETURNING` exists (SQLite, MariaDB). */
  readonly deleteReturns: boolean;
  /** Opens the transaction of a locking select and its write (READ COMMITTED on MySQL). */
  readonly begin: () => Statement[];
}

/** The statements of `request`; `undefined` for a dead letter into a table (a copy then a delete per row). */
export function renderPairedSettleMany(
  options: PairedSettleManyOptions,
  spec: TableSpec,
  request: LeaseSettleManyRequest,
): LeaseSettleMany | undefined {
  const { rowCount } = request;
  if (!Number.isInteger(rowCount) || rowCount < 1) {
    throw new TypeError(`lease.settleMany needs a whole number of rows of at least 1, got ${rowCount}`);
  }
  const write = writeOf(spec, request);
  if (write === undefined) return undefined;
  const where = pairedRows(spec, rowCount);
  const name = `lease.settleMany.${request.kind}`;
  const returns = write.isDelete ? options.deleteReturns : options.updateReturns;
  const statement = sql`${write.text} WHERE ${where}`;
  if (returns) {
    return {
      kind: 'returning',
      rowParams: 'repeated',
      statement: renderStatement(options.style, name, sql`${statement} RETURNING ${identifier(spec.id.column)}`),
    };
  }
  return {
    kind: 'lockThenWrite',
    rowParams: 'repeated',
    begin: options.begin(),
    lock: renderStatement(
      options.style,
      `${name}.lock`,
      sql`SELECT ${identifier(spec.id.column)} FROM ${tableOf(spec)} WHERE ${where} FOR UPDATE`,
    ),
    write: renderStatement(options.style, name, statement),
  };
}

/** The write without its WHERE clause. */
function writeOf(spec: TableSpec, request: LeaseSettleManyRequest): { text: SqlText; isDelete: boolean } | undefined {
  const table = tableOf(spec);
  const clearLease = sql`${identifier(requireLeaseColumn(spec))} = NULL`;
  const update = (assignment: SqlText | undefined) => ({
    text: sql`UPDATE ${table} SET ${assignment === undefined ? clearLease : sql`${assignment}, ${clearLease}`}`,
    isDelete: false,
  });
  switch (request.kind) {
    case 'finish':
      if (spec.processedAt === undefined) return { text: sql`DELETE FROM ${table}`, isDelete: true };
      return update(joinSql([sql`${identifier(spec.processedAt)} = ${nowOf(spec)}`, ...keyFreed(spec)], ', '));
    case 'release':
      return update(undefined);
    case 'retryAfter':
      if (spec.retryAfter === undefined) return undefined;
      return update(sql`${identifier(spec.retryAfter)} = ${dueAtPerRow(spec, request.rowCount)}`);
    case 'deadLetter':
      if (request.target?.kind !== 'group' || spec.group === undefined) return undefined;
      return update(joinSql([sql`${identifier(spec.group.column)} = ${param('destination')}`, ...keyFreed(spec)], ', '));
  }
}

/** Each row's own due time, picked by its id. */
function dueAtPerRow(spec: TableSpec, rowCount: number): SqlText {
  const id = identifier(spec.id.column);
  const cases = Array.from({ length: rowCount }, () => sql`WHEN ${param('id')} THEN ${param('retryAfterAt')}`);
  return sql`CASE ${id} ${joinSql(cases, ' ')} END`;
}

/** `(id = ? AND locked_until = ?) OR …`, one pair per row, in parentheses. */
function pairedRows(spec: TableSpec, rowCount: number): SqlText {
  const id = identifier(spec.id.column);
  const lockedUntil = identifier(requireLeaseColumn(spec));
  const pair = sql`(${id} = ${param('id')} AND ${lockedUntil} = ${param('held')})`;
  return sql`(${joinSql(Array.from({ length: rowCount }, () => pair), ' OR ')})`;
}
