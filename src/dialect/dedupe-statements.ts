/**
 * Unique messages: the statements a keyed publish runs besides its insert, on every database.
 * The unique index over (group, dedupe key) decides which of two publishes of one key wins; these
 * statements only read who holds a key and, on a lease table, free it from a row in work or
 * replace a waiting row's values.
 */
import { DeclarationError } from '../errors.js';
import { COLUMN_COLUMN, INDEX_COLUMN } from './index-read.js';
import type { Statement } from '../statement.js';
import type { TableSpec } from '../table/table-spec.js';
import { requireLeaseColumn, tableOf } from './claim-clauses.js';
import { identifier, joinSql, param, renderStatement, sql, textLiteral, type SqlStyle, type SqlText } from './quoting.js';

/** The holder statement's second column on a lease table: 1 while a live lease holds the row. */
export const IN_WORK_COLUMN = 'tablequeue_in_work';

/** The held-keys statement's one column. */
export const HELD_KEY_COLUMN = 'tablequeue_key';

export interface DedupeStatements {
  /**
   * How an insert meets a key another row holds: `skipped` (Postgres, SQLite: the insert's
   * `ON CONFLICT … DO NOTHING` writes the other rows and returns only their ids) or `error`
   * (MySQL, MariaDB: the statement fails with the duplicate-key error, errno 1062, and writes
   * nothing; inside a transaction only that statement is undone).
   */
  readonly heldKeyOnInsert: 'skipped' | 'error';
  /**
   * The row that holds `:dedupeKey` in `:group` (a table with groups): its id and, on a lease
   * table, `IN_WORK_COLUMN`, 1 while its lease is live at `:now`. No row once the key is free.
   */
  holder(spec: TableSpec): Statement;
  /**
   * Which of `keyCount` keys (`:dedupeKey` repeated) rows of `:group` hold: `HELD_KEY_COLUMN`.
   * MySQL's `publishMany` leaves those out of its insert, since one held key fails the statement.
   */
  heldKeys(spec: TableSpec, keyCount: number): Statement;
  /**
   * Lease tables: takes the key off the row `:id` while a live lease at `:now` holds it, so a
   * publish that asked for `dedupe: 'queued'` or `'replace'` can insert a new waiting row.
   */
  releaseFromWork(spec: TableSpec): Statement;
  /**
   * Lease tables: writes `columns` (`:column:<name>`) into the row `:id` that holds
   * `:dedupeKey`, only while no live lease at `:now` holds it: `dedupe: 'replace'`.
   */
  replaceWaiting(spec: TableSpec, columns: readonly string[]): Statement;
  /**
   * MySQL, MariaDB: the table's unique indexes, `INDEX_COLUMN` and `COLUMN_COLUMN` per indexed
   * column, read before the first keyed publish: without one over (group, key) a held key would
   * not fail the insert, and duplicates would go in unseen. Postgres and SQLite refuse such an
   * insert themselves (its `ON CONFLICT` names the index), so they have none.
   */
  uniqueIndexes?(spec: TableSpec): Statement;
}

export function requireDedupeKeyColumn(spec: TableSpec): string {
  if (spec.dedupeKey === undefined) {
    throw new DeclarationError(
      `table "${spec.qualifiedName}" has no dedupeKey column; declare one in defineTable ({ dedupeKey: "dedupe_key" }) to publish with dedupeKey`,
    );
  }
  return spec.dedupeKey;
}

/** `group = :group AND dedupe_key = :dedupeKey`, the unique index's columns. */
function keyConditions(spec: TableSpec): SqlText[] {
  const conditions: SqlText[] = [];
  if (spec.group !== undefined) conditions.push(sql`${identifier(spec.group.column)} = ${param('group')}`);
  conditions.push(sql`${identifier(requireDedupeKeyColumn(spec))} = ${param('dedupeKey')}`);
  return conditions;
}

function leaseIsLive(spec: TableSpec): SqlText {
  return sql`${identifier(requireLeaseColumn(spec))} > ${param('now')}`;
}

