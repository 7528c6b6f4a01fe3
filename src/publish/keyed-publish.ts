/**
 * A publish with a dedupe key. The queue table's unique index over (group, dedupe key) decides
 * between two publishes of one key, on every database and inside any transaction: the insert
 * either writes the row or meets the row that holds the key. What happens then is the caller's
 * `dedupe` mode: report a duplicate, or (lease tables) replace a waiting row's values, or take the
 * key off a row in work and insert again.
 *
 * Each step is one statement that is right on its own, so without a transaction nothing is left
 * half done: a crash after a key was taken off a row in work only lets the next publish in.
 */
import { HELD_KEY_COLUMN, IN_WORK_COLUMN } from '../dialect/dedupe-statements.js';
import { indexColumnsOf } from '../dialect/index-read.js';
import type { Dialect } from '../dialect/dialect.js';
import type { Connection, QueryResult } from '../driver/driver.js';
import { DeclarationError, DedupeContendedError, SchemaError, StatementError, UnsupportedError } from '../errors.js';
import { bindPositional, bindStatement, type BoundStatement, type ParamValues } from '../statement.js';
import { MAX_DEDUPE_KEY_CHARACTERS } from '../table/storable-values.js';
import type { TableSpec } from '../table/table-spec.js';
import { requireStorableText } from '../delivery/codec.js';
import { DEDUPE_MODES, type DedupeMode, type KeyedPublishResult } from './publish-options.js';

/** MySQL and MariaDB's duplicate-key error. */
const DUPLICATE_KEY_ERRNO = 1062;

/**
 * Rounds of insert, then look at the holder. A second round runs only when the holder finished
 * between the two statements, or its key was just taken off; a third needs that to happen again
 * within microseconds. Eight rounds that all lose mean something else is wrong: say so.
 */
const MAX_ROUNDS = 8;

/** A row ready to insert: its columns and their values in the same order. */
export interface KeyedRow {
  readonly columns: readonly string[];
  readonly values: readonly unknown[];
}

export interface KeyedInsert {
  readonly dialect: Dialect;
  readonly spec: TableSpec;
  /** The queue's group, bound where the table has a group column. */
  readonly group: string | undefined;
  readonly key: string;
  readonly mode: DedupeMode;
  readonly row: KeyedRow;
  /** The publish's instant: leases live at it hold their rows in work. */
  readonly now: Date;
  /** Writes the row and returns its id, or undefined when another row holds the key. */
  readonly insert: (connection: Connection) => Promise<string | undefined>;
  readonly where: string;
}

/** Checks a keyed publish's options before anything is written. */
export function checkDedupeOptions(
  database: string,
  spec: TableSpec,
  options: { dedupeKey?: unknown; dedupe?: unknown; dedupeForMs?: unknown },
  where: string,
): { key: string; mode: DedupeMode; forMs: number | undefined } {
  const key = checkDedupeKey(spec, options.dedupeKey, where);
  const mode = options.dedupe ?? 'queued-or-running';
  if (typeof mode !== 'string' || !(DEDUPE_MODES as readonly string[]).includes(mode)) {
    throw new DeclarationError(`${where}: dedupe must be one of ${DEDUPE_MODES.map((m) => `"${m}"`).join(', ')}, got ${JSON.stringify(mode)}`);
  }
  if (mode !== 'queued-or-running' && spec.lockedUntil === undefined) {
    throw new UnsupportedError({
      database,
      feature: `dedupe: "${mode}"`,
      message: `${where}: dedupe: "${mode}" needs a lease table (lockedUntil): it must tell a waiting row from one in work without waiting for the handler, and on table "${spec.qualifiedName}" a row in work is held by a lock that only its handler's end releases; use dedupe: "queued-or-running" here`,
    });
  }
  const forMs = options.dedupeForMs;
  if (forMs !== undefined && (typeof forMs !== 'number' || !Number.isInteger(forMs) || forMs < 1 || forMs > 366 * 86_400_000)) {
    throw new DeclarationError(`${where}: dedupeForMs must be a whole number of milliseconds from 1 to a year and a day, got ${String(forMs)}`);
  }
  return { key, mode: mode as DedupeMode, forMs: forMs as number | undefined };
}

/** A key the dedupe column stores unchanged on every database. */
export function checkDedupeKey(spec: TableSpec, key: unknown, where: string): string {
  if (spec.dedupeKey === undefined) {
    throw new DeclarationError(
      `${where}: table "${spec.qualifiedName}" has no dedupeKey column; declare one in defineTable ({ dedupeKey: "dedupe_key" }) and create it (createTableSql renders it with its unique index)`,
    );
  }
  if (typeof key !== 'string' || key.length === 0) {
    throw new DeclarationError(`${where}: dedupeKey must be a non-empty string, got ${typeof key === 'string' ? 'an empty string' : typeof key}`);
  }
  if ([...key].length > MAX_DEDUPE_KEY_CHARACTERS) {
    throw new DeclarationError(`${where}: dedupeKey is ${[...key].length} characters; at most ${MAX_DEDUPE_KEY_CHARACTERS} are stored on every database`);
  }
  requireStorableText(key, 'dedupeKey', where);
  return key;
}

