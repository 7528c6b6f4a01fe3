/**
 * What tablequeue runs around a claim of the service's own (`statements.claim`), which returns
 * only ids: it takes each id under the same conditions its own claim would, so a claim that
 * returns a row another claimer holds, or one no longer claimable, never hands it out twice; and
 * it reads the taken rows where the service declares no fetch (PostgreSQL). Rendered in the
 * built-in spelling of the protocol, as the side tables' statements are.
 */
import type { Statement } from '../statement.js';
import type { TableSpec } from '../table/table-spec.js';
import { claimConditions, columnList, tableOf } from './claim-clauses.js';
import { MYSQL_CLOCK, POSTGRES_CLOCK, SQLITE_CLOCK } from './database-clock.js';
import type { DialectName, TableColumns } from './dialect.js';
import { leaseStampAssignments } from './portable-statements.js';
import { BACKTICK_STYLE, DOUBLE_QUOTE_STYLE, identifier, joinSql, param, renderStatement, sql, type SqlStyle } from './quoting.js';

const STYLES: Readonly<Record<DialectName, SqlStyle>> = {
  postgres: { ...DOUBLE_QUOTE_STYLE, clock: POSTGRES_CLOCK },
  mysql: { ...BACKTICK_STYLE, clock: MYSQL_CLOCK },
  sqlite: { ...BACKTICK_STYLE, clock: SQLITE_CLOCK },
};

export interface ServiceClaimStatements {
  /**
   * Lease form: leases the row `:id` and counts its attempt while it is still claimable (its
   * group, due, unfinished, no live lease), params `lockedUntil`, `id`, then among `group`, `now`,
   * `leaseNow`. No row changed: another claimer holds it, or it is no longer claimable.
   */
  stamp(spec: TableSpec): Statement;
  /**
   * Row lock form: the row `:id`'s id while it is still claimable, locked for the claim's
   * transaction, skipping a row another transaction locked (params `id`, then among `group`, `now`).
   */
  lock(spec: TableSpec): Statement;
  /** PostgreSQL: the taken rows, `columns`, by the array `:ids`; MySQL and SQLite bind no lists, so they have none. */
  fetch(spec: TableSpec, columns: TableColumns): Statement | undefined;
}

export function createServiceClaimStatements(protocol: DialectName): ServiceClaimStatements {
  const style = STYLES[protocol];
  const byId = (spec: TableSpec) => sql`${identifier(spec.id.column)} = ${param('id')}`;
  return {
    stamp: (spec) =>
      renderStatement(
        style,
        'serviceClaim.stamp',
        sql`UPDATE ${tableOf(spec)} SET ${leaseStampAssignments(spec)} WHERE ${joinSql([byId(spec), ...claimConditions(spec, 'lease')], ' AND ')}`,
      ),
    lock: (spec) =>
      renderStatement(
        style,
        'serviceClaim.lock',
        sql`SELECT ${identifier(spec.id.column)} FROM ${tableOf(spec)} WHERE ${joinSql([byId(spec), ...claimConditions(spec, 'rowLock')], ' AND ')} FOR UPDATE SKIP LOCKED`,
      ),
    fetch: (spec, columns) =>
      protocol === 'postgres'
        ? renderStatement(
            style,
            'serviceClaim.fetch',
            sql`SELECT ${columnList(columns)} FROM ${tableOf(spec)} WHERE ${identifier(spec.id.column)} = ANY(${param('ids')})`,
          )
        : undefined,
  };
}
