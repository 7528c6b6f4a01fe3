/**
 * The shape of a queue table's DDL, shared by the three dialects: which column each declared role
 * gets and how the claim-order index is named. Each dialect supplies its types and its index form.
 */
import { DeclarationError } from '../errors.js';
import { fnv1a32 } from '../internal/fnv1a.js';
import type { TableSpec } from '../table/table-spec.js';
import { fixedSql, identifier, joinSql, sql, type SqlText } from './quoting.js';

/** The column type, with nullability and default, that each role gets on one database. */
export interface ColumnTypes {
  readonly generatedId: string;
  readonly suppliedId: string;
  readonly group: string;
  readonly priority: string;
  readonly partitionKey: string;
  readonly retryAfter: string;
  readonly attempt: string;
  readonly processedAt: string;
  readonly lockedUntil: string;
  readonly headers: string;
  readonly payload: string;
  /** The payload of `payload: { column, json: true }`: the database's JSON type. */
  readonly jsonPayload: string;
  readonly dedupeKey: string;
  /** A column named only by the advisory key template. */
  readonly keyColumn: string;
}

/** One definition per declared role, in role order (id first), indented for a readable `init`. */
export function columnDefinitions(spec: TableSpec, types: ColumnTypes): SqlText {
  const definitions: [string, string][] = [[spec.id.column, spec.id.generated ? types.generatedId : types.suppliedId]];
  const add = (column: string | undefined, type: string) => {
    if (column !== undefined) definitions.push([column, type]);
  };
  add(spec.group?.column, types.group);
  add(spec.priority, types.priority);
  add(spec.partitionKey, types.partitionKey);
  add(spec.retryAfter, types.retryAfter);
  add(spec.attempt, types.attempt);
  add(spec.processedAt, types.processedAt);
  add(spec.lockedUntil, types.lockedUntil);
  add(spec.headers, types.headers);
  add(spec.payload, spec.payloadHolds === 'json' ? types.jsonPayload : types.payload);
  add(spec.dedupeKey, types.dedupeKey);
  for (const part of spec.advisoryLock ?? []) {
    if ('column' in part && !definitions.some(([column]) => column === part.column)) {
      definitions.push([part.column, types.keyColumn]);
    }
  }
  return joinSql(
    definitions.map(([column, type]) => sql`  ${identifier(column)} ${fixedSql(type)}`),
    ',\n',
  );
}

export interface ClaimIndexOptions {
  /** Whether an index name is within the database's identifier limit. */
  readonly fitsIdentifierLimit: (name: string) => boolean;
  /**
   * How the index skips finished rows of a processedAt table: a partial index
   * (`WHERE processed_at IS NULL`, Postgres and SQLite) or the column right after the group
   * (MySQL, which has no partial indexes), so `IS NULL` still leaves the claim order to the index.
   */
  readonly finishedRows: 'partialIndex' | 'indexColumn';
  /** SQLite names the schema on the index, not on the table it indexes. */
  readonly schemaOn: 'table' | 'index';
}

/**
 * `CREATE INDEX` over the claim order `(group, priority, retry_after, id)` for the roles present,
 * or `undefined` when that is the id alone: the primary key already serves it.
 */
export function claimOrderIndex(spec: TableSpec, options: ClaimIndexOptions): SqlText | undefined {
  const unfinishedColumn = options.finishedRows === 'indexColumn' ? spec.processedAt : undefined;
  const columns = [spec.group?.column, unfinishedColumn, spec.priority, spec.retryAfter, spec.id.column].filter(
    (column) => column !== undefined,
  );
  const partial = options.finishedRows === 'partialIndex' && spec.processedAt !== undefined;
  if (columns.length === 1 && !partial) return undefined;

  const where = partial && spec.processedAt !== undefined ? sql` WHERE ${identifier(spec.processedAt)} IS NULL` : sql``;
  return sql`CREATE INDEX ${indexOn(spec, INDEX_SUFFIX, columns, options)}${where}`;
}

export interface DedupeKeyIndexOptions {
  readonly fitsIdentifierLimit: (name: string) => boolean;
  /**
   * Postgres and SQLite index only the rows that hold a key (`WHERE dedupe_key IS NOT NULL`), and
   * their publish names that predicate in `ON CONFLICT`; MySQL has no partial indexes, and its
   * unique indexes let any number of NULLs in, so a plain one holds the same keys.
   */
  readonly partial: boolean;
  readonly schemaOn: 'table' | 'index';
}

/**
 * `CREATE UNIQUE INDEX <table>_dedupe_key ON t (group, dedupe_key)`: one row per key and group
 * among the rows that hold one; `undefined` without a dedupeKey role.
 */
