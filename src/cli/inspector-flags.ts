import { INIT_COLUMN_NAMES, type QueueInspectorOptions, type InspectorColumnNames } from '../admin/open-queue-inspector.js';
import type { DeadLetterLocation } from '../admin/inspection.js';
import { parseDatabaseUrl } from '../driver/database-url.js';
import type { PoolerMode } from '../driver/driver.js';
import { UsageError } from './usage-error.js';

/** Where a command finds the database URL when `--database` is not given. */
export const DEFAULT_DATABASE_ENV = 'DATABASE_URL';

/** `--database` and `--database-env`, which every command that opens a database takes. */
export const DATABASE_FLAGS = {
  database: { type: 'string' },
  'database-env': { type: 'string' },
  pooler: { type: 'string' },
} as const;

/** Their help text. */
export const DATABASE_FLAGS_HELP = `  --database URL            postgres://…, mysql://…, mariadb://…, sqlite:./queue.db; without it,
                            the URL is read from $${DEFAULT_DATABASE_ENV}, which keeps a password out of
                            the process list that every user of the machine can read
  --database-env NAME       read the URL from the environment variable NAME instead
  --pooler MODE             PostgreSQL through PgBouncer or a pooler like it: its pool_mode,
                            transaction or session (the broker's pooler option); without it the
                            command looks for a pooler, and can miss a busy transaction pooler`;

export interface DatabaseFlagValues {
  readonly database?: string | undefined;
  readonly 'database-env'?: string | undefined;
  readonly pooler?: string | undefined;
}

/** The URL and the pooler the flags name. */
export interface DatabaseTarget {
  readonly url: string;
  readonly pooler: PoolerMode | undefined;
}

/** `databaseUrlOf` with `--pooler`, which takes transaction or session, and only for a PostgreSQL URL. */
export function databaseTargetOf(
  command: string,
  values: DatabaseFlagValues,
  usage: string,
  environment: Readonly<Record<string, string | undefined>>,
): DatabaseTarget {
  const url = databaseUrlOf(command, values, usage, environment);
  const { pooler } = values;
  if (pooler === undefined) return { url, pooler };
  if (pooler !== 'transaction' && pooler !== 'session') {
    throw new UsageError(`--pooler takes the pooler's pool_mode, transaction or session; got "${pooler}"`);
  }
  const { kind } = parseDatabaseUrl(url);
  if (kind !== 'postgres') {
    throw new UsageError(`--pooler is for PostgreSQL through PgBouncer or a pooler like it, and the URL is a ${kind} one; remove --pooler`);
  }
  return { url, pooler };
}

/**
 * The database URL: `--database`, else the variable `--database-env` names, else
 * `DATABASE_URL`. A command line shows in `ps` to every local user, the environment only to
 * the same user and root, so a URL with a password belongs in the environment.
 */
function databaseUrlOf(
  command: string,
  values: DatabaseFlagValues,
  usage: string,
  environment: Readonly<Record<string, string | undefined>>,
): string {
  const variable = values['database-env'];
  if (values.database !== undefined) {
    if (variable !== undefined) throw new UsageError('give --database or --database-env, not both');
    return values.database;
  }
  if (variable !== undefined && !/^[A-Za-z_][A-Za-z0-9_]*$/.test(variable)) {
    throw new UsageError(`--database-env takes the name of an environment variable, got "${variable}"`);
  }
  const name = variable ?? DEFAULT_DATABASE_ENV;
  const url = environment[name];
  if (url === undefined || url === '') {
    throw new UsageError(`${command} needs --database URL, or the URL in the environment variable ${name}, which is not set\n\n${usage}`);
  }
  return url;
}

/** The flags every command that reads a queue table takes, in `parseArgs` form. */
export const INSPECTOR_FLAGS = {
  ...DATABASE_FLAGS,
  table: { type: 'string' },
  schema: { type: 'string' },
  'dead-letter-group': { type: 'string' },
  'dead-letter-table': { type: 'string' },
  column: { type: 'string', multiple: true },
  help: { type: 'boolean', short: 'h' },
} as const;

/** Their help text, shared by the commands' usages. */
export const INSPECTOR_FLAGS_HELP = `${DATABASE_FLAGS_HELP}
  --table NAME              the queue table
  --schema NAME             its schema (PostgreSQL) or database (MySQL)
  --dead-letter-group NAME  dead letters are moved into this group of the table
  --dead-letter-table NAME  dead letters are moved into this table (same columns)
  --column ROLE=NAME        a column named otherwise than by tablequeue init (repeatable); ROLE is
                            id, group, priority, retryAfter, attempt, processedAt, lockedUntil,
                            headers or payload; NAME "-" says the table has none; TABLE:ROLE=NAME
                            says it of that --table only (the dashboard reads several)
  -h, --help                this help`;

/** The roles `--column ROLE=NAME` takes: those the inspector looks for under `tablequeue init`'s names. */
export const COLUMN_ROLES = Object.keys(INIT_COLUMN_NAMES) as readonly (keyof InspectorColumnNames)[];

export interface InspectorFlagValues extends DatabaseFlagValues {
  readonly table?: string | undefined;
  readonly schema?: string | undefined;
  readonly 'dead-letter-group'?: string | undefined;
  readonly 'dead-letter-table'?: string | undefined;
  readonly column?: string[] | undefined;
}

