import { POSTGRES_CLOCK } from '../database-clock.js';
import type { TableSpec } from '../../table/table-spec.js';
import {
  ADVISORY_CONFIRMED_COLUMN,
  ADVISORY_KEY_COLUMN,
  candidateSelect,
  keyPartsSql,
  renderKeyOf,
  SLOT_KEY_PREFIX,
  renderAdvisoryRetryAfter,
  renderTakeReturning,
  type AdvisoryStatements,
} from '../advisory-statements.js';
import type { TableColumns } from '../dialect.js';
import { DOUBLE_QUOTE_STYLE, identifier, joinSql, param, renderStatement, sql, textLiteral, type SqlStyle, type SqlText } from '../quoting.js';

const DATABASE = 'postgres';
const style: SqlStyle = { ...DOUBLE_QUOTE_STYLE, clock: POSTGRES_CLOCK };

/**
 * Session-level advisory locks on a 64-bit hash of the key (`hashtextextended`, PostgreSQL 11).
 * Two keys whose hashes collide only take turns; no row is handed out twice.
 */
export function createPostgresAdvisoryStatements(): AdvisoryStatements {
  const hashedKey = sql`hashtextextended(${param('key')}, 0)`;
  const confirmed = identifier(ADVISORY_CONFIRMED_COLUMN);
  const lock = renderStatement(style, 'advisory.lock', sql`SELECT pg_try_advisory_lock(${hashedKey})::int AS ${confirmed}`);
  const unlock = renderStatement(style, 'advisory.unlock', sql`SELECT pg_advisory_unlock(${hashedKey})::int AS ${confirmed}`);
  return Object.freeze({
    candidates: (spec: TableSpec) => renderCandidates(spec),
    lock: () => lock,
    unlock: () => unlock,
    take: (spec: TableSpec, columns: TableColumns) => renderTakeReturning(style, spec, columns, DATABASE),
    retryAfter: (spec: TableSpec) => renderAdvisoryRetryAfter(style, spec),
    keyOf: (spec: TableSpec) => renderKeyOf(style, spec, postgresAdvisoryKey(spec)),
    slotKeys: (spec: TableSpec) =>
      renderStatement(
        style,
        'advisory.slotKeys',
        sql`SELECT concat(${textLiteral(`${SLOT_KEY_PREFIX}/${spec.qualifiedName}/`)}, ${param('group')}::text, '/', tablequeue_slot) AS ${identifier(ADVISORY_KEY_COLUMN)} FROM generate_series(1, ${param('slots')}::integer) AS tablequeue_slot ORDER BY tablequeue_slot`,
      ),
  });
}

/** `concat` reads a NULL column as empty text, so every row has a key. */
export function postgresAdvisoryKey(spec: TableSpec): SqlText {
  return sql`concat(${joinSql(keyPartsSql(spec), ', ')})`;
}

/**
 * The probe takes a transaction-scoped shared lock, which conflicts only with the exclusive
 * session lock of a delivery: concurrent claims never exclude each other, and the probe's lock
 * ends with the statement. `OFFSET 0` keeps the planner from flattening the subquery, so the
 * probe runs on candidates in claim order and stops at the limit.
 */
function renderCandidates(spec: TableSpec) {
  const key = identifier(ADVISORY_KEY_COLUMN);
  const inClaimOrder = candidateSelect(spec, DATABASE, postgresAdvisoryKey(spec), { limit: false });
  return renderStatement(
    style,
    'advisory.candidates',
    sql`SELECT ${identifier(spec.id.column)}, ${key} FROM (${inClaimOrder} OFFSET 0) AS tablequeue_candidates WHERE pg_try_advisory_xact_lock_shared(hashtextextended(${key}, 0)) LIMIT ${param('limit')}`,
  );
}
