import { servesRowsInWork } from '../broker/in-work-index-check.js';
import { openDialect } from '../broker/open-dialect.js';
import { decodeHeaders } from '../delivery/codec.js';
import type { Dialect, DeadLetterTarget, TableColumns } from '../dialect/dialect.js';
import {
  COUNT_COLUMNS,
  createInspectionStatements,
  type InspectionStatements,
  type RequeueSteps,
} from '../dialect/inspection-statements.js';
import { indexColumnsOf } from '../dialect/index-read.js';
import { LAST_ERROR_HEADER } from '../dialect/last-error-header.js';
import { withTransaction } from '../driver/connection-scope.js';
import { createDriver, refusePoolerOffPostgres } from '../driver/create-driver.js';
import type { Connection, Driver, PoolerMode } from '../driver/driver.js';
import { DeclarationError, SchemaError, StatementError, UnsupportedError } from '../errors.js';
import { bindStatement, type ParamValues } from '../statement.js';
import { parseDeadLetterTable, createTableSpec, type TableDeclaration, type TableSpec } from '../table/table-spec.js';
import type { DeadLetterLocation, GroupCounts, InWorkIndexState, PeekedRow, QueueInspector, TableInspection } from './inspection.js';
import { DedupeWindowPruner } from '../retention/dedupe-window-pruner.js';
import { Pruner } from '../retention/pruner.js';

/**
 * The column of each role. A name given must exist in the table; `null` says the table has no
 * such column; a role left out takes `tablequeue init`'s name when the table has that column.
 */
export interface InspectorColumnNames {
  readonly id?: string;
  readonly group?: string | null;
  readonly priority?: string | null;
  readonly retryAfter?: string | null;
  readonly attempt?: string | null;
  readonly processedAt?: string | null;
  readonly lockedUntil?: string | null;
  readonly headers?: string | null;
  readonly payload?: string | null;
}

export interface QueueInspectorOptions {
  /** A URL (`postgres://…`, `mysql://…`, `mariadb://…`, `sqlite:…`), or an open `Driver` the caller keeps and closes. */
  readonly database: string | Driver;
  readonly table: string;
  /** The schema (PostgreSQL) or database (MySQL) of the table and of a dead-letter table without one. */
  readonly schema?: string;
  /** Where the table's dead letters are; without it `deadLettered` is 0 and requeue refuses. */
  readonly deadLetter?: DeadLetterLocation;
  /** Column names where they differ from `tablequeue init`'s. */
  readonly columns?: InspectorColumnNames;
  /**
   * PostgreSQL through a pooler opened from a URL: its mode, as the broker's `pooler` option
   * declares it. Without it the inspector looks for one; a driver passed as `database` keeps its own.
   */
  readonly pooler?: PoolerMode;
}

/** `tablequeue init`'s column names, which the inspector looks for by default. */
export const INIT_COLUMN_NAMES = Object.freeze({
  id: 'id',
  group: 'queue',
  priority: 'priority',
  retryAfter: 'retry_after',
  attempt: 'attempt',
  processedAt: 'processed_at',
  lockedUntil: 'locked_until',
  headers: 'headers',
  payload: 'payload',
});

/** The header a dead-letter move records the last handler error in, which `peek` shows as `lastError`. */
export { LAST_ERROR_HEADER };

const DEFAULT_PEEK_LIMIT = 10;

export interface RequeueProgress {
  /** Called after each row moved by id, with the rows done and the rows asked for. */
  readonly onProgress?: (doneCount: number, totalCount: number) => void;
  /** Called for each id given that is not a dead letter, so nothing moved for it. */
  readonly onNotMoved?: (id: string) => void;
}

/**
 * Opens an inspector on one queue table: checks the server, reads the table's columns (a
 * missing table or named column is a `SchemaError` naming it) and maps the roles.
 */
