import { DeclarationError } from '../errors.js';
import { parseQualifiedName, validateIdentifier } from './identifier.js';

export type ClaimFormName = 'rowLock' | 'lease' | 'advisory';
export type IsolationLevel = 'read uncommitted' | 'read committed' | 'repeatable read' | 'serializable';
export type SqliteBeginMode = 'deferred' | 'immediate' | 'exclusive';
export type ClockName = 'host' | 'database';

export const ISOLATION_LEVELS: readonly IsolationLevel[] = [
  'read uncommitted',
  'read committed',
  'repeatable read',
  'serializable',
];
export const SQLITE_BEGIN_MODES: readonly SqliteBeginMode[] = ['deferred', 'immediate', 'exclusive'];

/** One piece of an advisory key template: literal text or a column's value. */
export type KeyPart = { readonly literal: string } | { readonly column: string };

/**
 * The validated description of a queue table: which column plays which role. Pure data; every
 * statement is rendered from it. Absent roles are `undefined`.
 */
export interface TableSpec {
  readonly schema: string | undefined;
  readonly name: string;
  /** `schema.name` or `name`, unquoted: for messages, channel names and lock keys. */
  readonly qualifiedName: string;
  readonly id: { readonly column: string; readonly generated: boolean };
  readonly group: { readonly column: string; readonly fifo: boolean } | undefined;
  readonly priority: string | undefined;
  readonly partitionKey: string | undefined;
  readonly retryAfter: string | undefined;
  readonly attempt: string | undefined;
  readonly processedAt: string | undefined;
  readonly lockedUntil: string | undefined;
  readonly advisoryLock: readonly KeyPart[] | undefined;
  readonly headers: string | undefined;
  readonly payload: string | undefined;
  /**
   * What the payload column holds: the payload's bytes (`bytea`, BLOB), or its JSON text in a
   * column of the database's JSON type (`payload: { column, json: true }`), which takes text, not
   * bytes: PostgreSQL's `jsonb` refuses bytes outright.
   */
  readonly payloadHolds: 'bytes' | 'json';
  /**
   * Unique messages: the key a publish may give (`dedupeKey`), unique per group among the rows
   * that hold one. Settlements that keep a row (processedAt, dead letters) clear it.
   */
  readonly dedupeKey: string | undefined;
  readonly isolation: IsolationLevel | undefined;
  readonly sqliteBegin: SqliteBeginMode | undefined;
  readonly clock: ClockName;
  readonly form: ClaimFormName;
  /** Statements of the service's own that replace the library's for this table; undefined without. */
  readonly statements: ServiceStatements | undefined;
}

/**
 * SQL text of the service's own that replaces single statements of the library for one table,
 * with named parameters (`:id`, `:group`, `:now`…). Settlements may be one statement or several,
 * run in order in the settlement's transaction. docs/service-statements.md says what each one
 * binds, must return and must do, and which combinations `start()` refuses.
 */
export interface ServiceStatements {
  /** Ids of claimable rows, at most `:limit`; tablequeue takes (locks or leases) and fetches them. */
  readonly claim?: string;
  /** The rows of claimed ids (`:ids` on PostgreSQL, or one row by `:id`), with any columns the handler reads. */
  readonly fetch?: string;
  readonly ack?: string | readonly string[];
  readonly drop?: string | readonly string[];
  readonly retry?: string | readonly string[];
  readonly retryAfter?: string | readonly string[];
  readonly deadLetter?: string | readonly string[];
  /** Lease form: the renewal, `locked_until = :lockedUntil` only while it is `:held`. */
  readonly extend?: string;
  /** Advisory lock form: takes `:key` for the session without waiting; one row, true or 1 when taken. */
  readonly lock?: string;
  /** Advisory lock form: lets `:key` go; one row, true or 1 when the session held it. */
  readonly unlock?: string;
}

