/**
 * The advisory lock form's statements: what each dialect renders, and the parts whose text is the
 * same on every database but for quoting and placeholders.
 */
import { DeclarationError } from '../errors.js';
import type { Statement } from '../statement.js';
import type { KeyPart, TableSpec } from '../table/table-spec.js';
import { claimConditions, claimOrder, columnList, countAttempt, refuseUnbuiltClaims, tableOf, whereAll } from './claim-clauses.js';
import { dueAtOf } from './database-clock.js';
import type { TableColumns } from './dialect.js';
import { identifier, joinSql, param, renderStatement, sql, textLiteral, type SqlStyle, type SqlText } from './quoting.js';

/** The candidate select's second column: the row's lock key as the database rendered it. */
export const ADVISORY_KEY_COLUMN = 'tablequeue_key';

/** The one column of the lock and unlock statements' one row: 1 when confirmed, 0 otherwise. */
export const ADVISORY_CONFIRMED_COLUMN = 'confirmed';

/**
 * How the take runs.
 * - `single`: one statement returning the row (none when the row is no longer claimable).
 * - `countThenRead` (MySQL/MariaDB, no `UPDATE … RETURNING`): `count` changes no row when the
 *   row is no longer claimable; otherwise `read` returns it.
 */
export type AdvisoryTake =
  | { readonly kind: 'single'; readonly statement: Statement }
  | { readonly kind: 'countThenRead'; readonly count: Statement; readonly read: Statement };

/**
 * Advisory lock form: each row has a key rendered by the database from the table's key template.
 * A claim selects candidates, locks each key without waiting on a connection of its own, then
 * takes the row. Settlements name the row only: the key lock keeps every other claimer away.
 */
export interface AdvisoryStatements {
  /**
   * Claimable rows in claim order: the id column and `ADVISORY_KEY_COLUMN`. Params among `group`,
   * `now`, `limit`. Where the database has session locks, rows whose key a delivery holds are
   * left out, and concurrent claims do not exclude each other.
   */
  candidates(spec: TableSpec): Statement;
  /**
   * Locks `key` for the session without waiting: one row, `ADVISORY_CONFIRMED_COLUMN` 1 or 0.
   * Refused with `UnsupportedError` on a database without session locks.
   */
  lock(): Statement;
  /** Unlocks `key`: 1 only when this session held it. Refused like `lock`. */
  unlock(): Statement;
  /**
   * Counts the attempt only while the row is still claimable (params `id`, then among `group`,
   * `now`) and returns it with the attempt as it stood before; without an attempt column it only
   * reads the row under the same conditions.
   */
  take(spec: TableSpec, columns: TableColumns): AdvisoryTake;
  /**
   * `retry_after = :retryAfterAt` (database clock: its now plus `:delayMicroseconds`) only, since
   * the take counted the attempt; `undefined` without the column.
   */
  retryAfter(spec: TableSpec): Statement | undefined;
  /**
   * `ADVISORY_KEY_COLUMN` of the unfinished row `:id` of the queue (params `id`, and `group` on a
   * grouped table), due or not: what `broker.cancel` locks to tell a waiting row from one in work.
   */
  keyOf(spec: TableSpec): Statement;
  /**
   * `concurrency.global`: the lock keys of the queue's slots 1 to `:slots`, one row each in slot
   * order (`ADVISORY_KEY_COLUMN`), spelled as the row keys are (on MySQL and MariaDB within the
   * database, and hashed past 64 characters). `:group` is the queue's group, or empty text on a
   * table without groups. A delivery holds one slot's key beside its row's key.
   */
  slotKeys(spec: TableSpec): Statement;
}

/** What starts every slot key, before the table, the group and the slot number, each after a `/`. */
export const SLOT_KEY_PREFIX = 'tablequeue-slot';

/** The key template's parts; advisory statements are rendered for advisory tables only. */
export function keyTemplateOf(spec: TableSpec): readonly KeyPart[] {
  if (spec.advisoryLock === undefined) {
    throw new DeclarationError(
      `table "${spec.qualifiedName}" has no advisoryLock key template; advisory statements need one, such as advisoryLock: "jobs-{id}"`,
    );
  }
  return spec.advisoryLock;
}

/** Each part of the template as SQL: a literal as a text literal, a column by its quoted name. */
export function keyPartsSql(spec: TableSpec): SqlText[] {
  return keyTemplateOf(spec).map((part) => ('literal' in part ? textLiteral(part.literal) : identifier(part.column)));
}

/**
 * `SELECT id, <key> AS tablequeue_key FROM t WHERE <claimable> [AND <extra>] ORDER BY <order>`,
 * with `LIMIT :limit` unless the caller fences it first (Postgres).
 */
