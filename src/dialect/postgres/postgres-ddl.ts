import { POSTGRES_MAX_IDENTIFIER_BYTES } from '../../table/identifier.js';
import type { TableSpec } from '../../table/table-spec.js';
import { tableOf } from '../claim-clauses.js';
import { DOUBLE_QUOTE_STYLE, fixedSql, renderDdl, sql } from '../quoting.js';
import { claimOrderIndex, columnDefinitions, dedupeKeyIndex, type ColumnTypes } from '../table-ddl.js';

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

export function renderPostgresCreateTable(spec: TableSpec): string[] {
  const statements = [
    sql`CREATE TABLE ${tableOf(spec)} (\n${columnDefinitions(spec, POSTGRES_COLUMN_TYPES)}\n) WITH (${fixedSql(POSTGRES_QUEUE_TABLE_STORAGE)})`,
  ];
  const index = claimOrderIndex(spec, {
    fitsIdentifierLimit: (name) => encoder.encode(name).length <= POSTGRES_MAX_IDENTIFIER_BYTES,
    finishedRows: 'partialIndex',
    schemaOn: 'table',
  });
  if (index !== undefined) statements.push(index);
  const keyIndex = dedupeKeyIndex(spec, { fitsIdentifierLimit: (name) => encoder.encode(name).length <= POSTGRES_MAX_IDENTIFIER_BYTES, partial: true, schemaOn: 'table' });
  if (keyIndex !== undefined) statements.push(keyIndex);
  return statements.map((statement) => renderDdl(DOUBLE_QUOTE_STYLE, statement));
}
