import type { Dialect } from '../dialect/dialect.js';
import { indexColumnsOf } from '../dialect/index-read.js';
import type { Driver } from '../driver/driver.js';
import { bindStatement } from '../statement.js';
import type { RowsInWorkReason } from '../subscription/subscription.js';
import type { TableSpec } from '../table/table-spec.js';

/** A subscription whose lease claims count its queue's rows in work, and what makes them count. */
export interface RowsInWorkCounter {
  readonly subscription: string;
  readonly spec: TableSpec;
  readonly reason: RowsInWorkReason;
}

export interface InWorkIndexCheckOptions {
  readonly driver: Driver;
  readonly dialect: Dialect;
  readonly counters: readonly RowsInWorkCounter[];
  readonly onWarning: (message: string) => void;
}

/**
 * Warns, once per table, when lease claims count the rows in work (a concurrency limit; FIFO
 * groups) and no index serves the count: each claim then reads every row of the table, 49 ms a
 * claim at 1,000,000 rows on PostgreSQL against 0.05 ms with the in-work index (docs/benchmarks.md,
 * "Rows in work under a limit"). Tables `createTableSql` renders with `inWorkIndex` (and every
 * FIFO lease table it renders) have it; a table made without it, or by hand, may not.
 */
export async function warnOfUnindexedRowsInWork(options: InWorkIndexCheckOptions): Promise<void> {
  const statements = options.dialect.schema.indexes;
  if (statements === undefined) return;
  const byTable = new Map<string, RowsInWorkCounter[]>();
  for (const counter of options.counters) {
    const counters = byTable.get(counter.spec.qualifiedName) ?? [];
    counters.push(counter);
    byTable.set(counter.spec.qualifiedName, counters);
  }
  for (const counters of byTable.values()) {
    const spec = counters[0]!.spec;
    const { rows } = await options.driver.execute(bindStatement(statements.read(spec), {}));
    if (servesRowsInWork(spec, indexColumnsOf(rows))) continue;
    options.onWarning(unindexedWarning(spec, counters, statements.renderInWorkIndex(spec)));
  }
}

/**
 * An index serves the count of a queue's rows in work (`group = ? AND locked_until > ?`) when it
 * leads with `locked_until` (a range over the rows in work, the group filtered among them) or
 * with the group then `locked_until`. Names compare without case: MySQL, MariaDB and SQLite
 * match column names so, and a PostgreSQL table with two columns differing only in case is not
 * a queue table this could mistake.
 */
export function servesRowsInWork(spec: TableSpec, indexes: ReadonlyMap<string, readonly (string | null)[]>): boolean {
  const lockedUntil = spec.lockedUntil?.toLowerCase();
  if (lockedUntil === undefined) return true;
  const group = spec.group?.column.toLowerCase();
  for (const columns of indexes.values()) {
    const [first, second] = columns.map((column) => column?.toLowerCase());
    if (first === lockedUntil) return true;
    if (group !== undefined && first === group && second === lockedUntil) return true;
  }
  return false;
}

function unindexedWarning(spec: TableSpec, counters: readonly RowsInWorkCounter[], fix: string): string {
  const names = counters.map((counter) => `"${counter.subscription}"`).join(', ');
  const reasons = [...new Set(counters.map((counter) => counter.reason))].map((reason) =>
    reason === 'concurrency' ? 'a concurrency limit' : "FIFO groups: a group's head waits while one of its rows is in work",
  );
  const leading = spec.group === undefined ? `"${spec.lockedUntil}"` : `("${spec.group.column}", "${spec.lockedUntil}")`;
  return (
    `table "${spec.qualifiedName}": ${counters.length === 1 ? 'subscription' : 'subscriptions'} ${names} ${counters.length === 1 ? 'counts' : 'count'} the rows in work on every claim (${reasons.join('; ')}), ` +
    `and no index of the table leads with ${leading}, so each count reads the whole table; add the index with: ${fix}`
  );
}