export async function openQueueInspector(options: QueueInspectorOptions): Promise<TableQueueInspector> {
  if (options === null || typeof options !== 'object') {
    throw new DeclarationError('openQueueInspector needs { database, table }');
  }
  const ownsDriver = typeof options.database === 'string';
  const driver = typeof options.database === 'string' ? createDriver(options.database, { poolSize: 2, pooler: options.pooler }) : options.database;
  try {
    refusePoolerOffPostgres(driver, options.pooler, 'pooler');
    if (ownsDriver) await driver.open();
    const dialect = await openDialect(driver);
    const statements = createInspectionStatements(dialect.name);
    const probeSpec = createTableSpec({ table: options.table, id: options.columns?.id ?? INIT_COLUMN_NAMES.id, ...schemaOf(options.schema) });
    const columns = await readColumns(driver, dialect, probeSpec);
    const spec = createTableSpec(declarationFor(options, columns));
    const deadLetter = await resolveDeadLetter(driver, dialect, spec, options);
    return new TableQueueInspector({ driver, ownsDriver, dialect, statements, spec, columns, deadLetter });
  } catch (error) {
    if (ownsDriver) await driver.close();
    throw error;
  }
}

interface ResolvedDeadLetter {
  readonly location: DeadLetterLocation;
  /** The dead-letter table as a queue table of the same roles; undefined for a group. */
  readonly tableSpec: TableSpec | undefined;
  readonly target: DeadLetterTarget;
}

interface InspectorParts {
  readonly driver: Driver;
  readonly ownsDriver: boolean;
  readonly dialect: Dialect;
  readonly statements: InspectionStatements;
  readonly spec: TableSpec;
  readonly columns: TableColumns;
  readonly deadLetter: ResolvedDeadLetter | undefined;
}

export class TableQueueInspector implements QueueInspector {
  readonly #parts: InspectorParts;
  #isClosed = false;

  constructor(parts: InspectorParts) {
    this.#parts = parts;
  }

  /** The table's roles as found: which column plays which role. */
  get spec(): TableSpec {
    return this.#parts.spec;
  }

  get deadLetter(): DeadLetterLocation | undefined {
    return this.#parts.deadLetter?.location;
  }

  /**
   * The table's retention by hand (`tablequeue prune`): the same batches `broker.retain` runs, on
   * this inspector's pool, with where its dead letters are (undefined without a location).
   */
  pruner(): { readonly pruner: Pruner; readonly deadLetters: DeadLetterTarget | undefined } {
    const { driver, dialect, spec, deadLetter } = this.#parts;
    return { pruner: new Pruner({ driver, dialect, spec }), deadLetters: deadLetter?.target };
  }

  /** What deletes the table's passed `dedupeForMs` windows from `windowsTable` (`tablequeue prune --dedupe-windows`). */
  dedupeWindowPruner(windowsTable: string): DedupeWindowPruner {
    const { driver, dialect, spec } = this.#parts;
    return new DedupeWindowPruner({ driver, dialect, windowsTable, queueTable: spec.qualifiedName });
  }

  async inspect(): Promise<TableInspection> {
    const { driver, statements, spec, deadLetter } = this.#parts;
    const readAt = new Date();
    const deadLetterGroup = deadLetter?.location.kind === 'group' ? deadLetter.location.group : undefined;
    const counts = statements.counts(spec, { deadLetterGroup: deadLetterGroup !== undefined });
    const rows = (await driver.execute(bindStatement(counts, { now: readAt, deadLetterGroup }))).rows;
    const groups = rows.map((row) => groupCountsOf(row, spec, readAt));

    // A dead-letter table keeps the group each row came from: its rows count toward that group.
    if (deadLetter?.tableSpec !== undefined) {
      const deadByGroup = new Map<string | null, number>();
      const counted = await driver.execute(bindStatement(statements.counts(deadLetter.tableSpec, { deadLetterGroup: false }), { now: readAt }));
      for (const row of counted.rows) {
        const group = spec.group === undefined ? null : String(row[COUNT_COLUMNS.group]);
        deadByGroup.set(group, Number(row[COUNT_COLUMNS.total]));
      }
      for (const [index, counts] of groups.entries()) {
        groups[index] = { ...counts, deadLettered: (counts.deadLettered ?? 0) + (deadByGroup.get(counts.group) ?? 0) };
      }
      for (const [group, count] of deadByGroup) {
        if (count > 0 && !groups.some((counts) => counts.group === group)) groups.push(emptyGroup(group, count));
      }
      groups.sort((a, b) => String(a.group).localeCompare(String(b.group)));
    }
    const deadLettered = groups.reduce((sum, counts) => sum + (counts.deadLettered ?? 0), 0);
    return {
      table: spec.qualifiedName,
      groups,
      deadLettered,
      readAt,
      ...(deadLetter === undefined ? {} : { deadLetter: deadLetter.location }),
    };
  }

