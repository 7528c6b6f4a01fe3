import type { Queue } from '../definition/define-table.js';
import { encodeHeaders, encodePayload, payloadColumnValue, requirePayloadSize, requireStorableText } from '../delivery/codec.js';
import { DeliveryTransaction } from '../delivery/delivery-transaction.js';
import type { Dialect } from '../dialect/dialect.js';
import type { NotifyStatements } from '../dialect/notify.js';
import { inTransaction, withConnection } from '../driver/connection-scope.js';
import type { Connection, Driver, QueryResult } from '../driver/driver.js';
import { DeclarationError, SchemaError, StatementError } from '../errors.js';
import { TIMEOUT_HEADER } from '../delivery/message-timeout.js';
import { positiveMilliseconds } from '../option-checks.js';
import { bindPositional, bindStatement, type BoundStatement, type Statement } from '../statement.js';
import { validateIdentifier } from '../table/identifier.js';
import { isStorableTime, MAX_PRIORITY, MIN_PRIORITY } from '../table/storable-values.js';
import { roleColumns, type TableSpec } from '../table/table-spec.js';
import { DEFAULT_DEDUPE_WINDOWS_TABLE } from '../dialect/dedupe-window-statements.js';
import { DedupeWindows, holderOf } from './dedupe-windows.js';
import { checkDedupeKey, checkDedupeOptions, heldKeysOf, isDuplicateKeyError, missingKeyIndexError, publishKeyed, requireKeyIndex } from './keyed-publish.js';
import type { KeyedPublishOptions, KeyedPublishResult, PublishItem, PublishOptions } from './publish-options.js';

/** Rows per multi-row insert: well under every database's limit on bound parameters (SQLite 32,766). */
const MAX_ROWS_PER_INSERT = 500;
const MAX_PARAMS_PER_INSERT = 30_000;

const OPTION_KEYS = new Set(['partitionKey', 'priority', 'delayMs', 'runAt', 'headers', 'timeoutMs', 'id', 'tx', 'dedupeKey', 'dedupe', 'dedupeForMs']);

export interface PublisherOptions {
  readonly driver: Driver;
  readonly dialect: Dialect;
  /** Called after a write so this broker's subscriptions of that table and group claim at once. */
  readonly wake: (spec: TableSpec, group: string | undefined) => void;
  /** Payloads larger than this are refused before anything is written. */
  readonly maxPayloadBytes: number;
  /**
   * With `listen` on (Postgres): after each write, a notification on the connection that wrote
   * the rows, so other processes' listeners wake. Undefined: nothing is notified.
   */
  readonly notify: NotifyStatements | undefined;
  /** A notification failed after the rows were written: reported, and the publish still succeeds. */
  readonly onNotifyError: (error: unknown, detail: Record<string, unknown>) => void;
  /** Where `dedupeForMs` windows live (`name` or `schema.name`); created before the first one opens. */
  readonly dedupeWindowsTable?: string;
}

/** Writes rows into queue tables. Encodes and validates everything before it writes anything. */
export class Publisher {
  readonly #options: PublisherOptions;
  readonly #statements = new Map<string, Statement>();
  #dedupeWindows: Promise<DedupeWindows> | undefined;
  /** Per keyed table, the check of its unique index (MySQL, MariaDB; nothing to check elsewhere). */
  readonly #keyIndexChecks = new Map<string, Promise<void>>();

  constructor(options: PublisherOptions) {
    this.#options = options;
  }