export function dedupeKeyIndex(spec: TableSpec, options: DedupeKeyIndexOptions): SqlText | undefined {
  if (spec.dedupeKey === undefined) return undefined;
  const columns = [spec.group?.column, spec.dedupeKey].filter((column) => column !== undefined);
  const where = options.partial ? sql` WHERE ${identifier(spec.dedupeKey)} IS NOT NULL` : sql``;
  return sql`CREATE UNIQUE INDEX ${indexOn(spec, DEDUPE_KEY_INDEX_SUFFIX, columns, options)}${where}`;
}

export interface InWorkIndexOptions {
  readonly fitsIdentifierLimit: (name: string) => boolean;
  /**
   * Postgres and SQLite index only the rows that hold a lease (`WHERE locked_until IS NOT NULL`):
   * settlements clear it, so that is the rows in work and the leases of holders that died. MySQL
   * has no partial indexes and indexes every row.
   */
  readonly partial: boolean;
  readonly schemaOn: 'table' | 'index';
}

/**
 * `CREATE INDEX <table>_in_work ON t (group, locked_until)` on a FIFO lease table, or on any lease
 * table when `requested` (`createTableSql(dialect, { inWorkIndex: true })`), `undefined` on any
 * other: a FIFO claim takes a group's head only while no row of the group holds a live lease
 * (`noRowOfGroupInWork`), and without it that check reads every row of the group (on PostgreSQL
 * with 1,000,000 rows in one group, the whole table: 148 ms per claim, against 0.1 ms with it);
 * concurrency limits count the queue's rows in work the same way. The price: the claim's stamp
 * changes an indexed column, so on PostgreSQL it is no longer a HOT update (docs/benchmarks.md,
 * "FIFO groups").
 */
export function inWorkIndex(spec: TableSpec, options: InWorkIndexOptions, requested = false): SqlText | undefined {
  if (spec.lockedUntil === undefined || (spec.group?.fifo !== true && !requested)) return undefined;
  const where = options.partial ? sql` WHERE ${identifier(spec.lockedUntil)} IS NOT NULL` : sql``;
  const columns = [spec.group?.column, spec.lockedUntil].filter((column) => column !== undefined);
  return sql`CREATE INDEX ${indexOn(spec, IN_WORK_INDEX_SUFFIX, columns, options)}${where}`;
}

/** The in-work index of a lease table, whatever its other roles; a table without lockedUntil has none. */
export function requireInWorkIndex(spec: TableSpec, options: InWorkIndexOptions): SqlText {
  const index = inWorkIndex(spec, options, true);
  if (index === undefined) {
    throw new DeclarationError(`table "${spec.qualifiedName}": the in-work index indexes the lockedUntil column, and the table declares none`);
  }
  return index;
}

/** `<index> ON <table> (<columns>)`, the schema named where the database wants it. */
function indexOn(
  spec: TableSpec,
  suffix: string,
  columns: readonly string[],
  options: { readonly fitsIdentifierLimit: (name: string) => boolean; readonly schemaOn: 'table' | 'index' },
): SqlText {
  const indexName = identifier(indexNameFor(spec.name, suffix, options.fitsIdentifierLimit));
  const name = options.schemaOn === 'index' && spec.schema !== undefined ? sql`${identifier(spec.schema)}.${indexName}` : indexName;
  const table =
    options.schemaOn === 'table' && spec.schema !== undefined
      ? sql`${identifier(spec.schema)}.${identifier(spec.name)}`
      : identifier(spec.name);
  return sql`${name} ON ${table} (${joinSql(columns.map(identifier), ', ')})`;
}

const INDEX_SUFFIX = '_claim_order';
const DEDUPE_KEY_INDEX_SUFFIX = '_dedupe_key';
const IN_WORK_INDEX_SUFFIX = '_in_work';

/**
 * `<table><suffix>`, or when that is over the limit a prefix of the table name, a hash of the
 * whole name and the suffix: deterministic, so `init` on another machine names it the same, and
 * distinct for tables that share a long prefix. Cuts fall between characters, never inside one.
 */
function indexNameFor(tableName: string, indexSuffix: string, fitsIdentifierLimit: (name: string) => boolean): string {
  const plain = `${tableName}${indexSuffix}`;
  if (fitsIdentifierLimit(plain)) return plain;
  // FNV-1a as 8 hex digits: tiny, stable across runs and platforms.
  const suffix = `_${fnv1a32(tableName).toString(16).padStart(8, '0')}${indexSuffix}`;
  const characters = [...tableName];
  while (characters.length > 1 && !fitsIdentifierLimit(characters.join('') + suffix)) characters.pop();
  return characters.join('') + suffix;
}
