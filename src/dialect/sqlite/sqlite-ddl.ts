import type { TableSpec } from '../../table/table-spec.js';
import type { Statement } from '../../statement.js';
import type { CreateTableOptions, IndexStatements } from '../dialect.js';
import { tableOf } from '../claim-clauses.js';
import { COLUMN_COLUMN, INDEX_COLUMN } from '../index-read.js';
import { BACKTICK_STYLE, identifier, renderDdl, renderStatement, sql, textLiteral } from '../quoting.js';
import { claimOrderIndex, columnDefinitions, dedupeKeyIndex, inWorkIndex, requireInWorkIndex, type ColumnTypes } from '../table-ddl.js';

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
  const workIndex = inWorkIndex(spec, SQLITE_IN_WORK_INDEX, tableOptions.inWorkIndex);
  if (workIndex !== undefined) statements.push(workIndex);
  return statements.map((statement) => renderDdl(BACKTICK_STYLE, statement));
}

const SQLITE_IN_WORK_INDEX = { fitsIdentifierLimit: () => true, partial: true, schemaOn: 'index' } as const;

/**
 * Reads the pragmas as table-valued functions, the schema (when the table names one) as their
 * last argument; an expression's key column has no name.
 */
export const SQLITE_INDEX_STATEMENTS: IndexStatements = Object.freeze({
  read: (spec: TableSpec): Statement => {
    const schema = spec.schema === undefined ? sql`` : sql`, ${textLiteral(spec.schema)}`;
    return renderStatement(
      BACKTICK_STYLE,
      'schema.indexes.read',
      sql`SELECT l.name AS ${identifier(INDEX_COLUMN)}, i.name AS ${identifier(COLUMN_COLUMN)} FROM pragma_index_list(${textLiteral(spec.name)}${schema}) AS l, pragma_index_info(l.name${schema}) AS i ORDER BY l.name, i.seqno`,
    );
  },
  renderInWorkIndex: (spec: TableSpec): string => renderDdl(BACKTICK_STYLE, requireInWorkIndex(spec, SQLITE_IN_WORK_INDEX)),
});
