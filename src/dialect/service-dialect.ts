/**
 * A service's own dialect as the broker takes it (`new Broker({ dialect })`): its interface
 * version and members checked when the broker is made, and a copy whose every method turns a
 * throw into a typed error naming the method and the dialect. That copy's `validateTable`, which
 * every subscription and relay calls when it opens, also renders each statement of the table's
 * form with the dialect and with the built-in it follows, so a statement it cannot render fails
 * `start()` as a `StatementError` instead of a claim or a publish later.
 */
import { DeclarationError, DialectVersionError, QueueError, ServerVersionError, StatementError, UnsupportedError } from '../errors.js';
import { roleColumns, type TableSpec } from '../table/table-spec.js';
import { createDialect } from './create-dialect.js';
import { compareRendering, reasonOf } from './dialect-comparison.js';
import { DIALECT_GROUPS, DIALECT_MEMBERS, dialectRenderings } from './dialect-renderings.js';
import { DIALECT_INTERFACE_VERSION, type BuiltInDialectName, type Dialect, type DialectName } from './dialect.js';

const BUILT_IN_NAMES: readonly BuiltInDialectName[] = ['postgres', 'mysql', 'mariadb', 'sqlite'];

/** The protocol each built-in speaks. */
export function protocolOf(name: BuiltInDialectName): DialectName {
  return name === 'mariadb' ? 'mysql' : name;
}

/**
 * Checks what can be checked before a database is open: the interface version (a
 * `DialectVersionError`), then the members (`DeclarationError` naming each one missing), and
 * returns the guarded copy the broker uses.
 */
export function acceptServiceDialect(given: unknown): Dialect {
  if (given === null || typeof given !== 'object') {
    throw new DeclarationError(
      `new Broker: dialect must be a Dialect object, such as defineDialect({ basedOn: 'postgres', … }) or builtInDialect('postgres'); got ${given === null ? 'null' : typeof given}`,
    );
  }
  const dialect = given as Dialect;
  const label = typeof dialect.label === 'string' && dialect.label !== '' ? dialect.label : undefined;
  const named = label === undefined ? 'the dialect' : `dialect "${label}"`;
  checkInterfaceVersion(dialect, named);
  const problems = memberProblems(dialect);
  if (label === undefined) problems.unshift('label (a name for errors) is missing');
  if (problems.length > 0) {
    throw new DeclarationError(
      `new Broker: ${named} is not a complete Dialect: ${problems.join('; ')}. defineDialect({ basedOn, … }) keeps every statement of the built-in it extends that the dialect does not override`,
    );
  }
  return guarded(dialect, createDialect(dialect.basedOn));
}

/** At start: the dialect speaks the protocol of the database the driver opened. */
export function checkDialectProtocol(dialect: Dialect, database: DialectName, description: string): void {
  if (dialect.name === database) return;
  throw new DeclarationError(
    `dialect "${dialect.label}" speaks ${dialect.name} (it is based on ${dialect.basedOn}), but the database is ${description}, which speaks ${database}; give the broker a dialect based on a ${database} one`,
  );
}

function checkInterfaceVersion(dialect: Dialect, named: string): void {
  const found: unknown = dialect.interfaceVersion;
  if (found === DIALECT_INTERFACE_VERSION) return;
  const required = DIALECT_INTERFACE_VERSION;
  const what =
    typeof found !== 'number'
      ? `${named} declares no interfaceVersion (found ${JSON.stringify(found) ?? String(found)})`
      : found > required
        ? `${named} was written for version ${found} of the Dialect interface, newer than this tablequeue's version ${required}: upgrade tablequeue, or bring the dialect back to version ${required}`
        : `${named} was written for version ${found} of the Dialect interface, and this tablequeue implements version ${required}`;
  throw new DialectVersionError({
    dialect: typeof dialect.label === 'string' ? dialect.label : String(dialect.label),
    found,
    required,
    message: `${what}; docs/dialects.md lists what each version changed: bring the dialect's statements up to date, run checkDialectStatements from tablequeue/testing on it, then declare interfaceVersion: ${required}`,
  });
}

