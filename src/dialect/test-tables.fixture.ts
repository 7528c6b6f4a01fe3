/**
 * Fixture tables for the exact-SQL tests of the three dialects, one per shape that changes the
 * text, each with the columns a subscription would find in the database.
 */
import type { Statement } from '../statement.js';
import { createTableSpec, type TableSpec } from '../table/table-spec.js';
import type { TableColumns } from './dialect.js';

export interface FixtureTable {
  readonly spec: TableSpec;
  readonly columns: TableColumns;
}

/** Only an id; a row lock table whose claim has no condition at all. */
export const minimalTable: FixtureTable = {
  spec: createTableSpec({ table: 'jobs', id: 'id' }),
  columns: ['id', 'body'],
};

/** Only an id and the lease column. */
export const minimalLeaseTable: FixtureTable = {
  spec: createTableSpec({ table: 'jobs', id: 'id', lockedUntil: 'locked_until' }),
  columns: ['id', 'body', 'locked_until'],
};

const everyRoleDeclaration = {
  table: 'email_jobs',
  id: 'job_id',
  group: 'queue',
  priority: 'priority',
  partitionKey: 'customer',
  retryAfter: 'retry_after',
  attempt: 'attempt',
  processedAt: 'processed_at',
  headers: 'meta',
  payload: 'payload',
} as const;

/** Every role of the row lock form. */
export const everyRoleTable: FixtureTable = {
  spec: createTableSpec(everyRoleDeclaration),
  columns: ['job_id', 'queue', 'priority', 'customer', 'retry_after', 'attempt', 'processed_at', 'meta', 'payload'],
};

/** Every role of the lease form. */
export const everyRoleLeaseTable: FixtureTable = {
  spec: createTableSpec({ ...everyRoleDeclaration, lockedUntil: 'locked_until' }),
  columns: [
    'job_id',
    'queue',
    'priority',
    'customer',
    'retry_after',
    'attempt',
    'processed_at',
    'locked_until',
    'meta',
    'payload',
  ],
};

/** A lease table in a schema, ids supplied by the publisher. */
export const schemaQualifiedTable: FixtureTable = {
  spec: createTableSpec({
    schema: 'app',
    table: 'jobs',
    id: { column: 'id', generated: false },
    group: 'queue',
    lockedUntil: 'locked_until',
    payload: 'payload',
  }),
  columns: ['id', 'queue', 'locked_until', 'payload'],
};

/** Reserved words everywhere: only quoting makes these statements parse. */
export const reservedWordTable: FixtureTable = {
  spec: createTableSpec({
    schema: 'user',
    table: 'order',
    id: 'select',
    group: 'group',
    retryAfter: 'from',
    attempt: 'limit',
    lockedUntil: 'where',
    payload: 'table',
  }),
  columns: ['select', 'group', 'from', 'limit', 'where', 'table'],
};

/** An advisory key template naming a column that plays no other role. */
export const advisoryKeyTable: FixtureTable = {
  spec: createTableSpec({ table: 'jobs', id: 'id', advisoryLock: 'jobs-{tenant}-{id}', payload: 'payload' }),
  columns: ['id', 'tenant', 'payload'],
};

/** Every role of the row lock form, and an advisory key over the partition key column. */
export const everyRoleAdvisoryTable: FixtureTable = {
  spec: createTableSpec({ ...everyRoleDeclaration, advisoryLock: 'mail-{customer}' }),
  columns: everyRoleTable.columns,
};

/** An advisory table in a schema, with a quote in its key template; marks finished rows. */
export const schemaAdvisoryTable: FixtureTable = {
  spec: createTableSpec({
    schema: 'App',
    table: 'jobs',
    id: 'id',
    attempt: 'attempt',
    processedAt: 'done_at',
    advisoryLock: "o'k:{id}",
  }),
  columns: ['id', 'attempt', 'done_at'],
};

/** Every role of the row lock form, the group FIFO. */
export const fifoTable: FixtureTable = {
  spec: createTableSpec({ ...everyRoleDeclaration, group: { column: 'queue', fifo: true } }),
  columns: everyRoleTable.columns,
};

/** Every role of the lease form, the group FIFO. */
export const fifoLeaseTable: FixtureTable = {
  spec: createTableSpec({ ...everyRoleDeclaration, group: { column: 'queue', fifo: true }, lockedUntil: 'locked_until' }),
  columns: everyRoleLeaseTable.columns,
};

/** A FIFO lease table in a schema, without retryAfter or processedAt: finished rows are deleted. */
export const minimalFifoLeaseTable: FixtureTable = {
  spec: createTableSpec({ schema: 'app', table: 'jobs', id: 'id', group: { column: 'queue', fifo: true }, lockedUntil: 'locked_until' }),
  columns: ['id', 'queue', 'locked_until'],
};

/** A FIFO-group row lock table at serializable (refused by the MySQL dialect). */
export const fifoSerializableTable: FixtureTable = {
  spec: createTableSpec({ table: 'jobs', id: 'id', group: { column: 'queue', fifo: true }, isolation: 'serializable' }),
  columns: ['id', 'queue'],
};

/** The statement with its SQL's whitespace runs collapsed: the form the exact-SQL tests state. */
export function statementText(statement: Statement): { name: string; sql: string; params: readonly string[] } {
  return { name: statement.name, sql: collapseWhitespace(statement.sql), params: statement.params };
}

export function collapseWhitespace(text: string): string {
  return text.replace(/\s+/g, ' ').replace(/\( /g, '(').replace(/ \)/g, ')').trim();
}
