/** Tables of the advisory lock form and what holds their keys, for the advisory suites. */
import { defineTable, type QueueTable, type TableDeclaration } from '../../src/index.js';
import type { SuiteContext } from '../run-conformance.js';

export interface AdvisoryTableOptions {
  readonly name?: string;
  readonly grouped?: boolean;
  readonly mark?: boolean;
  /** A partition key column `customer`, which the key template then names instead of the id. */
  readonly keyedByCustomer?: boolean;
  readonly advisoryLock?: string;
}

/** A queue table in the advisory lock form, keyed by its id unless asked otherwise. */
export function advisoryDeclaration(options: AdvisoryTableOptions = {}): TableDeclaration {
  const declaration: TableDeclaration = {
    table: options.name ?? 'jobs',
    id: 'id',
    priority: 'priority',
    retryAfter: 'retry_after',
    attempt: 'attempt',
    headers: 'headers',
    payload: 'payload',
    advisoryLock: options.advisoryLock ?? (options.keyedByCustomer ? 'customer-{customer}' : 'job-{id}'),
  };
  if (options.grouped !== false) declaration.group = 'queue';
  if (options.mark) declaration.processedAt = 'processed_at';
  if (options.keyedByCustomer) declaration.partitionKey = 'customer';
  return declaration;
}

export function advisoryTable(options: AdvisoryTableOptions = {}): QueueTable {
  return defineTable(advisoryDeclaration(options));
}

/**
 * Sessions of the test database that hold an advisory key: Postgres reads pg_locks, MySQL and
 * MariaDB ask IS_USED_LOCK about the key of every row (template `job-{id}`).
 */
export async function sessionsHoldingKeys(context: SuiteContext): Promise<number> {
  const query =
    context.stand.kind === 'postgres'
      ? `SELECT COUNT(DISTINCT l.pid) AS n FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
           WHERE l.locktype = 'advisory' AND l.granted AND a.datname = current_database() AND a.state = 'idle'`
      : `SELECT COUNT(DISTINCT IS_USED_LOCK(CONCAT(LOWER(DATABASE()), '.job-', id))) AS n FROM jobs`;
  const rows = await context.db.query<{ n: unknown }>(query);
  return Number(rows[0]!.n);
}