function memberProblems(dialect: Dialect): string[] {
  const problems: string[] = [];
  if (!BUILT_IN_NAMES.includes(dialect.basedOn)) {
    problems.push(`basedOn must name the built-in dialect it follows (${BUILT_IN_NAMES.join(', ')}), got ${JSON.stringify(dialect.basedOn)}`);
    return problems;
  }
  if (dialect.name !== protocolOf(dialect.basedOn)) {
    problems.push(`name must be "${protocolOf(dialect.basedOn)}", the protocol of ${dialect.basedOn}, got ${JSON.stringify(dialect.name)}`);
  }
  const reference = createDialect(dialect.basedOn);
  const capabilities: unknown = dialect.capabilities;
  if (capabilities === null || typeof capabilities !== 'object') {
    problems.push('capabilities (an object) is missing');
  } else {
    for (const [key, expected] of Object.entries(reference.capabilities)) {
      const found: unknown = (capabilities as Record<string, unknown>)[key];
      if (Array.isArray(expected) ? !Array.isArray(found) : typeof found !== typeof expected) problems.push(`capabilities.${key} is missing`);
    }
  }
  for (const { path, optional } of DIALECT_MEMBERS) {
    const found = memberAt(dialect, path);
    if (typeof found === 'function' || (optional && found === undefined)) continue;
    problems.push(`${path} ${found === undefined ? 'is missing' : 'is not a function'}`);
  }
  const heldKeyOnInsert: unknown = dialect.dedupe?.heldKeyOnInsert;
  if (heldKeyOnInsert !== 'skipped' && heldKeyOnInsert !== 'error') problems.push('dedupe.heldKeyOnInsert must be "skipped" or "error"');
  const maxPayloadBytes: unknown = dialect.notify?.maxPayloadBytes;
  if (dialect.notify !== undefined && (typeof maxPayloadBytes !== 'number' || !Number.isInteger(maxPayloadBytes) || maxPayloadBytes < 1)) {
    problems.push('notify.maxPayloadBytes must be a whole number of bytes');
  }
  return problems;
}

function memberAt(dialect: Dialect, path: string): unknown {
  let value: unknown = dialect;
  for (const key of path.split('.')) {
    if (value === null || typeof value !== 'object') return undefined;
    value = (value as Record<string, unknown>)[key];
  }
  return value;
}

/**
 * A throw that is not already one of tablequeue's errors becomes one that says what refused:
 * `validateTable` refuses a table (`UnsupportedError`), `checkServerVersion` the server
 * (`ServerVersionError`), and a renderer its statement (`StatementError`).
 */
function refusal(dialect: Dialect, path: string, error: unknown, args: readonly unknown[]): unknown {
  if (error instanceof QueueError) return error;
  if (path === 'validateTable') {
    const table = (args[0] as TableSpec | undefined)?.qualifiedName;
    return new UnsupportedError({
      database: dialect.label,
      feature: 'table',
      message: `dialect "${dialect.label}" refuses table "${String(table)}": ${reasonOf(error)}`,
    });
  }
  if (path === 'checkServerVersion') {
    return new ServerVersionError({
      found: String(args[0]),
      required: `a server dialect "${dialect.label}" supports`,
      message: `dialect "${dialect.label}" refuses the server's version ${JSON.stringify(String(args[0]))}: ${reasonOf(error)}`,
    });
  }
  return new StatementError({
    statement: path,
    database: dialect.label,
    cause: error,
    message: `dialect "${dialect.label}" cannot render statement "${path}": ${reasonOf(error)}`,
  });
}

type AnyMethod = (...args: unknown[]) => unknown;

/** The method at `path`, its throws typed; `lease.claim`'s `stampAll` as well. */
function guardedMethod(dialect: Dialect, owner: object, path: string): AnyMethod {
  const method = (owner as Record<string, AnyMethod>)[path.slice(path.lastIndexOf('.') + 1)]!;
  return (...args) => {
    let result: unknown;
    try {
      result = method.apply(owner, args);
    } catch (error) {
      throw refusal(dialect, path, error, args);
    }
    const stampAll = path === 'lease.claim' ? (result as { stampAll?: AnyMethod }).stampAll : undefined;
    if (stampAll === undefined) return result;
    return { ...(result as object), stampAll: guardedMethod(dialect, { stampAll }, 'lease.stampAll') };
  };
}