/** The statements a table may replace, in the order documentation lists them. */
export const SERVICE_STATEMENT_NAMES = [
  'claim',
  'fetch',
  'ack',
  'drop',
  'retry',
  'retryAfter',
  'deadLetter',
  'extend',
  'lock',
  'unlock',
] as const satisfies readonly (keyof ServiceStatements)[];

export type ServiceStatementName = (typeof SERVICE_STATEMENT_NAMES)[number];

/** The settlements, which may each be several statements. */
const SETTLEMENT_STATEMENT_NAMES: ReadonlySet<string> = new Set(['ack', 'drop', 'retry', 'retryAfter', 'deadLetter']);

/** What `defineTable` accepts. Only `table` and `id` are required. */
export interface TableDeclaration {
  table: string;
  schema?: string;
  id: string | { column: string; generated?: boolean };
  group?: string | { column: string; fifo?: boolean };
  priority?: string;
  partitionKey?: string;
  retryAfter?: string;
  attempt?: string;
  processedAt?: string;
  lockedUntil?: string;
  advisoryLock?: string;
  headers?: string;
  /** The payload's column; `{ column, json: true }` for a column of the database's JSON type (PostgreSQL `jsonb` or `json`, MySQL `JSON`). */
  payload?: string | { column: string; json?: boolean };
  dedupeKey?: string;
  isolation?: IsolationLevel;
  sqliteBegin?: SqliteBeginMode;
  clock?: ClockName;
  /** Statements of the service's own that replace the library's for this table (see `ServiceStatements`). */
  statements?: ServiceStatements;
}

/** The roles a declared column can play besides the id and the group, in the order statements list them. */
export const COLUMN_ROLES = [
  'priority',
  'partitionKey',
  'retryAfter',
  'attempt',
  'processedAt',
  'lockedUntil',
  'headers',
  'payload',
  'dedupeKey',
] as const;

const DECLARATION_KEYS: ReadonlySet<string> = new Set([
  'table',
  'schema',
  'id',
  'group',
  ...COLUMN_ROLES,
  'advisoryLock',
  'isolation',
  'sqliteBegin',
  'clock',
  'statements',
]);

