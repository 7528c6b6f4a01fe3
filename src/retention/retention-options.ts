import type { QueueTable } from '../definition/define-table.js';
import { validateQueueName } from '../definition/queue-name.js';
import type { DeadLetterTarget } from '../dialect/dialect.js';
import { checkPrunable, DEFAULT_MAINTENANCE_TABLE, MAX_PRUNE_BATCH_SIZE, type PruneTarget } from '../dialect/retention-statements.js';
import { DeclarationError } from '../errors.js';
import { millisecondsFromZero, positiveInteger, positiveMilliseconds } from '../option-checks.js';
import { parseQualifiedName } from '../table/identifier.js';
import { parseDeadLetterTable } from '../table/table-spec.js';

/** Where a table's dead letters are: a group of the table, or a table (`name` or `schema.name`) of the same columns. */
export type RetainedDeadLetters = { group: string; table?: undefined } | { table: string; group?: undefined };

export interface RetainOptions {
  /** Processed rows (`processedAt` set) older than this are deleted. Needs a processedAt column. */
  processedForMs?: number;
  /**
   * Dead letters older than this are deleted, their age counted from `retryAfter` (when their last
   * attempt became due; nothing records when a row became a dead letter). Needs `deadLetters`
   * and a retryAfter column.
   */
  deadLettersForMs?: number;
  /** Where the dead letters are, as the subscriptions' `deadLetter` names it. */
  deadLetters?: RetainedDeadLetters;
  /**
   * Also delete the table's `dedupeForMs` windows that have passed, from the broker's
   * `dedupeWindowsTable`: one row per key ever throttled otherwise stays.
   */
  dedupeWindows?: boolean;
  /** Rows per batch, each batch its own short transaction. Default 1,000; at most 10,000. */
  batchSize?: number;
  /** The pause between two batches, so claims and vacuum get the table between them. Default 50 ms. */
  pauseMs?: number;
  /** How often a replica looks for rows to delete. Default 60,000 ms. */
  intervalMs?: number;
  /** The maintenance table (`name` or `schema.name`) whose row per table lets one replica prune at a time. Default `tablequeue_maintenance`. */
  maintenanceTable?: string;
}

/** One `broker.retain(table, options)` as declared and checked. */
export interface RetentionDeclaration {
  readonly table: QueueTable;
  /** What to delete, each with its age in milliseconds, processed rows first. */
  readonly targets: readonly { readonly target: PruneTarget; readonly olderThanMs: number }[];
  /** Whether the table's passed `dedupeForMs` windows go too, after the rows. */
  readonly dedupeWindows: boolean;
  readonly batchSize: number;
  readonly pauseMs: number;
  readonly intervalMs: number;
  readonly maintenanceTable: string;
}

/**
 * A batch of 1,000 by primary key takes 15 to 27 ms at the median on this project's 2-core machines
 * (PostgreSQL, MariaDB, SQLite; docs/benchmarks.md, "Retention"), and the claim latency of a drain
 * on the same table stays what it was: a claim that meets a batch waits no longer than behind a
 * slow claim. Batches of 100 take as long each for a tenth of the rows; batches of 5,000 take
 * 175 ms on MariaDB and double its claims' p95. A million rows are a thousand statements.
 */
export const DEFAULT_PRUNE_BATCH_SIZE = 1_000;
/** Between batches: with batches of about 20 ms, the deletes hold the table about a quarter of the time, some 13,000 rows a second. */
export const DEFAULT_PRUNE_PAUSE_MS = 50;
/** Old rows wait at most a minute past their age; each look costs one lease statement and one delete per kind. */
export const DEFAULT_RETENTION_INTERVAL_MS = 60_000;

const OPTION_KEYS = new Set(['processedForMs', 'deadLettersForMs', 'deadLetters', 'dedupeWindows', 'batchSize', 'pauseMs', 'intervalMs', 'maintenanceTable']);

