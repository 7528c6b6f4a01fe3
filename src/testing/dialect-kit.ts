/**
 * The dialect kit's statement check: a service's own dialect rendered over queue tables of every
 * shape, each rendering held against the built-in dialect it claims to match. It cannot demand
 * the built-in's text (replacing text is what a dialect is for); it demands what the library
 * relies on (dialect-comparison.ts), and reports which statements are the dialect's own.
 */
import { AssertionError } from 'node:assert';
import { createDialect } from '../dialect/create-dialect.js';
import { compareRendering, reasonOf } from '../dialect/dialect-comparison.js';
import { dialectRenderings } from '../dialect/dialect-renderings.js';
import type { BuiltInDialectName, Dialect, DialectCapabilities } from '../dialect/dialect.js';
import { acceptServiceDialect, refuseFormWithoutCapability } from '../dialect/service-dialect.js';
import { createTableSpec, roleColumns, type TableDeclaration, type TableSpec } from '../table/table-spec.js';

export interface DialectStatementsOptions {
  /** The built-in dialect to hold it against. Default: the one it is based on (`dialect.basedOn`). */
  readonly matches?: BuiltInDialectName;
}

/** One thing the library relies on that a rendering does not give. */
export interface DialectProblem {
  /** `lease.extend`; `dialect` for a problem of the whole dialect (its version, a missing member). */
  readonly method: string;
  /** What varied: `finish, 2 rows`; empty when nothing. */
  readonly variant: string;
  /** The kit's tables it showed on. */
  readonly tables: readonly string[];
  readonly problem: string;
}

export interface DialectStatementsReport {
  readonly dialect: string;
  readonly matches: BuiltInDialectName;
  /** Renderings checked: a method, its arguments and a table. */
  readonly checked: number;
  /** Methods whose text differs from the built-in's somewhere: the dialect's own statements. */
  readonly overridden: readonly string[];
  /** Methods not asked for, since the dialect lacks the capability they serve (`notify.listen`). */
  readonly notAsked: readonly string[];
  /**
   * The kit's tables the dialect's `validateTable` refuses where the built-in takes them, with its
   * reason: none of their statements is rendered (a dialect may refuse a whole claim form).
   */
  readonly refusedTables: readonly { readonly table: string; readonly reason: string }[];
  /** Capabilities that differ from the built-in's: `supportsListenNotify: false (postgres: true)`. */
  readonly capabilityDifferences: readonly string[];
  readonly problems: readonly DialectProblem[];
}

/**
 * Renders every statement of `dialect` over the kit's tables (each claim form; groups, FIFO,
 * every role, the database clock, a schema, supplied ids, reserved words) and checks each against
 * the built-in it matches: it renders where the built-in does and refuses where it refuses, in the
 * same shape, under the same name, with placeholders that match its parameters, and with the
 * parameters the built-in binds. Throws an `AssertionError` listing every problem; returns the
 * report when there is none.
 */
export function checkDialectStatements(dialect: Dialect, options: DialectStatementsOptions = {}): DialectStatementsReport {
  const report = reportDialectStatements(dialect, options);
  if (report.problems.length === 0) return report;
  const lines = report.problems.map((problem) => {
    if (problem.method === 'dialect') return `  ${problem.problem}`;
    const where = problem.variant === '' ? problem.method : `${problem.method} (${problem.variant})`;
    return `  ${where} ${problem.problem} [${problem.tables.join(', ')}]`;
  });
  const count = report.problems.length;
  throw new AssertionError({
    message: `dialect "${report.dialect}" does not match the built-in ${report.matches} dialect: ${count} ${count === 1 ? 'problem' : 'problems'}\n${lines.join('\n')}`,
    operator: 'checkDialectStatements',
  });
}

/** The same check, returning every problem in the report instead of throwing. */
export function reportDialectStatements(dialect: Dialect, options: DialectStatementsOptions = {}): DialectStatementsReport {
  const label = typeof dialect?.label === 'string' ? dialect.label : 'the dialect';
  const matches = options.matches ?? dialect?.basedOn;
  const reference = createDialect(matches);
  const empty = { dialect: label, matches, checked: 0, overridden: [], notAsked: [], refusedTables: [], capabilityDifferences: [] };
  try {
    acceptServiceDialect(dialect);
  } catch (error) {
    return { ...empty, problems: [{ method: 'dialect', variant: '', tables: [], problem: reasonOf(error) }] };
  }
  const problems = new Map<string, { method: string; variant: string; problem: string; tables: string[] }>();
  const overridden = new Set<string>();
  const notAsked = new Set<string>();
  const refusedTables: { table: string; reason: string }[] = [];
  let checked = 0;
  for (const table of KIT_TABLES) {
    const refusal = tableRefusal(dialect, reference, table.spec);
    if (refusal !== undefined) {
      if ('reason' in refusal) refusedTables.push({ table: table.spec.qualifiedName, reason: refusal.reason });
      if ('problem' in refusal) addProblem(problems, { method: 'validateTable', variant: '', problem: refusal.problem }, table.spec);
      continue;
    }
    for (const rendering of dialectRenderings(table)) {
      if (rendering.forms !== undefined && !rendering.forms.includes(table.spec.form)) continue;
      const outcome = compareRendering(reference, dialect, rendering);
      checked += 1;
      if (outcome.kind === 'notAsked') notAsked.add(rendering.method);
      if (outcome.kind === 'conforms' && outcome.differs) overridden.add(rendering.method);
      if (outcome.kind !== 'fails') continue;
      for (const problem of outcome.problems) addProblem(problems, { method: rendering.method, variant: rendering.variant, problem }, table.spec);
    }
  }
  return {
    ...empty,
    checked,
    overridden: [...overridden],
    notAsked: [...notAsked],
    refusedTables,
    capabilityDifferences: capabilityDifferences(dialect.capabilities, reference),
    problems: [...problems.values()],
  };
}