/** Validates a declaration and returns the table spec; every problem is a `DeclarationError`. */
export function createTableSpec(declaration: TableDeclaration): TableSpec {
  if (declaration === null || typeof declaration !== 'object') {
    throw new DeclarationError('defineTable needs an object such as { table: "jobs", id: "id" }');
  }
  for (const key of Object.keys(declaration)) {
    if (!DECLARATION_KEYS.has(key)) {
      throw new DeclarationError(
        `defineTable: unknown role "${key}"; the roles are ${[...DECLARATION_KEYS].join(', ')}`,
      );
    }
  }
  const name = validateIdentifier(declaration.table, 'table name');
  const schema =
    declaration.schema === undefined ? undefined : validateIdentifier(declaration.schema, `schema of table "${name}"`);
  const qualifiedName = schema === undefined ? name : `${schema}.${name}`;
  const where = `table "${qualifiedName}"`;

  if (declaration.id === undefined) {
    throw new DeclarationError(`${where} needs an id column: defineTable({ table, id: "id" })`);
  }
  const id =
    typeof declaration.id === 'string'
      ? { column: validateIdentifier(declaration.id, `id column of ${where}`), generated: true }
      : {
          column: validateIdentifier(declaration.id?.column, `id column of ${where}`),
          generated: declaration.id.generated ?? true,
        };

  const group =
    declaration.group === undefined
      ? undefined
      : typeof declaration.group === 'string'
        ? { column: validateIdentifier(declaration.group, `group column of ${where}`), fifo: false }
        : {
            column: validateIdentifier(declaration.group?.column, `group column of ${where}`),
            fifo: declaration.group.fifo === true,
          };

  const roles: Partial<Record<(typeof COLUMN_ROLES)[number], string>> = {};
  for (const role of COLUMN_ROLES) {
    const value = declaration[role];
    const column = role === 'payload' && value !== null && typeof value === 'object' ? value.column : value;
    if (value !== undefined) roles[role] = validateIdentifier(column, `${role} column of ${where}`);
  }
  const payloadHolds = payloadHoldsOf(declaration.payload, where);

  if (roles.lockedUntil !== undefined && declaration.advisoryLock !== undefined) {
    throw new DeclarationError(
      `${where} declares both lockedUntil (lease form) and advisoryLock (advisory lock form); keep one`,
    );
  }
  const advisoryLock =
    declaration.advisoryLock === undefined ? undefined : parseKeyTemplate(declaration.advisoryLock, where);
  if (advisoryLock !== undefined && group?.fifo === true) {
    throw new DeclarationError(
      `${where}: FIFO groups cannot use the advisory lock form; put the group column in the key template instead`,
    );
  }

  const isolation = declaration.isolation;
  if (isolation !== undefined && !ISOLATION_LEVELS.includes(isolation)) {
    throw new DeclarationError(`${where}: isolation must be one of ${ISOLATION_LEVELS.join(', ')}`);
  }
  const sqliteBegin = declaration.sqliteBegin;
  if (sqliteBegin !== undefined && !SQLITE_BEGIN_MODES.includes(sqliteBegin)) {
    throw new DeclarationError(`${where}: sqliteBegin must be one of ${SQLITE_BEGIN_MODES.join(', ')}`);
  }
  const clock = declaration.clock ?? 'host';
  if (clock !== 'host' && clock !== 'database') {
    throw new DeclarationError(`${where}: clock must be "host" or "database"`);
  }
  if (clock === 'database' && roles.lockedUntil !== undefined) {
    throw new DeclarationError(
      `${where}: the lease form computes its token on the host, so it cannot use clock: "database"`,
    );
  }

  const spec: TableSpec = {
    schema,
    name,
    qualifiedName,
    id,
    group,
    priority: roles.priority,
    partitionKey: roles.partitionKey,
    retryAfter: roles.retryAfter,
    attempt: roles.attempt,
    processedAt: roles.processedAt,
    lockedUntil: roles.lockedUntil,
    advisoryLock,
    headers: roles.headers,
    payload: roles.payload,
    payloadHolds,
    dedupeKey: roles.dedupeKey,
    isolation,
    sqliteBegin,
    clock,
    form: roles.lockedUntil !== undefined ? 'lease' : advisoryLock !== undefined ? 'advisory' : 'rowLock',
    statements: declaration.statements === undefined ? undefined : parseServiceStatements(declaration.statements, where),
  };
  rejectSharedColumns(spec, where);
  return Object.freeze(spec);
}

/** `payload: { column, json }`: whether the column holds JSON text rather than bytes. */
function payloadHoldsOf(payload: TableDeclaration['payload'], where: string): TableSpec['payloadHolds'] {
  if (payload === null || typeof payload !== 'object') return 'bytes';
  const unknown = Object.keys(payload).filter((key) => key !== 'column' && key !== 'json');
  if (unknown.length > 0 || (payload.json !== undefined && typeof payload.json !== 'boolean')) {
    throw new DeclarationError(`${where}: payload takes a column name or { column, json: true }, not ${JSON.stringify(payload)}`);
  }
  return payload.json === true ? 'json' : 'bytes';
}