/** The inspector's options from the flags; a missing or contradictory flag is a usage error. */
export function inspectorOptionsOf(
  command: string,
  values: InspectorFlagValues,
  usage: string,
  environment: Readonly<Record<string, string | undefined>>,
): QueueInspectorOptions {
  const { url: database, pooler } = databaseTargetOf(command, values, usage, environment);
  if (values.table === undefined) throw new UsageError(`${command} needs --table\n\n${usage}`);
  let deadLetter: DeadLetterLocation | undefined;
  if (values['dead-letter-group'] !== undefined && values['dead-letter-table'] !== undefined) {
    throw new UsageError('give --dead-letter-group or --dead-letter-table, not both');
  }
  if (values['dead-letter-group'] !== undefined) deadLetter = { kind: 'group', group: values['dead-letter-group'] };
  if (values['dead-letter-table'] !== undefined) deadLetter = { kind: 'table', table: values['dead-letter-table'] };
  const columns = columnsPerTable(values.column, [values.table]).get(values.table);
  return {
    database,
    table: values.table,
    ...(values.schema === undefined ? {} : { schema: values.schema }),
    ...(deadLetter === undefined ? {} : { deadLetter }),
    ...(columns === undefined ? {} : { columns }),
    ...(pooler === undefined ? {} : { pooler }),
  };
}

/**
 * Where each of `tables` (as the --table flags spell them) keeps its dead letters, from repeated
 * `--dead-letter-group` and `--dead-letter-table` flags: `NAME` says it of every table, and
 * `TABLE:NAME` of one --table only, over the shared one. A value is `TABLE:NAME` only when what
 * comes before its first colon is one of `tables` (a group name may hold colons, a table name
 * cannot). A table nothing is said of is left out: the dashboard lists no dead letters for it.
 * Two locations said of the same table (or two shared ones) are a usage error.
 */
export function deadLettersPerTable(
  groups: readonly string[] | undefined,
  deadLetterTables: readonly string[] | undefined,
  tables: readonly string[],
): Map<string, DeadLetterLocation> {
  let shared: { location: DeadLetterLocation; flag: string } | undefined;
  const own = new Map<string, { location: DeadLetterLocation; flag: string }>();
  const said = [
    ...(groups ?? []).map((value) => ({ value, flag: `--dead-letter-group ${value}`, kind: 'group' as const })),
    ...(deadLetterTables ?? []).map((value) => ({ value, flag: `--dead-letter-table ${value}`, kind: 'table' as const })),
  ];
  for (const { value, flag, kind } of said) {
    const colon = value.indexOf(':');
    const table = colon > 0 && tables.includes(value.slice(0, colon)) ? value.slice(0, colon) : undefined;
    const name = table === undefined ? value : value.slice(colon + 1);
    if (name.length === 0) throw new UsageError(`${flag} names no ${kind}`);
    const location: DeadLetterLocation = kind === 'group' ? { kind, group: name } : { kind, table: name };
    const earlier = table === undefined ? shared : own.get(table);
    if (earlier !== undefined) {
      const whose = table === undefined ? 'every table' : `table "${table}"`;
      throw new UsageError(`${earlier.flag} and ${flag} both say where the dead letters of ${whose} are; give one`);
    }
    if (table === undefined) shared = { location, flag };
    else own.set(table, { location, flag });
  }
  const result = new Map<string, DeadLetterLocation>();
  for (const table of tables) {
    const location = own.get(table)?.location ?? shared?.location;
    if (location !== undefined) result.set(table, location);
  }
  return result;
}

/**
 * The column names `--column` gives each of `tables` (as the --table flags spell them): every
 * `ROLE=NAME`, then that table's own `TABLE:ROLE=NAME` over them. A table nothing is said of is
 * left out. A `TABLE:` that names no --table is a usage error: it would otherwise be ignored.
 */
export function columnsPerTable(assignments: readonly string[] | undefined, tables: readonly string[]): Map<string, InspectorColumnNames> {
  const shared: Record<string, string | null> = {};
  const own = new Map<string, Record<string, string | null>>();
  for (const assignment of assignments ?? []) {
    const match = /^(?:([^:=]+):)?([A-Za-z]+)=(.+)$/.exec(assignment);
    const role = match?.[2] as keyof InspectorColumnNames | undefined;
    if (match === null || role === undefined || !COLUMN_ROLES.includes(role)) {
      throw new UsageError(`--column takes ROLE=NAME or TABLE:ROLE=NAME with ROLE one of ${COLUMN_ROLES.join(', ')}; got "${assignment}"`);
    }
    if (role === 'id' && match[3] === '-') throw new UsageError('every queue table has an id column; name it with --column id=NAME');
    const table = match[1];
    if (table !== undefined && !tables.includes(table)) {
      throw new UsageError(`--column ${assignment} names table "${table}", which is not a --table here (${tables.map((name) => `"${name}"`).join(', ')})`);
    }
    const into = table === undefined ? shared : (own.get(table) ?? own.set(table, {}).get(table)!);
    into[role] = match[3] === '-' ? null : match[3]!;
  }
  const result = new Map<string, InspectorColumnNames>();
  for (const table of tables) {
    const columns = { ...shared, ...own.get(table) };
    if (Object.keys(columns).length > 0) result.set(table, columns as InspectorColumnNames);
  }
  return result;
}
