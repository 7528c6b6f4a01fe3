import { MAX_IDENTIFIER_CHARACTERS } from '../../table/identifier.js';
import type { TableSpec } from '../../table/table-spec.js';
import { tableOf } from '../claim-clauses.js';
import { BACKTICK_STYLE, renderDdl, sql } from '../quoting.js';
import { claimOrderIndex, columnDefinitions, type ColumnTypes } from '../table-ddl.js';

/**
 * Both flavours accept every type here, so MariaDB needs no spelling of its own:
 * - retry_after defaults to `(UTC_TIMESTAMP(6))`, an expression default (MySQL 8.0.13+, MariaDB
 *   10.2+). `CURRENT_TIMESTAMP(6)`, accepted since MySQL 5.6, is in the session time zone, and
 *   DATETIME keeps no zone: on a server not running in UTC a row published without a delay would
 *   come due hours early or late against the UTC instants the broker binds.
 * - locked_until is a whole-second DATETIME: lease tokens are rounded up to a whole second, so
 *   the token read back equals the one written.
 * - VARCHAR(255) for group and text ids: InnoDB cannot index TEXT without a prefix length.
 * - JSON is MariaDB's alias for LONGTEXT with a json_valid check.
 */
const MYSQL_COLUMN_TYPES: ColumnTypes = {
  generatedId: 'BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY',
  suppliedId: 'VARCHAR(255) NOT NULL PRIMARY KEY',
  group: 'VARCHAR(255) NOT NULL',
  priority: 'SMALLINT NOT NULL DEFAULT 0',
  partitionKey: 'VARCHAR(255) NULL',
  retryAfter: 'DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6))',
  attempt: 'SMALLINT NOT NULL DEFAULT 1',
  processedAt: 'DATETIME(6) NULL',
  lockedUntil: 'DATETIME NULL',
  headers: 'JSON NULL',
  payload: 'LONGBLOB NOT NULL',
  keyColumn: 'TEXT NULL',
};

/**
 * The index matters more here than elsewhere: a locking read locks every row it scans, so without
 * it a claim held by a handler blocks the rest of its group. utf8mb4 so that group names and ids
 * in any script fit on servers whose default is still latin1.
 */
export function renderMysqlCreateTable(spec: TableSpec): string[] {
  const statements = [
    sql`CREATE TABLE ${tableOf(spec)} (\n${columnDefinitions(spec, MYSQL_COLUMN_TYPES)}\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`,
  ];
  const index = claimOrderIndex(spec, {
    fitsIdentifierLimit: (name) => [...name].length <= MAX_IDENTIFIER_CHARACTERS,
    finishedRows: 'indexColumn',
    schemaOn: 'table',
  });
  if (index !== undefined) statements.push(index);
  return statements.map((statement) => renderDdl(BACKTICK_STYLE, statement));
}
