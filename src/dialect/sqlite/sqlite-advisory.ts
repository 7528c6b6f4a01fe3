import { SQLITE_CLOCK } from '../database-clock.js';
import { UnsupportedError } from '../../errors.js';
import type { Statement } from '../../statement.js';
import type { TableSpec } from '../../table/table-spec.js';
import {
  ADVISORY_KEY_COLUMN,
  candidateSelect,
  keyTemplateOf,
  renderKeyOf,
  SLOT_KEY_PREFIX,
  renderAdvisoryRetryAfter,
  renderTakeReturning,
  type AdvisoryStatements,
} from '../advisory-statements.js';
import type { TableColumns } from '../dialect.js';
import { BACKTICK_STYLE, identifier, joinSql, param, renderStatement, sql, textLiteral, type SqlStyle, type SqlText } from '../quoting.js';

const DATABASE = 'sqlite';
const style: SqlStyle = { ...BACKTICK_STYLE, clock: SQLITE_CLOCK };

/**
 * SQLite has no session locks: the claim form keeps held keys in a registry inside the process,
 * so the candidates carry no probe and lock and unlock are refused.
 */
export function createSqliteAdvisoryStatements(): AdvisoryStatements {
  return Object.freeze({
    candidates: (spec: TableSpec) =>
      renderStatement(style, 'advisory.candidates', candidateSelect(spec, DATABASE, sqliteAdvisoryKey(spec), { limit: true })),
    lock: (): Statement => refuseSessionLocks(),
    unlock: (): Statement => refuseSessionLocks(),
    take: (spec: TableSpec, columns: TableColumns) => renderTakeReturning(style, spec, columns, DATABASE),
    retryAfter: (spec: TableSpec) => renderAdvisoryRetryAfter(style, spec),
    keyOf: (spec: TableSpec) => renderKeyOf(style, spec, sqliteAdvisoryKey(spec)),
    // Held in the process's registry, not the database: the keys need only be distinct there.
    slotKeys: (spec: TableSpec) =>
      renderStatement(
        style,
        'advisory.slotKeys',
        sql`WITH RECURSIVE tablequeue_slots (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM tablequeue_slots WHERE n < ${param('slots')}) SELECT ${textLiteral(`${SLOT_KEY_PREFIX}/${spec.qualifiedName}/`)} || ${param('group')} || '/' || n AS ${identifier(ADVISORY_KEY_COLUMN)} FROM tablequeue_slots ORDER BY n`,
      ),
  });
}

/** `ifnull` makes a NULL column empty text, as on the other databases; the cast keeps a lone number column text. */
export function sqliteAdvisoryKey(spec: TableSpec): SqlText {
  const parts = keyTemplateOf(spec).map((part) =>
    'literal' in part ? textLiteral(part.literal) : sql`ifnull(${identifier(part.column)}, '')`,
  );
  return sql`CAST(${joinSql(parts, ' || ')} AS TEXT)`;
}

function refuseSessionLocks(): never {
  throw new UnsupportedError({
    database: DATABASE,
    feature: 'session locks',
    message:
      'SQLite has no session locks; the advisory lock form keeps its keys in a registry inside the process (capability supportsSessionLocks is false), so do not render lock or unlock statements for it',
  });
}