  async readInWorkIndex(): Promise<InWorkIndexState | null> {
    const { driver, dialect, spec } = this.#parts;
    const statements = dialect.schema.indexes;
    if (statements === undefined || spec.lockedUntil === undefined) return null;
    const { rows } = await driver.execute(bindStatement(statements.read(spec), {}));
    return { isPresent: servesRowsInWork(spec, indexColumnsOf(rows)), createIndexSql: statements.renderInWorkIndex(spec) };
  }

  async peek(options: { group?: string; deadLetters?: boolean; limit?: number } = {}): Promise<PeekedRow[]> {
    const { driver, statements, spec, columns, deadLetter } = this.#parts;
    const limit = options.limit ?? DEFAULT_PEEK_LIMIT;
    if (!Number.isInteger(limit) || limit < 1) throw new DeclarationError(`peek limit must be a whole number of at least 1; got ${limit}`);
    let table = spec;
    let group = options.group;
    if (options.deadLetters === true) {
      const location = this.#requireDeadLetter('peek at dead letters');
      if (location.tableSpec !== undefined) table = location.tableSpec;
      else if (location.location.kind === 'group') group = location.location.group;
    }
    if (group !== undefined) this.#requireGroupColumn('peek by group');
    // Without a group or the dead letters asked for, the queue's own rows: dead letters apart.
    const deadLetterGroup = deadLetter?.location.kind === 'group' ? deadLetter.location.group : undefined;
    const isLiveRows = group === undefined && options.deadLetters !== true;
    const statement = statements.peek(table, columns, {
      byGroup: group !== undefined,
      ...(isLiveRows ? { withoutDeadLetters: { deadLetterGroup: deadLetterGroup !== undefined } } : {}),
    });
    const result = await driver.execute(bindStatement(statement, { group, limit, deadLetterGroup }));
    return result.rows.map((row) => peekedRowOf(row, table));
  }

  async requeue(options: { ids?: readonly string[]; toGroup?: string } & RequeueProgress): Promise<number> {
    const deadLetter = this.#requireDeadLetter('requeue');
    const { spec, statements, columns } = this.#parts;
    const ids = options.ids;
    if (ids !== undefined && ids.length === 0) return 0;
    if (options.toGroup !== undefined) this.#requireGroupColumn('requeue into a group');

    let steps: RequeueSteps;
    let values: ParamValues;
    const now = new Date();
    if (deadLetter.target.kind === 'group') {
      if (options.toGroup === undefined) {
        throw new DeclarationError(
          `dead letters of table "${spec.qualifiedName}" are in group "${deadLetter.target.group}", which does not remember their queue; name the group to move them to (toGroup, --to-group)`,
        );
      }
      steps = statements.requeueFromGroup(spec, { byId: ids !== undefined });
      values = { destination: options.toGroup, group: deadLetter.target.group, now };
    } else {
      steps = statements.requeueFromTable(spec, columns, deadLetter.target, {
        byId: ids !== undefined,
        toGroup: options.toGroup !== undefined,
      });
      values = { destination: options.toGroup, now };
    }
    return this.#inTransaction(async (connection) => {
      const runSteps = async (stepValues: ParamValues): Promise<number> => {
        let moved = 0;
        for (const [index, statement] of steps.statements.entries()) {
          const result = await connection.execute(bindStatement(statement, stepValues));
          if (index === steps.countedIndex) moved = result.affectedRows;
        }
        return moved;
      };
      if (ids === undefined) return runSteps(values);
      let moved = 0;
      for (const [index, id] of ids.entries()) {
        const movedOfId = await runSteps({ ...values, id });
        if (movedOfId === 0) options.onNotMoved?.(id);
        moved += movedOfId;
        options.onProgress?.(index + 1, ids.length);
      }
      return moved;
    });
  }

  async purge(options: { group?: string } = {}): Promise<number> {
    const { driver, statements, spec } = this.#parts;
    if (options.group !== undefined) this.#requireGroupColumn('purge by group');
    const statement = statements.purge(spec, { byGroup: options.group !== undefined });
    return (await driver.execute(bindStatement(statement, { group: options.group }))).affectedRows;
  }

  async close(): Promise<void> {
    if (this.#isClosed) return;
    this.#isClosed = true;
    if (this.#parts.ownsDriver) await this.#parts.driver.close();
  }

  #inTransaction<T>(work: (connection: Connection) => Promise<T>): Promise<T> {
    const { driver, dialect } = this.#parts;
    const { session } = dialect;
    // One writer (SQLite): take the write lock at begin, so the copy and the delete see one state.
    const statements = { begin: session.begin({ sqliteBegin: 'immediate' }), commit: session.commit(), rollback: session.rollback() };
    return withTransaction(driver, statements, (_transaction, connection) => work(connection));
  }

  #requireDeadLetter(what: string): ResolvedDeadLetter {
    const deadLetter = this.#parts.deadLetter;
    if (deadLetter === undefined) {
      throw new DeclarationError(
        `${what} needs to know where the dead letters of table "${this.#parts.spec.qualifiedName}" are; pass deadLetter (--dead-letter-group or --dead-letter-table)`,
      );
    }
    return deadLetter;
  }

  #requireGroupColumn(what: string): void {
    if (this.#parts.spec.group === undefined) {
      throw new DeclarationError(
        `table "${this.#parts.spec.qualifiedName}" has no group column, so ${what} is not possible; name the column (columns.group, --column group=NAME) if it has another name`,
      );
    }
  }
}

