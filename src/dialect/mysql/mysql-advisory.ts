import { MYSQL_CLOCK } from '../database-clock.js';
import { MAX_IDENTIFIER_CHARACTERS } from '../../table/identifier.js';
import type { TableSpec } from '../../table/table-spec.js';
import {
  ADVISORY_CONFIRMED_COLUMN,
  ADVISORY_KEY_COLUMN,
  candidateSelect,
  keyPartsSql,
  renderKeyOf,
  SLOT_KEY_PREFIX,
  renderAdvisoryRetryAfter,
  renderTakeCountThenRead,
  type AdvisoryStatements,
} from '../advisory-statements.js';
import type { TableColumns } from '../dialect.js';
import { BACKTICK_STYLE, fixedSql, identifier, joinSql, param, renderStatement, sql, textLiteral, type SqlStyle, type SqlText } from '../quoting.js';

const style: SqlStyle = { ...BACKTICK_STYLE, clock: MYSQL_CLOCK };

/** GET_LOCK refuses a name longer than this many characters. */
const MAX_LOCK_NAME_CHARACTERS = MAX_IDENTIFIER_CHARACTERS;

/** `GET_LOCK` and `RELEASE_LOCK`: named locks held by the session, visible server-wide. */
export function createMysqlAdvisoryStatements(options: { mariadb: boolean }): AdvisoryStatements {
  const database = options.mariadb ? 'mariadb' : 'mysql';
  const confirmed = identifier(ADVISORY_CONFIRMED_COLUMN);
  // GET_LOCK answers NULL on an error and RELEASE_LOCK when no session held the name: both read 0.
  const lock = renderStatement(
    style,
    'advisory.lock',
    sql`SELECT CAST(COALESCE(GET_LOCK(${param('key')}, 0), 0) AS SIGNED) AS ${confirmed}`,
  );
  const unlock = renderStatement(
    style,
    'advisory.unlock',
    sql`SELECT CAST(COALESCE(RELEASE_LOCK(${param('key')}), 0) AS SIGNED) AS ${confirmed}`,
  );
  return Object.freeze({
    candidates: (spec: TableSpec) => {
      const key = mysqlAdvisoryKey(spec);
      const isFree = sql`IS_USED_LOCK(${key}) IS NULL`;
      return renderStatement(style, 'advisory.candidates', candidateSelect(spec, database, key, { extraCondition: isFree, limit: true }));
    },
    lock: () => lock,
    unlock: () => unlock,
    take: (spec: TableSpec, columns: TableColumns) => renderTakeCountThenRead(style, spec, columns, database),
    retryAfter: (spec: TableSpec) => renderAdvisoryRetryAfter(style, spec),
    keyOf: (spec: TableSpec) => renderKeyOf(style, spec, mysqlAdvisoryKey(spec)),
    slotKeys: (spec: TableSpec) => {
      const numbers = sql`WITH RECURSIVE tablequeue_slots (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM tablequeue_slots WHERE n < ${param('slots')})`;
      const name = mysqlLockName(spec, [textLiteral(`${SLOT_KEY_PREFIX}/${spec.qualifiedName}/`), param('group'), sql`'/'`, sql`n`]);
      return renderStatement(style, 'advisory.slotKeys', sql`${numbers} SELECT ${name} AS ${identifier(ADVISORY_KEY_COLUMN)} FROM tablequeue_slots ORDER BY n`);
    },
  });
}

/**
 * Lock names are server-wide, so the key starts with the database (the declared schema, or the
 * connection's database) and a dot. A name over 64 characters becomes its SHA-256 in hex, which
 * is 64 characters; an empty one too, since GET_LOCK refuses it. `CONCAT_WS` skips a NULL column.
 */
export function mysqlAdvisoryKey(spec: TableSpec): SqlText {
  return mysqlLockName(spec, keyPartsSql(spec));
}

/** A lock name of `parts` within the table's database, as `mysqlAdvisoryKey` spells a row's. */
function mysqlLockName(spec: TableSpec, parts: SqlText[]): SqlText {
  const database = spec.schema === undefined ? sql`DATABASE()` : textLiteral(spec.schema);
  const name = sql`CONCAT_WS('', LOWER(${database}), '.', ${joinSql(parts, ', ')})`;
  const limit = fixedSql(String(MAX_LOCK_NAME_CHARACTERS));
  return sql`IF(CHAR_LENGTH(${name}) BETWEEN 1 AND ${limit}, ${name}, SHA2(${name}, 256))`;
}
