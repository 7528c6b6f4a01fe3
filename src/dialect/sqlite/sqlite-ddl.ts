import type { TableSpec } from '../../table/table-spec.js';
import type { CreateTableOptions } from '../dialect.js';
import { tableOf } from '../claim-clauses.js';
import { BACKTICK_STYLE, renderDdl, sql } from '../quoting.js';
import { claimOrderIndex, columnDefinitions, dedupeKeyIndex, inWorkIndex, type ColumnTypes } from '../table-ddl.js';

/**
 * Times are fixed-width UTC text, `YYYY-MM-DDTHH:MM:SS.sss+00:00`, the layout the broker binds:
 * text of one width and one zone sorts as the instants compare, so `retry_after <= ?` works on
 * plain strings. A text id needs NOT NULL spelt out: SQLite lets NULL into other primary keys.
 */
const SQLITE_COLUMN_TYPES: ColumnTypes = {
  generatedId: 'INTEGER PRIMARY KEY AUTOINCREMENT',
  suppliedId: 'TEXT NOT NULL PRIMARY KEY',
  group: 'TEXT NOT NULL',
  priority: 'INTEGER NOT NULL DEFAULT 0',
  partitionKey: 'TEXT',
  retryAfter: "TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now'))",
  attempt: 'INTEGER NOT NULL DEFAULT 1',
  processedAt: 'TEXT',
  lockedUntil: 'TEXT',
  headers: 'TEXT',
  payload: 'BLOB NOT NULL',
  jsonPayload: 'TEXT NOT NULL',
  dedupeKey: 'TEXT',
  keyColumn: 'TEXT',
};

export function renderSqliteCreateTable(spec: TableSpec, tableOptions: CreateTableOptions = {}): string[] {
  const statements = [sql`CREATE TABLE ${tableOf(spec)} (\n${columnDefinitions(spec, SQLITE_COLUMN_TYPES)}\n)`];
  const index = claimOrderIndex(spec, {
    // SQLite sets no length limit on identifiers.
    fitsIdentifierLimit: () => true,
    finishedRows: 'partialIndex',
    schemaOn: 'index',
  });
  if (index !== undefined) statements.push(index);
  const keyIndex = dedupeKeyIndex(spec, { fitsIdentifierLimit: () => true, partial: true, schemaOn: 'index' });
  if (keyIndex !== undefined) statements.push(keyIndex);
  const workIndex = inWorkIndex(spec, { fitsIdentifierLimit: () => true, partial: true, schemaOn: 'index' }, tableOptions.inWorkIndex);
  if (workIndex !== undefined) statements.push(workIndex);
  return statements.map((statement) => renderDdl(BACKTICK_STYLE, statement));
}