function schemaOf(schema: string | undefined): { schema?: string } {
  return schema === undefined ? {} : { schema };
}

async function readColumns(driver: Driver, dialect: Dialect, spec: TableSpec): Promise<TableColumns> {
  checkNames(dialect, spec);
  const probe = dialect.schema.probeColumns(spec);
  try {
    return (await driver.execute(bindStatement(probe, {}))).columns;
  } catch (error) {
    if (!(error instanceof StatementError)) throw error;
    const reason = error.cause instanceof Error ? error.cause.message : error.message;
    throw new SchemaError({
      table: spec.qualifiedName,
      statement: probe.name,
      message: `table "${spec.qualifiedName}" cannot be read on ${driver.description} (${reason}); check the name and schema, or create it with tablequeue init`,
      cause: error,
    });
  }
}

/**
 * The database's identifier limits (Postgres would shorten a long name and read another table).
 * A claim form the database lacks does not matter here: the inspector claims nothing.
 */
function checkNames(dialect: Dialect, spec: TableSpec): void {
  try {
    dialect.validateTable(spec);
  } catch (error) {
    if (!(error instanceof UnsupportedError)) throw error;
  }
}

type RoleName = keyof typeof INIT_COLUMN_NAMES;

/** Each role: the name given (which must exist), else init's name when the table has it. */
function declarationFor(options: QueueInspectorOptions, columns: TableColumns): TableDeclaration {
  const qualifiedName = options.schema === undefined ? options.table : `${options.schema}.${options.table}`;
  const given = options.columns ?? {};
  const columnOf = (role: RoleName): string | undefined => {
    const named = given[role];
    if (named === null) return undefined;
    if (named !== undefined) {
      if (!columns.includes(named)) {
        throw new SchemaError({
          table: qualifiedName,
          statement: 'schema.probeColumns',
          message: `table "${qualifiedName}" has no column "${named}" (named as its ${role} column); found: ${columns.join(', ')}`,
        });
      }
      return named;
    }
    return columns.includes(INIT_COLUMN_NAMES[role]) ? INIT_COLUMN_NAMES[role] : undefined;
  };
  const id = columnOf('id');
  if (id === undefined) {
    throw new SchemaError({
      table: qualifiedName,
      statement: 'schema.probeColumns',
      message: `table "${qualifiedName}" has no column "${INIT_COLUMN_NAMES.id}"; name its id column (columns.id, --column id=NAME); found: ${columns.join(', ')}`,
    });
  }
  const declaration: TableDeclaration = { table: options.table, id, ...schemaOf(options.schema) };
  const group = columnOf('group');
  if (group !== undefined) declaration.group = group;
  for (const role of ['priority', 'retryAfter', 'attempt', 'processedAt', 'lockedUntil', 'headers', 'payload'] as const) {
    const column = columnOf(role);
    if (column !== undefined) declaration[role] = column;
  }
  return declaration;
}