  async publish<Payload>(queue: Queue<Payload>, payload: Payload, options: PublishOptions = {}): Promise<string> {
    const spec = queue.table.spec;
    const where = `publish to "${queue.label}"`;
    const row = rowValues(queue, payload, options, { now: new Date(), maxPayloadBytes: this.#options.maxPayloadBytes, where });
    const insert = bindPositional(this.#insert(spec, row, 1), row.values);
    const result =
      options.tx === undefined && this.#options.notify === undefined
        ? await this.#writeAlone(queue, insert)
        : await this.#write(queue, options.tx, (connection) => connection.execute(insert));
    return insertedIds(spec, result, options.id === undefined ? [] : [options.id], 1)[0]!;
  }

  /**
   * A publish with a dedupe key: written, or a duplicate of the row holding the key, or (`dedupe:
   * 'replace'`) written over that row while it waits. See keyed-publish.ts.
   */
  async publishKeyed<Payload>(queue: Queue<Payload>, payload: Payload, options: KeyedPublishOptions): Promise<KeyedPublishResult> {
    const spec = queue.table.spec;
    const { dialect, maxPayloadBytes } = this.#options;
    const where = `publish to "${queue.label}"`;
    const now = new Date();
    const { key, mode, forMs } = checkDedupeOptions(dialect.name, spec, options, where);
    const row = rowValues(queue, payload, options, { now, maxPayloadBytes, where });
    const statement = this.#insert(spec, row, 1);
    const supplied = options.id === undefined ? [] : [options.id];
    await this.#keyIndexChecked(spec);
    const windows = forMs === undefined ? undefined : await this.#dedupeWindowsReady();
    const group = spec.group === undefined ? undefined : queue.name;
    const publish = async (connection: Connection): Promise<KeyedPublishResult> => {
      if (windows !== undefined && forMs !== undefined) {
        const opened = await windows.open(connection, { spec, queueName: queue.name, key, now, forMs });
        if (!opened) return { status: 'duplicate', id: await holderOf(connection, dialect, spec, group, key, now) };
      }
      return publishKeyed(connection, {
        dialect,
        spec,
        group,
        key,
        mode,
        row,
        now,
        where,
        insert: async (on) => {
          const result = await on.execute(bindPositional(statement, row.values));
          if (dialect.dedupe.heldKeyOnInsert === 'skipped' && result.rows.length === 0) return undefined;
          return insertedIds(spec, result, supplied, 1)[0];
        },
      });
    };
    try {
      return await this.#write(queue, options.tx, publish, (result) => result.status !== 'duplicate');
    } catch (error) {
      throw missingKeyIndexError(error, dialect, spec) ?? error;
    }
  }

  /** Runs the table's unique index check once; a failed check runs again on the next publish. */
  #keyIndexChecked(spec: TableSpec): Promise<void> {
    // Only MySQL and MariaDB read the index; elsewhere no connection is taken, which on SQLite's
    // one handle would wait behind a service transaction that this publish runs inside.
    if (this.#options.dialect.dedupe.uniqueIndexes === undefined) return Promise.resolve();
    let check = this.#keyIndexChecks.get(spec.qualifiedName);
    if (check === undefined) {
      const { driver, dialect } = this.#options;
      check = withConnection(driver, (connection) => requireKeyIndex((statement) => connection.execute(statement), dialect, spec));
      check.catch(() => this.#keyIndexChecks.delete(spec.qualifiedName));
      this.#keyIndexChecks.set(spec.qualifiedName, check);
    }
    return check;
  }

  /**
   * Writes many rows, one statement per chunk; returns how many were written. Every item is
   * checked before the first write. Without `tx` the chunks commit together or not at all: a
   * failure or a lost connection part way leaves no row, so the caller can simply retry.
   */
  async publishMany<Payload>(
    queue: Queue<Payload>,
    items: readonly PublishItem<Payload>[],
    options: { tx?: unknown } = {},
  ): Promise<number> {
    if (!Array.isArray(items)) throw new DeclarationError('publishMany takes an array of { payload, …options }');
    if (items.length === 0) return 0;
    const spec = queue.table.spec;
    const now = new Date();
    const { maxPayloadBytes } = this.#options;
    const rows = items.map((item, index) => {
      const where = `publishMany to "${queue.label}", item ${index}`;
      if (item === null || typeof item !== 'object' || !('payload' in item)) {
        throw new DeclarationError(`${where} must be an object with a payload`);
      }
      const { payload, ...itemOptions } = item;
      if ('dedupe' in itemOptions || 'dedupeForMs' in itemOptions) {
        throw new DeclarationError(
          `${where}: publishMany keeps out keys held already; dedupe and dedupeForMs are options of publish, one key at a time`,
        );
      }
      return rowValues(queue, payload, itemOptions, { now, maxPayloadBytes, where });
    });
    const chunks = chunksOfSameColumns(rows);
    const group = spec.group === undefined ? undefined : queue.name;
    const insertChunks = async (connection: Connection): Promise<number> => {
      let written = 0;
      for (const chunk of chunks) written += await this.#insertChunk(connection, spec, group, chunk);
      return written;
    };
    // One statement is all or nothing by itself; more need a transaction, unless they run in the
    // caller's. MySQL's keyed chunks read the held keys first: two statements.
    const keyed = rows.some((row) => row.key !== undefined);
    if (keyed) await this.#keyIndexChecked(spec);
    const keyedOnMysql = keyed && this.#options.dialect.dedupe.heldKeyOnInsert === 'error';
    try {
      if (options.tx === undefined && chunks.length === 1 && !keyed && this.#options.notify === undefined) {
        const [chunk] = chunks as [RowToInsert[]];
        await this.#writeAlone(queue, this.#chunkInsert(spec, chunk));
        return chunk.length;
      }
      if (options.tx === undefined && (chunks.length > 1 || keyedOnMysql)) return await this.#writeInTransaction(queue, insertChunks);
      return await this.#write(queue, options.tx, insertChunks, (written) => written > 0);
    } catch (error) {
      throw (keyed ? missingKeyIndexError(error, this.#options.dialect, spec) : undefined) ?? error;
    }
  }

  /**
   * One chunk's insert; returns the rows written. Rows whose key another row holds are left out:
   * by the insert itself (Postgres, SQLite), or by reading the held keys first (MySQL, where a
   * key taken between the read and the insert fails it, and the chunk is read again).
   */
  async #insertChunk(connection: Connection, spec: TableSpec, group: string | undefined, chunk: readonly RowToInsert[]): Promise<number> {
    const { dialect } = this.#options;
    const keyed = chunk.some((row) => row.key !== undefined);
    if (!keyed || dialect.dedupe.heldKeyOnInsert === 'skipped') {
      const result = await connection.execute(this.#chunkInsert(spec, chunk));
      return keyed ? result.rows.length : chunk.length;
    }
    for (let round = 0; ; round++) {
      const held = await heldKeysOf(connection, dialect, spec, group, [...new Set(chunk.flatMap((row) => (row.key === undefined ? [] : [row.key])))]);
      const seen = new Set<string>();
      const kept = chunk.filter((row) => {
        if (row.key === undefined) return true;
        if (held.has(row.key) || seen.has(row.key)) return false;
        seen.add(row.key);
        return true;
      });
      if (kept.length === 0) return 0;
      try {
        await connection.execute(this.#chunkInsert(spec, kept));
        return kept.length;
      } catch (error) {
        if (!isDuplicateKeyError(error, dialect) || round >= 7) throw error;
      }
    }
  }

  /** The insert of a chunk's rows, which share their columns, bound to their values. */
  #chunkInsert(spec: TableSpec, chunk: readonly RowToInsert[]): BoundStatement {
    return bindPositional(this.#insert(spec, chunk[0]!, chunk.length), chunk.flatMap((row) => row.values));
  }

  #insert(spec: TableSpec, shape: RowToInsert, rowCount: number): Statement {
    const skipHeldKeys = shape.key !== undefined && this.#options.dialect.dedupe.heldKeyOnInsert === 'skipped';
    const key = `${spec.qualifiedName}\u0000${shape.shape}\u0000${rowCount}\u0000${skipHeldKeys}`;
    let statement = this.#statements.get(key);
    if (!statement) {
      const options = { retryAfterAsDelay: shape.isDueAsDelay, skipHeldKeys };
      statement = this.#options.dialect.insert.rows(spec, shape.columns, rowCount, options);
      this.#statements.set(key, statement);
    }
    return statement;
  }

  /**
   * One insert outside the caller's transaction where no notification follows it: a write of its
   * own (`Driver.executeWrite`), which SQLite commits with the other writes waiting for its handle
   * at that moment, so publishes made at once share a sync of the log instead of one each.
   */
  async #writeAlone(queue: Queue<unknown>, insert: BoundStatement): Promise<QueryResult> {
    let result: QueryResult;
    try {
      result = await this.#options.driver.executeWrite(insert);
    } catch (error) {
      throw asSchemaError(error, queue.table.spec);
    }
    this.#options.wake(queue.table.spec, queue.group);
    return result;
  }

  /**
   * Runs the inserts and then the notification on one connection: the service's own (`tx`),
   * where the notification is delivered when its transaction commits, or one borrowed for both.
   * Then wakes this broker's subscriptions: at once, or for a delivery's transaction
   * (`tx: context.tx`) when it commits, since a claim could not see the rows before.
   */
  async #write<T>(
    queue: Queue<unknown>,
    tx: unknown,
    insert: (connection: Connection) => Promise<T>,
    wroteRows: (result: T) => boolean = () => true,
  ): Promise<T> {
    const { driver } = this.#options;
    const insertThenNotify = async (connection: Connection): Promise<T> => {
      let result: T;
      try {
        result = await insert(connection);
      } catch (error) {
        throw asSchemaError(error, queue.table.spec);
      }
      if (wroteRows(result)) await this.#notify(queue, connection);
      return result;
    };
    // The service's connection, or the delivery's transaction, stays with its owner.
    const result =
      tx === undefined
        ? await withConnection(driver, insertThenNotify)
        : await insertThenNotify(tx instanceof DeliveryTransaction ? tx.asConnection() : driver.adopt(tx));
    if (!wroteRows(result)) return result;
    const wake = () => this.#options.wake(queue.table.spec, queue.group);
    if (tx instanceof DeliveryTransaction) tx.afterCommit(wake);
    else wake();
    return result;
  }

  /**
   * Runs the inserts in a transaction of their own on one borrowed connection. The notification
   * goes after the commit, on the same connection: inside the transaction a failed pg_notify
   * would abort it, and Postgres answers the COMMIT of an aborted transaction by rolling back
   * without an error. A failure rolls back, or destroys the connection when even that fails (a
   * lost connection, whose transaction the server rolls back as the session ends).
   */
  async #writeInTransaction(queue: Queue<unknown>, insert: (connection: Connection) => Promise<number>): Promise<number> {
    const { driver, dialect } = this.#options;
    const session = dialect.session;
    // One writer (SQLite): take the write lock at begin, not at the first insert.
    const statements = { begin: session.begin({ sqliteBegin: 'immediate' }), commit: session.commit(), rollback: session.rollback() };
    const written = await withConnection(driver, async (connection) => {
      const inserted = await inTransaction(connection, statements, async () => {
        try {
          return await insert(connection);
        } catch (error) {
          throw asSchemaError(error, queue.table.spec);
        }
      });
      if (inserted > 0) await this.#notify(queue, connection);
      return inserted;
    });
    if (written > 0) this.#options.wake(queue.table.spec, queue.group);
    return written;
  }

  /** The windows table, created once per publisher before its first `dedupeForMs` publish. */
  #dedupeWindowsReady(): Promise<DedupeWindows> {
    this.#dedupeWindows ??= DedupeWindows.create(
      this.#options.driver,
      this.#options.dialect.name,
      this.#options.dedupeWindowsTable ?? DEFAULT_DEDUPE_WINDOWS_TABLE,
      { sharesSessionWithService: this.#options.dialect.capabilities.sharesSessionWithService },
    ).catch((error: unknown) => {
      this.#dedupeWindows = undefined;
      throw error;
    });
    return this.#dedupeWindows;
  }

  /** Runs the queue's notification, if any; a failure is reported, never thrown: the rows are written. */
  async #notify(queue: Queue<unknown>, connection: Connection): Promise<void> {
    const notification = this.#notification(queue);
    if (notification === undefined) return;
    await connection.execute(notification).catch((error: unknown) =>
      this.#options.onNotifyError(error, { queue: queue.label, phase: 'notify' }),
    );
  }

  /**
   * The queue's notification; undefined with listen off. Its payload is the queue name, which
   * always fits: 255 characters are at most 1,020 bytes, under the payload limit (publisher.test.ts).
   */
  #notification(queue: Queue<unknown>): BoundStatement | undefined {
    const notify = this.#options.notify;
    if (notify === undefined) return undefined;
    return bindStatement(notify.notify(), { channel: notify.channel(queue.table.spec), group: queue.group ?? '' });
  }
}

