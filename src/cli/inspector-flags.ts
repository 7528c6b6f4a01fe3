import type { QueueInspectorOptions, InspectorColumnNames } from '../admin/open-queue-inspector.js';
import type { DeadLetterLocation } from '../admin/inspection.js';
import { UsageError } from './usage-error.js';

/** The flags every command that reads a queue table takes, in `parseArgs` form. */
export const INSPECTOR_FLAGS = {
  database: { type: 'string' },
  table: { type: 'string' },
  schema: { type: 'string' },
  'dead-letter-group': { type: 'string' },
  'dead-letter-table': { type: 'string' },
  column: { type: 'string', multiple: true },
  help: { type: 'boolean', short: 'h' },
} as const;

/** Their help text, shared by the commands' usages. */
export const INSPECTOR_FLAGS_HELP = `  --database URL            postgres://…, mysql://…, mariadb://…, sqlite:./queue.db
  --table NAME              the queue table
  --schema NAME             its schema (PostgreSQL) or database (MySQL)
  --dead-letter-group NAME  dead letters are moved into this group of the table
  --dead-letter-table NAME  dead letters are moved into this table (same columns)
  --column ROLE=NAME        a column named otherwise than by tablequeue init (repeatable); ROLE is
                            id, group, priority, retryAfter, attempt, processedAt, lockedUntil,
                            headers or payload; NAME "-" says the table has none
  -h, --help                this help`;

const ROLES: readonly (keyof InspectorColumnNames)[] = [
  'id',
  'group',
  'priority',
  'retryAfter',
  'attempt',
  'processedAt',
  'lockedUntil',
  'headers',
  'payload',
];

export interface InspectorFlagValues {
  readonly database?: string | undefined;
  readonly table?: string | undefined;
  readonly schema?: string | undefined;
  readonly 'dead-letter-group'?: string | undefined;
  readonly 'dead-letter-table'?: string | undefined;
  readonly column?: string[] | undefined;
}

/** The inspector's options from the flags; a missing or contradictory flag is a usage error. */
export function inspectorOptionsOf(command: string, values: InspectorFlagValues, usage: string): QueueInspectorOptions {
  if (values.database === undefined) throw new UsageError(`${command} needs --database\n\n${usage}`);
  if (values.table === undefined) throw new UsageError(`${command} needs --table\n\n${usage}`);
  let deadLetter: DeadLetterLocation | undefined;
  if (values['dead-letter-group'] !== undefined && values['dead-letter-table'] !== undefined) {
    throw new UsageError('give --dead-letter-group or --dead-letter-table, not both');
  }
  if (values['dead-letter-group'] !== undefined) deadLetter = { kind: 'group', group: values['dead-letter-group'] };
  if (values['dead-letter-table'] !== undefined) deadLetter = { kind: 'table', table: values['dead-letter-table'] };
  const columns: Record<string, string | null> = {};
  for (const assignment of values.column ?? []) {
    const match = /^([A-Za-z]+)=(.+)$/.exec(assignment);
    const role = match?.[1] as keyof InspectorColumnNames | undefined;
    if (match === null || role === undefined || !ROLES.includes(role)) {
      throw new UsageError(`--column takes ROLE=NAME with ROLE one of ${ROLES.join(', ')}; got "${assignment}"`);
    }
    if (role === 'id' && match[2] === '-') throw new UsageError('every queue table has an id column; name it with --column id=NAME');
    columns[role] = match[2] === '-' ? null : match[2]!;
  }
  return {
    database: values.database,
    table: values.table,
    ...(values.schema === undefined ? {} : { schema: values.schema }),
    ...(deadLetter === undefined ? {} : { deadLetter }),
    ...(Object.keys(columns).length === 0 ? {} : { columns: columns as InspectorColumnNames }),
  };
}