/**
 * A table the dialect refuses is one whose statements the library never asks for (a dialect may
 * refuse a whole claim form); one the built-in refuses and the dialect takes is a problem.
 */
function tableRefusal(
  dialect: Dialect,
  reference: Dialect,
  spec: TableSpec,
): { reason: string } | { problem: string } | { bothRefuse: true } | undefined {
  const referenceRefuses = refusalOf(() => reference.validateTable(spec));
  const dialectRefuses = refusalOf(() => {
    dialect.validateTable(spec);
    refuseFormWithoutCapability(dialect, spec);
  });
  if (dialectRefuses !== undefined) return referenceRefuses === undefined ? { reason: dialectRefuses } : { bothRefuse: true };
  if (referenceRefuses === undefined) return undefined;
  return { problem: `takes a table the built-in ${reference.label} dialect refuses (${referenceRefuses}); refuse it too` };
}

function refusalOf(validate: () => void): string | undefined {
  try {
    validate();
    return undefined;
  } catch (error) {
    return reasonOf(error);
  }
}

function addProblem(
  problems: Map<string, { method: string; variant: string; problem: string; tables: string[] }>,
  found: { method: string; variant: string; problem: string },
  spec: TableSpec,
): void {
  const key = `${found.method}\u0000${found.variant}\u0000${found.problem}`;
  const entry = problems.get(key) ?? { ...found, tables: [] };
  entry.tables.push(spec.qualifiedName);
  problems.set(key, entry);
}

function capabilityDifferences(capabilities: DialectCapabilities, reference: Dialect): string[] {
  return Object.entries(reference.capabilities).flatMap(([key, expected]) => {
    const found: unknown = capabilities[key as keyof DialectCapabilities];
    if (JSON.stringify(found) === JSON.stringify(expected)) return [];
    return [`${key}: ${JSON.stringify(found)} (${reference.label}: ${JSON.stringify(expected)})`];
  });
}

/** A kit table: the declaration, and a column of the service's own beside the roles. */
function kitTable(declaration: TableDeclaration): { spec: TableSpec; columns: readonly string[] } {
  const spec = createTableSpec(declaration);
  return { spec, columns: [...roleColumns(spec), 'note'] };
}

const EVERY_ROLE = {
  group: 'queue',
  priority: 'priority',
  partitionKey: 'customer',
  retryAfter: 'retry_after',
  attempt: 'attempt',
  processedAt: 'processed_at',
  headers: 'headers',
  payload: 'payload',
  dedupeKey: 'dedupe_key',
} as const;

/** One table per shape that changes a statement's text or parameters. */
const KIT_TABLES = [
  kitTable({ table: 'kit_lease', id: 'id', lockedUntil: 'locked_until' }),
  kitTable({ table: 'kit_lease_every_role', id: 'id', ...EVERY_ROLE, lockedUntil: 'locked_until' }),
  kitTable({ table: 'kit_lease_fifo', id: 'id', ...EVERY_ROLE, group: { column: 'queue', fifo: true }, lockedUntil: 'locked_until' }),
  kitTable({
    schema: 'kit',
    table: 'order',
    id: { column: 'select', generated: false },
    group: 'group',
    retryAfter: 'from',
    attempt: 'limit',
    lockedUntil: 'where',
    payload: 'table',
  }),
  kitTable({ table: 'kit_row_lock', id: 'id' }),
  kitTable({ table: 'kit_row_lock_every_role', id: 'id', ...EVERY_ROLE, isolation: 'read committed' }),
  kitTable({ table: 'kit_row_lock_fifo', id: 'id', ...EVERY_ROLE, group: { column: 'queue', fifo: true } }),
  kitTable({ table: 'kit_row_lock_database_clock', id: 'id', ...EVERY_ROLE, clock: 'database' }),
  kitTable({ table: 'kit_advisory', id: 'id', advisoryLock: 'job-{id}', payload: 'payload' }),
  kitTable({ table: 'kit_advisory_every_role', id: 'id', ...EVERY_ROLE, advisoryLock: 'mail-{customer}' }),
  kitTable({ table: 'kit_advisory_database_clock', id: 'id', attempt: 'attempt', retryAfter: 'retry_after', advisoryLock: 'job-{id}', clock: 'database' }),
];