/** Inserts, or settles with the row holding the key as the mode says. */
export async function publishKeyed(connection: Connection, request: KeyedInsert): Promise<KeyedPublishResult> {
  const { dialect, spec, mode } = request;
  const keyParams: ParamValues = { group: request.group, dedupeKey: request.key, now: request.now };
  let lastError: unknown;
  for (let round = 0; round < MAX_ROUNDS; round++) {
    let id: string | undefined;
    try {
      id = await request.insert(connection);
    } catch (error) {
      if (!isDuplicateKeyError(error, dialect)) throw error;
      lastError = error;
    }
    if (id !== undefined) return { status: 'published', id };

    const holder = await connection.execute(bindStatement(dialect.dedupe.holder(spec), keyParams));
    const held = holder.rows[0];
    if (held === undefined) continue;
    const holderId = String(held[spec.id.column]);
    if (mode === 'queued-or-running') return { status: 'duplicate', id: holderId };
    const inWork = Number(held[IN_WORK_COLUMN]) === 1;
    if (!inWork && mode === 'queued') return { status: 'duplicate', id: holderId };
    if (!inWork) {
      const replaced = await connection.execute(replaceStatement(request, holderId));
      if (replaced.affectedRows > 0) return { status: 'replaced', id: holderId };
      continue;
    }
    await connection.execute(bindStatement(dialect.dedupe.releaseFromWork(spec), { ...keyParams, id: holderId }));
  }
  throw new DedupeContendedError({
    dedupeKey: request.key,
    message: `${request.where}: dedupe key ${JSON.stringify(request.key)} changed hands ${MAX_ROUNDS} times while this publish ran; nothing was written. If ids are supplied, check that the id is not already taken`,
    cause: lastError,
  });
}

function replaceStatement(request: KeyedInsert, holderId: string) {
  const statement = request.dialect.dedupe.replaceWaiting(request.spec, request.row.columns);
  const values: ParamValues = { id: holderId, group: request.group, dedupeKey: request.key, now: request.now };
  request.row.columns.forEach((column, index) => {
    values[`column:${column}`] = request.row.values[index];
  });
  return bindStatement(statement, values);
}

/** MySQL's insert fails on a held key; there, that failure means "held", and it undid only itself. */
export function isDuplicateKeyError(error: unknown, dialect: Dialect): boolean {
  return dialect.dedupe.heldKeyOnInsert === 'error' && error instanceof StatementError && error.errno === DUPLICATE_KEY_ERRNO;
}

/**
 * MySQL's `publishMany` with keys: which of `keys` rows of the group hold already, so the insert
 * leaves them out (one held key would fail the whole statement).
 */
export async function heldKeysOf(
  connection: Connection,
  dialect: Dialect,
  spec: TableSpec,
  group: string | undefined,
  keys: readonly string[],
): Promise<Set<string>> {
  if (keys.length === 0) return new Set();
  const statement = dialect.dedupe.heldKeys(spec, keys.length);
  const values = spec.group === undefined ? [...keys] : [group, ...keys];
  const result: QueryResult = await connection.execute(bindPositional(statement, values));
  return new Set(result.rows.map((row) => keyText(row[HELD_KEY_COLUMN])));
}

/** A key as read back: text, or bytes where a hand-made column is binary. */
function keyText(value: unknown): string {
  if (value instanceof Uint8Array) return new TextDecoder().decode(value);
  return String(value);
}

/** Postgres: no unique index matches the insert's `ON CONFLICT`. */
const NO_MATCHING_INDEX_SQLSTATE = '42P10';

/**
 * A keyed insert that failed because the table lacks its unique index, as a `SchemaError` that
 * gives the index to create; undefined for any other failure.
 */
export function missingKeyIndexError(error: unknown, dialect: Dialect, spec: TableSpec): SchemaError | undefined {
  if (!(error instanceof StatementError)) return undefined;
  const cause = error.cause instanceof Error ? error.cause.message : '';
  const isMissing = error.sqlState === NO_MATCHING_INDEX_SQLSTATE || /ON CONFLICT clause does not match any PRIMARY KEY or UNIQUE constraint/.test(cause);
  return isMissing ? keyIndexSchemaError(dialect, spec, error) : undefined;
}

/**
 * MySQL and MariaDB: checks once per table that a unique index covers exactly the group and key
 * columns, since without it a held key would not fail the insert and duplicates would go in.
 */
export async function requireKeyIndex(
  run: (statement: BoundStatement) => Promise<QueryResult>,
  dialect: Dialect,
  spec: TableSpec,
): Promise<void> {
  const statement = dialect.dedupe.uniqueIndexes?.(spec);
  if (statement === undefined) return;
  const result = await run(bindStatement(statement, {}));
  const wanted = [spec.group?.column, spec.dedupeKey].filter((column) => column !== undefined);
  const covered = [...indexColumnsOf(result.rows).values()].some(
    (columns) => columns.length === wanted.length && wanted.every((column) => columns.includes(column)),
  );
  if (!covered) throw keyIndexSchemaError(dialect, spec, undefined);
}

function keyIndexSchemaError(dialect: Dialect, spec: TableSpec, cause: unknown): SchemaError {
  const create = dialect.schema.createTable(spec).find((statement) => statement.startsWith('CREATE UNIQUE INDEX'));
  const columns = [spec.group?.column, spec.dedupeKey].filter((column) => column !== undefined).join(', ');
  return new SchemaError({
    table: spec.qualifiedName,
    statement: 'dedupe.uniqueIndexes',
    message: `table "${spec.qualifiedName}" has no unique index over (${columns}), which keeps a dedupe key to one row; create it: ${create ?? '(see createTableSql)'}`,
    cause,
  });
}