interface RowToInsert {
  /** The dedupe key, when the publish gave one. */
  readonly key: string | undefined;
  readonly columns: readonly string[];
  readonly values: unknown[];
  /** Database-clock tables: the retryAfter value is a delay in microseconds from the database's now. */
  readonly isDueAsDelay: boolean;
  /** The column list (and how the due time is given) as one string, to group rows that one statement can insert. */
  readonly shape: string;
}

/** Consecutive rows with the same columns, in chunks under the databases' parameter limits. */
function chunksOfSameColumns(rows: readonly RowToInsert[]): RowToInsert[][] {
  const chunks: RowToInsert[][] = [];
  for (const row of rows) {
    const last = chunks.at(-1);
    const limit = Math.max(1, Math.min(MAX_ROWS_PER_INSERT, Math.floor(MAX_PARAMS_PER_INSERT / Math.max(row.columns.length, 1))));
    if (last !== undefined && last[0]!.shape === row.shape && last.length < limit) last.push(row);
    else chunks.push([row]);
  }
  return chunks;
}

/** The role columns a publish writes, in a fixed order. */
function insertColumns(spec: TableSpec): string[] {
  const columns: string[] = [];
  if (!spec.id.generated) columns.push(spec.id.column);
  if (spec.group) columns.push(spec.group.column);
  if (spec.priority) columns.push(spec.priority);
  if (spec.partitionKey) columns.push(spec.partitionKey);
  if (spec.retryAfter) columns.push(spec.retryAfter);
  if (spec.headers) columns.push(spec.headers);
  if (spec.payload) columns.push(spec.payload);
  if (spec.dedupeKey) columns.push(spec.dedupeKey);
  return columns;
}