export function createDedupeStatements(style: SqlStyle, heldKeyOnInsert: 'skipped' | 'error'): DedupeStatements {
  const uniqueIndexes = (spec: TableSpec): Statement => {
    const schema = spec.schema === undefined ? sql`DATABASE()` : textLiteral(spec.schema);
    return renderStatement(
      style,
      'dedupe.uniqueIndexes',
      sql`SELECT INDEX_NAME AS ${identifier(INDEX_COLUMN)}, COLUMN_NAME AS ${identifier(COLUMN_COLUMN)} FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = ${schema} AND TABLE_NAME = ${textLiteral(spec.name)} AND NON_UNIQUE = 0 ORDER BY INDEX_NAME, SEQ_IN_INDEX`,
    );
  };
  return Object.freeze({
    heldKeyOnInsert,
    ...(heldKeyOnInsert === 'error' ? { uniqueIndexes } : {}),
    holder(spec: TableSpec): Statement {
      const inWork =
        spec.lockedUntil === undefined
          ? sql``
          : sql`, CASE WHEN ${leaseIsLive(spec)} THEN 1 ELSE 0 END AS ${identifier(IN_WORK_COLUMN)}`;
      return renderStatement(
        style,
        'dedupe.holder',
        sql`SELECT ${identifier(spec.id.column)}${inWork} FROM ${tableOf(spec)} WHERE ${joinSql(keyConditions(spec), ' AND ')}`,
      );
    },
    heldKeys(spec: TableSpec, keyCount: number): Statement {
      if (!Number.isInteger(keyCount) || keyCount < 1) {
        throw new TypeError(`dedupe.heldKeys needs a whole number of keys of at least 1, got ${keyCount}`);
      }
      const key = identifier(requireDedupeKeyColumn(spec));
      const keys = joinSql(Array.from({ length: keyCount }, () => param('dedupeKey')), ', ');
      const conditions = spec.group === undefined ? [] : [sql`${identifier(spec.group.column)} = ${param('group')}`];
      conditions.push(sql`${key} IN (${keys})`);
      return renderStatement(
        style,
        'dedupe.heldKeys',
        sql`SELECT ${key} AS ${identifier(HELD_KEY_COLUMN)} FROM ${tableOf(spec)} WHERE ${joinSql(conditions, ' AND ')}`,
      );
    },
    releaseFromWork(spec: TableSpec): Statement {
      const key = identifier(requireDedupeKeyColumn(spec));
      const where = [sql`${identifier(spec.id.column)} = ${param('id')}`, ...keyConditions(spec), leaseIsLive(spec)];
      return renderStatement(
        style,
        'dedupe.releaseFromWork',
        sql`UPDATE ${tableOf(spec)} SET ${key} = NULL WHERE ${joinSql(where, ' AND ')}`,
      );
    },
    replaceWaiting(spec: TableSpec, columns: readonly string[]): Statement {
      const fixed = new Set([spec.id.column, spec.group?.column, requireDedupeKeyColumn(spec)]);
      const replaced = columns.filter((column) => !fixed.has(column));
      if (replaced.length === 0) {
        throw new TypeError('dedupe.replaceWaiting needs at least one column besides the id, group and key');
      }
      const lease = identifier(requireLeaseColumn(spec));
      const assignments = replaced.map((column) => sql`${identifier(column)} = ${param(`column:${column}`)}`);
      const where = [
        sql`${identifier(spec.id.column)} = ${param('id')}`,
        ...keyConditions(spec),
        sql`(${lease} IS NULL OR ${lease} <= ${param('now')})`,
      ];
      return renderStatement(
        style,
        'dedupe.replaceWaiting',
        sql`UPDATE ${tableOf(spec)} SET ${joinSql(assignments, ', ')} WHERE ${joinSql(where, ' AND ')}`,
      );
    },
  });
}

/**
 * `ON CONFLICT (group, dedupe_key) WHERE dedupe_key IS NOT NULL DO NOTHING`: the predicate lets
 * Postgres and SQLite infer the partial unique index `createTableSql` renders (and Postgres a
 * plain one too).
 */
export function skipHeldKeys(spec: TableSpec): SqlText {
  const key = requireDedupeKeyColumn(spec);
  const columns = [spec.group?.column, key].filter((column) => column !== undefined);
  return sql` ON CONFLICT (${joinSql(columns.map(identifier), ', ')}) WHERE ${identifier(key)} IS NOT NULL DO NOTHING`;
}
