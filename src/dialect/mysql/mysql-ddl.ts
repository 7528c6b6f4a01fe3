import { MAX_IDENTIFIER_CHARACTERS } from '../../table/identifier.js';
import type { TableSpec } from '../../table/table-spec.js';
import type { Statement } from '../../statement.js';
import type { CreateTableOptions, IndexStatements } from '../dialect.js';
import { tableOf } from '../claim-clauses.js';
import { COLUMN_COLUMN, INDEX_COLUMN } from '../index-read.js';
import { BACKTICK_STYLE, identifier, renderDdl, renderStatement, sql, textLiteral } from '../quoting.js';
import { claimOrderIndex, columnDefinitions, dedupeKeyIndex, inWorkIndex, requireInWorkIndex, type ColumnTypes } from '../table-ddl.js';
import { exactTextCharset } from './mysql-collation.js';

/**
 * Both flavours accept every type here; only the exact collation's name differs:
 * - retry_after defaults to `(UTC_TIMESTAMP(6))`, an expression default (MySQL 8.0.13+, MariaDB
 *   10.2+). `CURRENT_TIMESTAMP(6)`, accepted since MySQL 5.6, is in the session time zone, and
 *   DATETIME keeps no zone: on a server not running in UTC a row published without a delay would
 *   come due hours early or late against the UTC instants the broker binds.
 * - locked_until is a whole-second DATETIME: lease tokens are rounded up to a whole second, so
 *   the token read back equals the one written.
 * - VARCHAR(255) for group and text ids: InnoDB cannot index TEXT without a prefix length.
 *   Those and the partition key get the exact collation (mysql-collation.ts), not the table's
 *   default, which on most servers ignores case and accents: a subscriber of "welcome" would
 *   get the rows of "Welcome".
 * - JSON is MariaDB's alias for LONGTEXT with a json_valid check.
 */
function columnTypes(options: { mariadb: boolean }): ColumnTypes {
  const exactText = exactTextCharset(options);
  return {
    generatedId: 'BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY',
    suppliedId: `VARCHAR(255) ${exactText} NOT NULL PRIMARY KEY`,
    group: `VARCHAR(255) ${exactText} NOT NULL`,
    priority: 'SMALLINT NOT NULL DEFAULT 0',
    partitionKey: `VARCHAR(255) ${exactText} NULL`,
    retryAfter: 'DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6))',
    attempt: 'SMALLINT NOT NULL DEFAULT 1',
    processedAt: 'DATETIME(6) NULL',
    lockedUntil: 'DATETIME NULL',
    headers: 'JSON NULL',
    payload: 'LONGBLOB NOT NULL',
    jsonPayload: 'JSON NOT NULL',
    dedupeKey: `VARCHAR(255) ${exactText} NULL`,
    keyColumn: 'TEXT NULL',
  };
}

/**
 * The index matters more here than elsewhere: a locking read locks every row it scans, so without
 * it a claim held by a handler blocks the rest of its group. utf8mb4 so that group names and ids
 * in any script fit on servers whose default is still latin1.
 */
export function renderMysqlCreateTable(spec: TableSpec, options: { mariadb: boolean }, tableOptions: CreateTableOptions = {}): string[] {
  const statements = [
    sql`CREATE TABLE ${tableOf(spec)} (\n${columnDefinitions(spec, columnTypes(options))}\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`,
  ];
  const index = claimOrderIndex(spec, {
    fitsIdentifierLimit: (name) => [...name].length <= MAX_IDENTIFIER_CHARACTERS,
    finishedRows: 'indexColumn',
    schemaOn: 'table',
  });
  if (index !== undefined) statements.push(index);
  const keyIndex = dedupeKeyIndex(spec, { fitsIdentifierLimit: (name) => [...name].length <= MAX_IDENTIFIER_CHARACTERS, partial: false, schemaOn: 'table' });
  if (keyIndex !== undefined) statements.push(keyIndex);
  const workIndex = inWorkIndex(spec, MYSQL_IN_WORK_INDEX, tableOptions.inWorkIndex);
  if (workIndex !== undefined) statements.push(workIndex);
  return statements.map((statement) => renderDdl(BACKTICK_STYLE, statement));
}

const MYSQL_IN_WORK_INDEX = { fitsIdentifierLimit: (name: string) => [...name].length <= MAX_IDENTIFIER_CHARACTERS, partial: false, schemaOn: 'table' } as const;

/**
 * Reads information_schema, which shows a user the indexes of the tables it may use; an
 * expression's key column (MySQL 8 functional indexes) has no name.
 */
export const MYSQL_INDEX_STATEMENTS: IndexStatements = Object.freeze({
  read: (spec: TableSpec): Statement => {
    const schema = spec.schema === undefined ? sql`DATABASE()` : textLiteral(spec.schema);
    return renderStatement(
      BACKTICK_STYLE,
      'schema.indexes.read',
      sql`SELECT INDEX_NAME AS ${identifier(INDEX_COLUMN)}, COLUMN_NAME AS ${identifier(COLUMN_COLUMN)} FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = ${schema} AND TABLE_NAME = ${textLiteral(spec.name)} ORDER BY INDEX_NAME, SEQ_IN_INDEX`,
    );
  },
  renderInWorkIndex: (spec: TableSpec): string => renderDdl(BACKTICK_STYLE, requireInWorkIndex(spec, MYSQL_IN_WORK_INDEX)),
});

