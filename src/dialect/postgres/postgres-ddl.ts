import { POSTGRES_MAX_IDENTIFIER_BYTES } from '../../table/identifier.js';
import type { TableSpec } from '../../table/table-spec.js';
import type { Statement } from '../../statement.js';
import type { CreateTableOptions, IndexStatements } from '../dialect.js';
import { tableOf } from '../claim-clauses.js';
import { COLUMN_COLUMN, INDEX_COLUMN } from '../index-read.js';
import { DOUBLE_QUOTE_STYLE, fixedSql, identifier, renderDdl, renderStatement, sql, textLiteral } from '../quoting.js';
import { claimOrderIndex, columnDefinitions, dedupeKeyIndex, inWorkIndex, requireInWorkIndex, type ColumnTypes } from '../table-ddl.js';

const POSTGRES_COLUMN_TYPES: ColumnTypes = {
  generatedId: 'BIGSERIAL PRIMARY KEY',
  suppliedId: 'TEXT PRIMARY KEY',
  group: 'TEXT NOT NULL',
  priority: 'SMALLINT NOT NULL DEFAULT 0',
  partitionKey: 'TEXT NULL',
  retryAfter: 'TIMESTAMPTZ NOT NULL DEFAULT now()',
  attempt: 'SMALLINT NOT NULL DEFAULT 1',
  processedAt: 'TIMESTAMPTZ NULL',
  lockedUntil: 'TIMESTAMPTZ NULL',
  headers: 'JSONB NULL',
  payload: 'BYTEA NOT NULL',
  jsonPayload: 'JSONB NOT NULL',
  dedupeKey: 'TEXT NULL',
  keyColumn: 'TEXT NULL',
};

const encoder = new TextEncoder();

/**
 * Autovacuum for a table that is rewritten all the time. Every claim steps over the index entries
 * of the rows acked since the last vacuum, and by default vacuum waits until a fifth of the table
 * is dead: with a million rows parked in another queue of the table (delayed jobs, processed rows
 * kept), none ran in 4 minutes at about 400 messages a second, dead rows reached 132,000 and the
 * claim's scan 549 pages (1.1 ms); with these settings vacuum ran every minute and the scan stayed
 * at 16 pages or fewer (0.14 ms) (docs/reliability.md, sustained churn). PostgreSQL 11 takes all
 * four; the insert thresholds (13+) are left to the README.
 */
const POSTGRES_QUEUE_TABLE_STORAGE =
  'autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 10000, autovacuum_vacuum_cost_limit = 2000, autovacuum_analyze_scale_factor = 0.02';

/**
 * Lease tables keep half of each page free. A lease claim stamps `locked_until` on every row it
 * takes; on a page filled to the brim the new version goes to another page, so it cannot be a
 * HOT update and every index gets a second entry that later claims step over. Drained from
 * 100,000 rows filled in bulk (three interleaved rounds, docs/benchmarks.md, "Growth"), fill
 * factor 50 against 100: batches of 100 at 14,846 against 8,000 msg/s (claims over 1,445 pages
 * against 5,388), one at a time at 2,513 against 1,435 msg/s and 79 against 101 µs of CPU per
 * message. The price is a backlog's heap at up to twice its size. Row lock tables write a row only
 * to settle it, and keep the default.
 */
const POSTGRES_LEASE_TABLE_FILL_FACTOR = 'fillfactor = 50, ';

export function renderPostgresCreateTable(spec: TableSpec, tableOptions: CreateTableOptions = {}): string[] {
  const fill = spec.lockedUntil === undefined ? '' : POSTGRES_LEASE_TABLE_FILL_FACTOR;
  const statements = [
    sql`CREATE TABLE ${tableOf(spec)} (\n${columnDefinitions(spec, POSTGRES_COLUMN_TYPES)}\n) WITH (${fixedSql(fill + POSTGRES_QUEUE_TABLE_STORAGE)})`,
  ];
  const index = claimOrderIndex(spec, {
    fitsIdentifierLimit: (name) => encoder.encode(name).length <= POSTGRES_MAX_IDENTIFIER_BYTES,
    finishedRows: 'partialIndex',
    schemaOn: 'table',
  });
  if (index !== undefined) statements.push(index);
  const keyIndex = dedupeKeyIndex(spec, { fitsIdentifierLimit: (name) => encoder.encode(name).length <= POSTGRES_MAX_IDENTIFIER_BYTES, partial: true, schemaOn: 'table' });
  if (keyIndex !== undefined) statements.push(keyIndex);
  const workIndex = inWorkIndex(spec, POSTGRES_IN_WORK_INDEX, tableOptions.inWorkIndex);
  if (workIndex !== undefined) statements.push(workIndex);
  return statements.map((statement) => renderDdl(DOUBLE_QUOTE_STYLE, statement));
}

const POSTGRES_IN_WORK_INDEX = {
  fitsIdentifierLimit: (name: string) => encoder.encode(name).length <= POSTGRES_MAX_IDENTIFIER_BYTES,
  partial: true,
  schemaOn: 'table',
} as const;

/**
 * Reads the catalog: `to_regclass` resolves the name as every statement does (the search path when
 * the table names no schema); invalid indexes (a failed `CREATE INDEX CONCURRENTLY`) serve no
 * read, and INCLUDE columns (past `indnkeyatts`) lead nothing.
 */
export const POSTGRES_INDEX_STATEMENTS: IndexStatements = Object.freeze({
  read: (spec: TableSpec): Statement =>
    renderStatement(
      DOUBLE_QUOTE_STYLE,
      'schema.indexes.read',
      sql`SELECT i.relname AS ${identifier(INDEX_COLUMN)}, a.attname AS ${identifier(COLUMN_COLUMN)} FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid CROSS JOIN LATERAL unnest(x.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord) LEFT JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = k.attnum WHERE x.indrelid = to_regclass(${textLiteral(renderDdl(DOUBLE_QUOTE_STYLE, tableOf(spec)))}) AND x.indisvalid AND k.ord <= x.indnkeyatts ORDER BY i.relname, k.ord`,
    ),
  renderInWorkIndex: (spec: TableSpec): string => renderDdl(DOUBLE_QUOTE_STYLE, requireInWorkIndex(spec, POSTGRES_IN_WORK_INDEX)),
});