export function candidateSelect(
  spec: TableSpec,
  database: string,
  key: SqlText,
  options: { extraCondition?: SqlText; limit: boolean },
): SqlText {
  refuseUnbuiltClaims(spec, database);
  keyTemplateOf(spec);
  const conditions = claimConditions(spec, 'advisory');
  if (options.extraCondition !== undefined) conditions.push(options.extraCondition);
  const limit = options.limit ? sql` LIMIT ${param('limit')}` : sql``;
  return sql`SELECT ${identifier(spec.id.column)}, ${key} AS ${identifier(ADVISORY_KEY_COLUMN)} FROM ${tableOf(spec)}${whereAll(conditions)} ORDER BY ${claimOrder(spec)}${limit}`;
}

/** The row's key by id, while unfinished: `AdvisoryStatements.keyOf`. */
export function renderKeyOf(style: SqlStyle, spec: TableSpec, key: SqlText): Statement {
  keyTemplateOf(spec);
  const conditions = [sql`${identifier(spec.id.column)} = ${param('id')}`];
  if (spec.group !== undefined) conditions.push(sql`${identifier(spec.group.column)} = ${param('group')}`);
  if (spec.processedAt !== undefined) conditions.push(sql`${identifier(spec.processedAt)} IS NULL`);
  return renderStatement(style, 'advisory.keyOf', sql`SELECT ${key} AS ${identifier(ADVISORY_KEY_COLUMN)} FROM ${tableOf(spec)}${whereAll(conditions)}`);
}

/** The take as one statement: `UPDATE … RETURNING` (Postgres, SQLite). */
export function renderTakeReturning(style: SqlStyle, spec: TableSpec, columns: TableColumns, database: string): AdvisoryTake {
  const where = takeConditions(spec, database);
  if (spec.attempt === undefined) return { kind: 'single', statement: renderTakeRead(style, spec, columns, where) };
  const statement = sql`UPDATE ${tableOf(spec)} SET ${countAttempt(spec.attempt)}${where} RETURNING ${columnsBeforeTake(spec, columns)}`;
  return { kind: 'single', statement: renderStatement(style, 'advisory.take', statement) };
}

/**
 * The take without `UPDATE … RETURNING` (MySQL, MariaDB): count, then read by id. The key lock
 * the caller holds keeps the row from changing between the two.
 */
export function renderTakeCountThenRead(style: SqlStyle, spec: TableSpec, columns: TableColumns, database: string): AdvisoryTake {
  const where = takeConditions(spec, database);
  if (spec.attempt === undefined) return { kind: 'single', statement: renderTakeRead(style, spec, columns, where) };
  const count = renderStatement(style, 'advisory.take', sql`UPDATE ${tableOf(spec)} SET ${countAttempt(spec.attempt)}${where}`);
  const byId = sql` WHERE ${identifier(spec.id.column)} = ${param('id')}`;
  const read = renderStatement(
    style,
    'advisory.read',
    sql`SELECT ${columnsBeforeTake(spec, columns)} FROM ${tableOf(spec)}${byId}`,
  );
  return { kind: 'countThenRead', count, read };
}

export function renderAdvisoryRetryAfter(style: SqlStyle, spec: TableSpec): Statement | undefined {
  keyTemplateOf(spec);
  if (spec.retryAfter === undefined) return undefined;
  return renderStatement(
    style,
    'advisory.retryAfter',
    sql`UPDATE ${tableOf(spec)} SET ${identifier(spec.retryAfter)} = ${dueAtOf(spec)} WHERE ${identifier(spec.id.column)} = ${param('id')}`,
  );
}

/** The row by id, only while it is still claimable: a settlement between select and lock finished it. */
function takeConditions(spec: TableSpec, database: string): SqlText {
  refuseUnbuiltClaims(spec, database);
  keyTemplateOf(spec);
  return whereAll([sql`${identifier(spec.id.column)} = ${param('id')}`, ...claimConditions(spec, 'advisory')]);
}

function renderTakeRead(style: SqlStyle, spec: TableSpec, columns: TableColumns, where: SqlText): Statement {
  return renderStatement(style, 'advisory.take', sql`SELECT ${columnList(columns)} FROM ${tableOf(spec)}${where}`);
}

/** Every column, the attempt as it stood before the take counted it. */
function columnsBeforeTake(spec: TableSpec, columns: TableColumns): SqlText {
  if (columns.length === 0) {
    throw new TypeError('the take returns whole rows and needs the table columns found when the subscription opened');
  }
  return joinSql(
    columns.map((column) =>
      column === spec.attempt ? sql`${identifier(column)} - 1 AS ${identifier(column)}` : identifier(column),
    ),
    ', ',
  );
}