/** Parses `jobs-{id}` into literal and column parts; a template must name at least one column. */
export function parseKeyTemplate(template: unknown, where: string): readonly KeyPart[] {
  if (typeof template !== 'string') {
    throw new DeclarationError(`${where}: advisoryLock must be a key template string such as "jobs-{id}"`);
  }
  const parts: KeyPart[] = [];
  const pattern = /\{([^{}]*)\}/g;
  let last = 0;
  for (const match of template.matchAll(pattern)) {
    if (match.index > last) parts.push({ literal: template.slice(last, match.index) });
    parts.push({ column: validateIdentifier(match[1], `column in advisoryLock template of ${where}`) });
    last = match.index + match[0].length;
  }
  if (last < template.length) parts.push({ literal: template.slice(last) });
  if (parts.some((part) => 'literal' in part && /[{}]/.test(part.literal))) {
    throw new DeclarationError(`${where}: advisoryLock template ${JSON.stringify(template)} has an unmatched brace`);
  }
  // The literal text becomes SQL text literals: MySQL reads a backslash in one as an escape, and
  // no database's SQL text can carry a NUL character.
  if (parts.some((part) => 'literal' in part && /[\\\0]/.test(part.literal))) {
    throw new DeclarationError(
      `${where}: advisoryLock template ${JSON.stringify(template)} contains a backslash or a NUL character; write the key with other characters`,
    );
  }
  if (!parts.some((part) => 'column' in part)) {
    throw new DeclarationError(
      `${where}: advisoryLock template ${JSON.stringify(template)} names no column; write one as {column}, for example "jobs-{id}"`,
    );
  }
  return Object.freeze(parts);
}

/**
 * The statements' shape: known names, each SQL text, settlements one text or a list of them. What
 * they bind and which combinations a form and a database can keep are checked at `start()`.
 */
function parseServiceStatements(statements: unknown, where: string): ServiceStatements {
  if (statements === null || typeof statements !== 'object' || Array.isArray(statements)) {
    throw new DeclarationError(`${where}: statements must be an object such as { ack: 'DELETE FROM jobs WHERE id = :id' }`);
  }
  const parsed: Record<string, string | readonly string[]> = {};
  for (const [name, text] of Object.entries(statements)) {
    if (!(SERVICE_STATEMENT_NAMES as readonly string[]).includes(name)) {
      throw new DeclarationError(`${where}: statements.${name} is not a statement a table can replace; they are ${SERVICE_STATEMENT_NAMES.join(', ')}`);
    }
    if (text === undefined) continue;
    const isSettlement = SETTLEMENT_STATEMENT_NAMES.has(name);
    const texts: unknown[] = isSettlement && Array.isArray(text) ? text : [text];
    if (texts.length === 0 || texts.some((one) => typeof one !== 'string' || one.trim() === '')) {
      const expected = isSettlement ? 'SQL text, or a list of SQL texts run in order' : 'SQL text';
      throw new DeclarationError(`${where}: statements.${name} must be ${expected}, got ${JSON.stringify(text)}`);
    }
    parsed[name] = Array.isArray(text) ? Object.freeze([...(text as string[])]) : (text as string);
  }
  return Object.freeze(parsed) as ServiceStatements;
}

/** Two roles on one column would make statements write a column twice. */
function rejectSharedColumns(spec: TableSpec, where: string): void {
  const owners = new Map<string, string>();
  const claim = (role: string, column: string | undefined) => {
    if (column === undefined) return;
    const owner = owners.get(column);
    if (owner !== undefined) {
      throw new DeclarationError(`${where}: column "${column}" is declared as both ${owner} and ${role}`);
    }
    owners.set(column, role);
  };
  claim('id', spec.id.column);
  claim('group', spec.group?.column);
  for (const role of COLUMN_ROLES) claim(role, spec[role]);
}

/** Every column a role names, in a stable order (id first). */
export function roleColumns(spec: TableSpec): string[] {
  const columns = [spec.id.column];
  if (spec.group) columns.push(spec.group.column);
  for (const role of COLUMN_ROLES) {
    const column = spec[role];
    if (column !== undefined) columns.push(column);
  }
  for (const part of spec.advisoryLock ?? []) {
    if ('column' in part && !columns.includes(part.column)) columns.push(part.column);
  }
  return columns;
}

/** A dead-letter destination table, validated like the queue table itself. */
export function parseDeadLetterTable(value: string, where: string): { schema: string | undefined; name: string } {
  const parsed = parseQualifiedName(value, `dead-letter table of ${where}`);
  return { schema: parsed.schema, name: parsed.name };
}