/** What every row of one call shares: the instant delays count from, the payload limit, and where, for messages. */
interface RowContext {
  readonly now: Date;
  readonly maxPayloadBytes: number;
  readonly where: string;
}

function rowValues<Payload>(queue: Queue<Payload>, payload: Payload, options: PublishOptions, context: RowContext): RowToInsert {
  const spec = queue.table.spec;
  const { now, maxPayloadBytes, where } = context;
  if (options === null || typeof options !== 'object') throw new DeclarationError(`${where}: options must be an object`);
  for (const key of Object.keys(options)) {
    if (!OPTION_KEYS.has(key)) {
      throw new DeclarationError(`${where}: unknown option "${key}"; the options are ${[...OPTION_KEYS].join(', ')}`);
    }
  }
  const byColumn = new Map<string, unknown>();
  if (!spec.id.generated) {
    if (options.id === undefined || options.id === null) {
      throw new DeclarationError(`${where}: table "${spec.qualifiedName}" takes ids from the publisher; pass { id }`);
    }
    byColumn.set(spec.id.column, options.id);
  } else if (options.id !== undefined) {
    throw new DeclarationError(`${where}: table "${spec.qualifiedName}" generates its ids; remove the id option`);
  }
  if (
    options.priority !== undefined &&
    (!Number.isInteger(options.priority) || options.priority < MIN_PRIORITY || options.priority > MAX_PRIORITY)
  ) {
    throw new DeclarationError(
      `${where}: priority must be a whole number from ${MIN_PRIORITY} to ${MAX_PRIORITY} (the priority column is a SMALLINT), got ${String(options.priority)}`,
    );
  }
  if (options.partitionKey !== undefined && options.partitionKey !== null && typeof options.partitionKey !== 'string') {
    throw new DeclarationError(`${where}: partitionKey must be a string or null`);
  }
  if (typeof options.partitionKey === 'string') requireStorableText(options.partitionKey, 'partitionKey', where);
  /** A role option given for a table without that column is a mistake worth stopping. */
  const setRole = (column: string | undefined, role: string, given: unknown, value: () => unknown) => {
    if (column !== undefined) byColumn.set(column, value());
    else if (given !== undefined && given !== null) {
      throw new DeclarationError(`${where}: the ${role} option needs a ${role} column; declare it in defineTable`);
    }
  };
  if (spec.group) byColumn.set(spec.group.column, queue.name);
  setRole(spec.priority, 'priority', options.priority, () => options.priority ?? 0);
  setRole(spec.partitionKey, 'partitionKey', options.partitionKey, () => options.partitionKey ?? null);
  // A database-clock table is due by the database's now: a delay (none by default) goes to the
  // database, which adds it; only an explicit runAt instant is bound as it is.
  const isDueAsDelay = spec.clock === 'database' && spec.retryAfter !== undefined && options.runAt === undefined;
  setRole(spec.retryAfter, 'delayMs/runAt (retryAfter)', dueOption(options, now, where), () =>
    isDueAsDelay ? Math.round((options.delayMs ?? 0) * 1000) : dueAt(options, now),
  );
  const headers = withTimeoutHeader(spec, options, where);
  setRole(spec.headers, 'headers', options.headers, () => (headers === undefined ? null : encodeHeaders(headers, where)));
  const keyed = options as { dedupeKey?: unknown; dedupe?: unknown; dedupeForMs?: unknown };
  const key = keyed.dedupeKey === undefined ? undefined : checkDedupeKey(spec, keyed.dedupeKey, where);
  if (key === undefined && (keyed.dedupe !== undefined || keyed.dedupeForMs !== undefined)) {
    throw new DeclarationError(`${where}: dedupe and dedupeForMs need a dedupeKey`);
  }
  if (spec.dedupeKey !== undefined) byColumn.set(spec.dedupeKey, key ?? null);
  const columns = insertColumns(spec);
  if (spec.payload) {
    const encoded = requirePayloadSize(encodePayload(payload, where), maxPayloadBytes, where);
    byColumn.set(spec.payload, payloadColumnValue(encoded, spec.payloadHolds, payload instanceof Uint8Array, where));
  } else {
    columns.push(...rowModeColumns(spec, payload, byColumn, where));
  }
  const shape = `${columns.join(',')}${isDueAsDelay ? '\u0000due as delay' : ''}${key === undefined ? '' : '\u0000keyed'}`;
  return { key, columns, values: columns.map((column) => byColumn.get(column)), isDueAsDelay, shape };
}

