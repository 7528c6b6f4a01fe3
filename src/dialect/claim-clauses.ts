import { DeclarationError, UnsupportedError } from '../errors.js';
import type { ClaimFormName, TableSpec } from '../table/table-spec.js';
import type { TableColumns } from './dialect.js';
import { identifier, joinSql, param, qualifiedName, sql, type SqlText } from './quoting.js';

/** The queue table, schema-qualified when declared so. */
export function tableOf(spec: TableSpec): SqlText {
  return qualifiedName(spec.schema, spec.name);
}

/** The explicit column list of whole-row statements: never `*`, so a copy names what it moves. */
export function columnList(columns: TableColumns): SqlText {
  if (columns.length === 0) {
    throw new TypeError('a whole-row statement needs the table columns found when the subscription opened');
  }
  return joinSql(columns.map(identifier), ', ');
}

/**
 * What makes a row claimable, one condition per role the table has: its group, due
 * (`retry_after <= now`), unfinished, and in the lease form not leased by a live holder.
 */
export function claimConditions(spec: TableSpec, form: Exclude<ClaimFormName, 'advisory'>): SqlText[] {
  const conditions: SqlText[] = [];
  if (spec.group !== undefined) conditions.push(sql`${identifier(spec.group.column)} = ${param('group')}`);
  if (spec.retryAfter !== undefined) conditions.push(sql`${identifier(spec.retryAfter)} <= ${param('now')}`);
  if (spec.processedAt !== undefined) conditions.push(sql`${identifier(spec.processedAt)} IS NULL`);
  if (form === 'lease') conditions.push(leaseIsFree(spec));
  return conditions;
}

/** Never leased, or its lease expired by `leaseNow`. */
export function leaseIsFree(spec: TableSpec): SqlText {
  const lockedUntil = identifier(requireLeaseColumn(spec));
  return sql`(${lockedUntil} IS NULL OR ${lockedUntil} <= ${param('leaseNow')})`;
}

/** ` WHERE a AND b`, or nothing for a table with no claim condition. */
export function whereAll(conditions: readonly SqlText[]): SqlText {
  return conditions.length === 0 ? sql`` : sql` WHERE ${joinSql(conditions, ' AND ')}`;
}

/**
 * The rows a row lock or MySQL lease claim takes: claimable, in claim order, skipping rows another
 * claim holds. The lock lasts until the transaction ends.
 */
export function skipLockedSelect(
  spec: TableSpec,
  columns: TableColumns,
  form: Exclude<ClaimFormName, 'advisory'>,
): SqlText {
  const where = whereAll(claimConditions(spec, form));
  return sql`SELECT ${columnList(columns)} FROM ${tableOf(spec)}${where} ORDER BY ${claimOrder(spec)} LIMIT ${param('limit')} FOR UPDATE SKIP LOCKED`;
}

/** Smaller priority first, then the earliest due, then insertion order; id always last. */
export function claimOrder(spec: TableSpec): SqlText {
  const columns = [spec.priority, spec.retryAfter, spec.id.column].filter((column) => column !== undefined);
  return joinSql(columns.map(identifier), ', ');
}

/**
 * Claims these dialects do not render yet. FIFO groups need a group guard and the database clock
 * replaces the `now` parameter; rendering the plain claim for such a table would silently break
 * the ordering or timing the table declared, so it is refused instead.
 */
export function refuseUnbuiltClaims(spec: TableSpec, database: string): void {
  if (spec.group?.fifo === true) {
    throw new UnsupportedError({
      database,
      feature: 'fifo groups',
      message: `table "${spec.qualifiedName}" declares a FIFO group; FIFO claims are not available on ${database} yet, declare the group without fifo`,
    });
  }
  if (spec.clock === 'database') {
    throw new UnsupportedError({
      database,
      feature: 'database clock',
      message: `table "${spec.qualifiedName}" declares clock: "database"; it is not available on ${database} yet, use clock: "host"`,
    });
  }
}

/** The lease column, which every lease statement and fenced settlement names. */
export function requireLeaseColumn(spec: TableSpec): string {
  if (spec.lockedUntil === undefined) {
    throw new DeclarationError(
      `table "${spec.qualifiedName}" has no lockedUntil column; lease statements and fenced settlements need one`,
    );
  }
  return spec.lockedUntil;
}

/** `id = :id`, and with a fence `AND locked_until = :held`: the row, only while we hold it. */
export function rowFilter(spec: TableSpec, options: { fenced: boolean }): SqlText {
  const byId = sql`${identifier(spec.id.column)} = ${param('id')}`;
  if (!options.fenced) return byId;
  return sql`${byId} AND ${identifier(requireLeaseColumn(spec))} = ${param('held')}`;
}
