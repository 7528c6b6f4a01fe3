import { POSTGRES_MAX_IDENTIFIER_BYTES } from '../../table/identifier.js';
import type { TableSpec } from '../../table/table-spec.js';
import { tableOf } from '../claim-clauses.js';
import { DOUBLE_QUOTE_STYLE, renderDdl, sql } from '../quoting.js';
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

export function renderPostgresCreateTable(spec: TableSpec): string[] {
  const statements = [
    sql`CREATE TABLE ${tableOf(spec)} (\n${columnDefinitions(spec, POSTGRES_COLUMN_TYPES)}\n)`,
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