/**
 * Row mode (a table without a payload column): the payload is an object whose keys are the
 * table's own data columns. Keys are validated as identifiers and may not name a role column.
 */
function rowModeColumns(spec: TableSpec, payload: unknown, byColumn: Map<string, unknown>, where: string): string[] {
  if (payload === null || typeof payload !== 'object' || Array.isArray(payload) || payload instanceof Uint8Array) {
    throw new DeclarationError(
      `${where}: table "${spec.qualifiedName}" has no payload column (row mode), so the payload must be an object of its data columns`,
    );
  }
  const roles = new Set(roleColumns(spec));
  const columns: string[] = [];
  for (const [column, value] of Object.entries(payload)) {
    validateIdentifier(column, `data column of ${where}`);
    if (roles.has(column)) {
      throw new DeclarationError(`${where}: "${column}" is a role column of "${spec.qualifiedName}"; set it through publish options`);
    }
    if (value === undefined) continue;
    byColumn.set(column, value);
    columns.push(column);
  }
  return columns;
}

/**
 * The delay or instant asked for, checked: due by the end of year 9999 (`isStorableTime`), on
 * every database, so a row is never stored where it would sort before today (SQLite) or fail
 * inside the driver. A database-clock table adds the delay to the database's now; the check
 * counts it from this host's, which differs by the clocks' skew at most.
 */
