import { Broker, defineTable, type BrokerOptions, type QueueTable, type TableDeclaration } from '../src/index.js';
import type { Stand, TestDatabase } from './stand.js';

export type FormUnderTest = 'rowLock' | 'lease';

/** The forms a stand runs: the row lock form only where the database has row locks. */
export function formsOf(stand: Stand): FormUnderTest[] {
  return stand.capabilities.supportsRowLock ? ['rowLock', 'lease'] : ['lease'];
}

export interface JobsTableOptions {
  readonly form: FormUnderTest;
  readonly name?: string;
  /** Mark processed rows instead of deleting them. */
  readonly mark?: boolean;
  readonly grouped?: boolean;
  readonly withRetryAfter?: boolean;
}

/** A queue table with the usual roles, declared for the form under test. */
export function jobsTable(options: JobsTableOptions): QueueTable {
  return defineTable(jobsDeclaration(options));
}

export function jobsDeclaration(options: JobsTableOptions): TableDeclaration {
  const declaration: TableDeclaration = {
    table: options.name ?? 'jobs',
    id: 'id',
    priority: 'priority',
    attempt: 'attempt',
    headers: 'headers',
    payload: 'payload',
  };
  if (options.grouped !== false) declaration.group = 'queue';
  if (options.withRetryAfter !== false) declaration.retryAfter = 'retry_after';
  if (options.mark) declaration.processedAt = 'processed_at';
  if (options.form === 'lease') declaration.lockedUntil = 'locked_until';
  return declaration;
}

export async function createTable(stand: Stand, db: TestDatabase, table: QueueTable): Promise<void> {
  for (const sql of table.createTableSql(stand.ddlDialect)) await db.exec(sql);
}

/** A broker over the test database with quick polls, stopped by `stopAll`. */
export function createBroker(db: TestDatabase, brokers: Broker[], options: Partial<BrokerOptions> = {}): Broker {
  const broker = new Broker({ database: db.brokerDatabase as string, pollIntervalMs: 50, stopTimeoutMs: 5_000, ...options });
  brokers.push(broker);
  return broker;
}

export async function stopAll(brokers: Broker[]): Promise<void> {
  await Promise.allSettled(brokers.splice(0).map((broker) => broker.stop()));
}

/** `$1, $2…` on Postgres, `?` elsewhere. */
export function placeholder(stand: Stand, index: number): string {
  return stand.kind === 'postgres' ? `$${index}` : '?';
}

/** Resolves once `count` items were collected; the test awaits it instead of sleeping. */
export class Collector<T> {
  readonly items: T[] = [];
  readonly #waiters: { count: number; resolve: () => void }[] = [];

  push(item: T): void {
    this.items.push(item);
    for (const waiter of [...this.#waiters]) {
      if (this.items.length >= waiter.count) {
        this.#waiters.splice(this.#waiters.indexOf(waiter), 1);
        waiter.resolve();
      }
    }
  }

  /** Waits until at least `count` items arrived, failing after `timeoutMs`. */
  waitFor(count: number, timeoutMs = 20_000): Promise<T[]> {
    if (this.items.length >= count) return Promise.resolve(this.items);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`expected ${count} items within ${timeoutMs} ms, got ${this.items.length}`)),
        timeoutMs,
      );
      this.#waiters.push({
        count,
        resolve: () => {
          clearTimeout(timer);
          resolve(this.items);
        },
      });
    });
  }
}

/** Polls the database until `check` holds; for state that other processes change. */
export async function waitForDatabase(check: () => Promise<boolean>, timeoutMs = 30_000, what = 'condition'): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** Checks in-process state (a subscription's counters) until `check` holds. */
export async function waitUntil(check: () => boolean, timeoutMs = 20_000, what = 'condition'): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

export async function countRows(db: TestDatabase, table: string, where = '1 = 1'): Promise<number> {
  const rows = await db.query<{ n: unknown }>(`SELECT COUNT(*) AS n FROM ${table} WHERE ${where}`);
  return Number(rows[0]?.n ?? 0);
}

export function json(value: unknown): string {
  return JSON.stringify(value);
}