async function resolveDeadLetter(
  driver: Driver,
  dialect: Dialect,
  spec: TableSpec,
  options: QueueInspectorOptions,
): Promise<ResolvedDeadLetter | undefined> {
  const location = options.deadLetter;
  if (location === undefined) return undefined;
  if (location.kind === 'group') {
    if (spec.group === undefined) {
      throw new DeclarationError(
        `table "${spec.qualifiedName}" has no group column, so its dead letters cannot be in group "${location.group}"; name the dead-letter table instead`,
      );
    }
    return { location, tableSpec: undefined, target: { kind: 'group', group: location.group } };
  }
  if (location.kind !== 'table') throw new DeclarationError('deadLetter is { kind: "group", group } or { kind: "table", table }');
  const parsed = parseDeadLetterTable(location.table, `table "${spec.qualifiedName}"`);
  const schema = parsed.schema ?? spec.schema;
  const tableSpec = createTableSpec({ ...specDeclaration(spec), table: parsed.name, ...schemaOf(schema) });
  await readColumns(driver, dialect, tableSpec);
  return { location, tableSpec, target: { kind: 'table', schema, name: parsed.name } };
}

/** The roles of a spec as a declaration, to describe a dead-letter table of the same columns. */
function specDeclaration(spec: TableSpec): TableDeclaration {
  const declaration: TableDeclaration = { table: spec.name, id: spec.id.column };
  if (spec.group !== undefined) declaration.group = spec.group.column;
  for (const role of ['priority', 'retryAfter', 'attempt', 'processedAt', 'lockedUntil', 'headers', 'payload'] as const) {
    const column = spec[role];
    if (column !== undefined) declaration[role] = column;
  }
  return declaration;
}

function emptyGroup(group: string | null, deadLettered: number): GroupCounts {
  return { group, ready: 0, delayed: 0, inWork: 0, processed: 0, oldestReadyAgeSeconds: null, total: 0, deadLettered };
}

function groupCountsOf(row: Record<string, unknown>, spec: TableSpec, readAt: Date): GroupCounts {
  const oldestReadyAt = readInstant(row[COUNT_COLUMNS.oldestReadyAt]);
  return {
    group: spec.group === undefined ? null : String(row[COUNT_COLUMNS.group]),
    ready: Number(row[COUNT_COLUMNS.ready]),
    delayed: Number(row[COUNT_COLUMNS.delayed]),
    inWork: Number(row[COUNT_COLUMNS.inWork]),
    processed: Number(row[COUNT_COLUMNS.processed]),
    deadLettered: Number(row[COUNT_COLUMNS.deadLettered]),
    oldestReadyAgeSeconds:
      oldestReadyAt === null ? null : Math.max(0, Math.floor((readAt.getTime() - oldestReadyAt.getTime()) / 1000)),
    total: Number(row[COUNT_COLUMNS.total]),
  };
}

function peekedRowOf(row: Record<string, unknown>, spec: TableSpec): PeekedRow {
  const headers = spec.headers === undefined ? {} : readHeaders(row[spec.headers]);
  const attempt = spec.attempt === undefined ? null : Number(row[spec.attempt]);
  return {
    id: String(row[spec.id.column]),
    group: spec.group === undefined ? null : String(row[spec.group.column]),
    attempt,
    attemptsMade: attempt === null ? null : Math.max(0, attempt - 1),
    retryAfter: spec.retryAfter === undefined ? null : readInstant(row[spec.retryAfter]),
    lockedUntil: spec.lockedUntil === undefined ? null : readInstant(row[spec.lockedUntil]),
    headers,
    payload: spec.payload === undefined ? null : decodePayload(row[spec.payload]),
    lastError: headers[LAST_ERROR_HEADER] ?? null,
  };
}

/** Headers that are not a JSON object are shown as none rather than hiding the row. */
function readHeaders(value: unknown): Record<string, string> {
  try {
    return decodeHeaders(value);
  } catch {
    return {};
  }
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** JSON when it parses, the text when it is UTF-8, else the bytes as base64 text. */
function decodePayload(value: unknown): unknown {
  if (value === null || value === undefined) return null;
  let text: string;
  if (value instanceof Uint8Array) {
    try {
      text = utf8.decode(value);
    } catch {
      return `base64:${Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('base64')}`;
    }
  } else if (typeof value === 'string') {
    text = value;
  } else {
    return value;
  }
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

/**
 * A time column as the drivers return it: a `Date` (pg; mysql2 read as UTC), or SQLite's
 * fixed-width UTC text.
 */
export function readInstant(value: unknown): Date | null {
  if (value === null || value === undefined) return null;
  if (value instanceof Date) return Number.isNaN(value.getTime()) ? null : value;
  const date = new Date(String(value));
  return Number.isNaN(date.getTime()) ? null : date;
}