function dueOption(options: PublishOptions, now: Date, where: string): unknown {
  if (options.delayMs !== undefined && options.runAt !== undefined) {
    throw new DeclarationError(`${where}: give delayMs or runAt, not both`);
  }
  if (options.delayMs !== undefined) {
    if (typeof options.delayMs !== 'number' || !Number.isFinite(options.delayMs) || options.delayMs < 0) {
      throw new DeclarationError(`${where}: delayMs must be zero or more milliseconds, got ${String(options.delayMs)}`);
    }
    if (!isStorableTime(now.getTime() + options.delayMs)) {
      throw new DeclarationError(
        `${where}: a delayMs of ${options.delayMs} ends after year 9999, past what every database stores; use a shorter delay`,
      );
    }
  }
  if (options.runAt !== undefined) {
    if (!(options.runAt instanceof Date) || !Number.isFinite(options.runAt.getTime())) {
      throw new DeclarationError(`${where}: runAt must be a valid Date`);
    }
    if (!isStorableTime(options.runAt.getTime())) {
      throw new DeclarationError(
        `${where}: runAt ${options.runAt.toISOString()} is outside years 1 to 9999, which every database stores; use an instant within them`,
      );
    }
  }
  return options.delayMs ?? options.runAt;
}

function dueAt(options: PublishOptions, now: Date): Date {
  if (options.runAt !== undefined) return options.runAt;
  return new Date(now.getTime() + (options.delayMs ?? 0));
}