/** Checks a `broker.retain(table, options)` declaration; every refusal is a `DeclarationError` that says what to fix. */
export function resolveRetentionDeclaration(table: QueueTable, options: RetainOptions): RetentionDeclaration {
  const where = `broker.retain(${table.spec.qualifiedName})`;
  if (options === null || typeof options !== 'object') {
    throw new DeclarationError(`${where} needs options such as { processedForMs: 7 * 24 * 3_600_000 }`);
  }
  for (const key of Object.keys(options)) {
    if (!OPTION_KEYS.has(key)) throw new DeclarationError(`${where}: unknown option "${key}"; the options are ${[...OPTION_KEYS].join(', ')}`);
  }
  if (options.dedupeWindows !== undefined && typeof options.dedupeWindows !== 'boolean') {
    throw new DeclarationError(`${where}: dedupeWindows is true or false, got ${String(options.dedupeWindows)}`);
  }
  const dedupeWindows = options.dedupeWindows === true;
  if (options.processedForMs === undefined && options.deadLettersForMs === undefined && !dedupeWindows) {
    throw new DeclarationError(
      `${where}: say what to delete: processedForMs, deadLettersForMs (with deadLetters), dedupeWindows: true, or several of them`,
    );
  }
  const targets: { target: PruneTarget; olderThanMs: number }[] = [];
  if (options.processedForMs !== undefined) {
    const target: PruneTarget = { kind: 'processed' };
    checkPrunable(table.spec, target, where);
    targets.push({ target, olderThanMs: age(options.processedForMs, 'processedForMs', where) });
  }
  if (options.deadLettersForMs !== undefined) {
    if (options.deadLetters === undefined) {
      throw new DeclarationError(`${where}: deadLettersForMs needs deadLetters, where they are: { group: 'failed' } or { table: 'failed_jobs' }`);
    }
    const target: PruneTarget = { kind: 'deadLetter', destination: deadLetterTargetOf(options.deadLetters, where) };
    checkPrunable(table.spec, target, where);
    targets.push({ target, olderThanMs: age(options.deadLettersForMs, 'deadLettersForMs', where) });
  } else if (options.deadLetters !== undefined) {
    throw new DeclarationError(`${where}: deadLetters says where dead letters are, but deadLettersForMs, how long to keep them, is missing`);
  }
  const maintenanceTable = options.maintenanceTable ?? DEFAULT_MAINTENANCE_TABLE;
  parseQualifiedName(maintenanceTable, `${where}: maintenanceTable`);
  return Object.freeze({
    table,
    targets,
    dedupeWindows,
    batchSize: positiveInteger(options.batchSize ?? DEFAULT_PRUNE_BATCH_SIZE, 'batchSize', where, MAX_PRUNE_BATCH_SIZE),
    pauseMs: millisecondsFromZero(options.pauseMs ?? DEFAULT_PRUNE_PAUSE_MS, 'pauseMs', where),
    intervalMs: positiveMilliseconds(options.intervalMs ?? DEFAULT_RETENTION_INTERVAL_MS, 'intervalMs', where),
    maintenanceTable,
  });
}

/** An age in whole milliseconds of at least 1; Number.MAX_SAFE_INTEGER is far past any date a database keeps. */
function age(value: unknown, name: string, where: string): number {
  return positiveInteger(value, name, where);
}

/** `{ group }` on a grouped table, `{ table }` on any: the same destinations a subscription's deadLetter names. */
export function deadLetterTargetOf(deadLetters: RetainedDeadLetters, where: string): DeadLetterTarget {
  if (deadLetters === null || typeof deadLetters !== 'object' || (deadLetters.group === undefined) === (deadLetters.table === undefined)) {
    throw new DeclarationError(`${where}: deadLetters is { group: 'failed' } or { table: 'failed_jobs' }, one of the two`);
  }
  if (deadLetters.group !== undefined) {
    validateQueueName(deadLetters.group, `${where}: deadLetters.group`);
    return { kind: 'group', group: deadLetters.group };
  }
  // Unqualified, as a subscription's deadLetter names it: the connection's own schema or database.
  return { kind: 'table', ...parseDeadLetterTable(deadLetters.table!, where) };
}