/** A copy of one group (`lease`) or nested group (`schema.textCollation`, `schema.indexes`) with its methods guarded. */
function guardedGroup(dialect: Dialect, path: string): object | undefined {
  const group = memberAt(dialect, path);
  if (group === undefined || group === null || typeof group !== 'object') return undefined;
  const copy: Record<string, unknown> = { ...group };
  for (const member of DIALECT_MEMBERS) {
    const key = member.path.slice(path.length + 1);
    if (!member.path.startsWith(`${path}.`) || key.includes('.')) continue;
    if (typeof (group as Record<string, unknown>)[key] === 'function') copy[key] = guardedMethod(dialect, group, member.path);
  }
  if (path === 'schema') {
    copy['textCollation'] = guardedGroup(dialect, 'schema.textCollation');
    copy['indexes'] = guardedGroup(dialect, 'schema.indexes');
  }
  return Object.freeze(copy);
}

function guarded(dialect: Dialect, reference: Dialect): Dialect {
  const checked = new WeakSet<TableSpec>();
  const validate = guardedMethod(dialect, dialect, 'validateTable');
  return Object.freeze({
    interfaceVersion: dialect.interfaceVersion,
    name: dialect.name,
    label: dialect.label,
    basedOn: dialect.basedOn,
    capabilities: dialect.capabilities,
    ...Object.fromEntries(DIALECT_GROUPS.map((group) => [group, guardedGroup(dialect, group)])),
    validateTable: (spec: TableSpec) => {
      validate(spec);
      refuseFormWithoutCapability(dialect, spec);
      if (checked.has(spec)) return;
      checkTableRenderings(reference, dialect, spec);
      checked.add(spec);
    },
    checkServerVersion: guardedMethod(dialect, dialect, 'checkServerVersion'),
  }) as Dialect;
}

/**
 * The row lock form on a dialect that declares no row locks: the built-ins refuse it in their own
 * validateTable (SQLite); a dialect that turns the capability off is held to it here.
 */
export function refuseFormWithoutCapability(dialect: Dialect, spec: TableSpec): void {
  if (spec.form !== 'rowLock' || dialect.capabilities.supportsRowLock) return;
  throw new UnsupportedError({
    database: dialect.label,
    feature: 'row lock form',
    message: `table "${spec.qualifiedName}" uses the row lock form, but dialect "${dialect.label}" has no row locks (supportsRowLock: false); add a lockedUntil column (lease form)`,
  });
}

/** Every statement of the table's form, rendered by the dialect and the built-in; any problem fails with all of them named. */
function checkTableRenderings(reference: Dialect, dialect: Dialect, spec: TableSpec): void {
  const problems: { method: string; problem: string }[] = [];
  for (const rendering of dialectRenderings({ spec, columns: roleColumns(spec) })) {
    if (rendering.forms !== undefined && !rendering.forms.includes(spec.form)) continue;
    const outcome = compareRendering(reference, dialect, rendering);
    if (outcome.kind !== 'fails') continue;
    const where = rendering.variant === '' ? rendering.method : `${rendering.method} (${rendering.variant})`;
    problems.push(...outcome.problems.map((problem) => ({ method: rendering.method, problem: `${where} ${problem}` })));
  }
  if (problems.length === 0) return;
  const listed = problems.map(({ problem }) => problem).join('; ');
  throw new StatementError({
    statement: problems[0]!.method,
    database: dialect.label,
    cause: new Error(listed),
    message: `dialect "${dialect.label}" (based on ${dialect.basedOn}) cannot serve table "${spec.qualifiedName}": ${listed}. Fix these statements; checkDialectStatements from tablequeue/testing checks every one`,
  });
}