function insertedIds(spec: TableSpec, result: QueryResult, supplied: readonly (string | number)[], count: number): string[] {
  if (supplied.length > 0) return supplied.map(String);
  const returned = result.rows.map((row) => row[spec.id.column]).filter((id) => id !== undefined && id !== null);
  if (returned.length === count) return returned.map(String);
  if (result.insertId !== undefined) return [String(result.insertId)];
  return [];
}

/**
 * The headers to store: the caller's, with the message's own timeout (`timeoutMs`) added as
 * `TIMEOUT_HEADER`, which a handler reads back and a subscription goes by.
 */
function withTimeoutHeader(spec: TableSpec, options: PublishOptions, where: string): Record<string, string> | undefined {
  const given: unknown = options.headers;
  // Headers that are no map go on unchanged, for encodeHeaders to say what is wrong.
  if (options.timeoutMs === undefined || (given !== undefined && (typeof given !== 'object' || given === null || Array.isArray(given)))) {
    return options.headers;
  }
  const timeoutMs = positiveMilliseconds(options.timeoutMs, 'timeoutMs', where);
  if (spec.headers === undefined) {
    throw new DeclarationError(
      `${where}: the timeoutMs option travels in the header "${TIMEOUT_HEADER}", and table "${spec.qualifiedName}" has no headers column; declare headers in defineTable, or set timeoutMs on the subscription instead`,
    );
  }
  return { ...options.headers, [TIMEOUT_HEADER]: String(timeoutMs) };
}

/** An insert's failure as it is, or as the `SchemaError` that says what to declare. */
function asSchemaError(error: unknown, spec: TableSpec): unknown {
  return undeclaredJsonPayloadError(error, spec) ?? error;
}

/**
 * Postgres: a payload written as bytes into a `jsonb` column, which reads binary input as its own
 * format and refuses JSON text with "unsupported jsonb version number 123" (the `{`). As a
 * `SchemaError` naming the declaration that fixes it; undefined for any other failure.
 */
function undeclaredJsonPayloadError(error: unknown, spec: TableSpec): SchemaError | undefined {
  if (!(error instanceof StatementError) || spec.payloadHolds !== 'bytes' || spec.payload === undefined) return undefined;
  const cause = error.cause instanceof Error ? error.cause.message : '';
  // Raised as an internal error (SQLSTATE XX000): the message is all that tells it.
  if (!/unsupported jsonb version number/.test(cause)) return undefined;
  return new SchemaError({
    table: spec.qualifiedName,
    statement: error.statement,
    message: `table "${spec.qualifiedName}": payload column "${spec.payload}" is jsonb, which takes JSON text, not the bytes tablequeue writes by default; declare payload: { column: '${spec.payload}', json: true } in defineTable`,
    cause: error,
  });
}
