import { testHooksOf } from '../src/broker/broker.js';
import { untilSignalled } from '../src/internal/test-signal.js';
import { testSignalsOfRelay } from '../src/outbox/relay.js';
import {
  Broker,
  defineTable,
  type BrokerOptions,
  type CreateTableOptions,
  type Queue,
  type QueueTable,
  type Relay,
  type SubscriptionStats,
  type TableDeclaration,
} from '../src/index.js';
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

export async function createTable(stand: Stand, db: TestDatabase, table: QueueTable, options: CreateTableOptions = {}): Promise<void> {
  for (const sql of table.createTableSql(stand.ddlDialect, options)) await db.exec(sql);
}

/** A broker over the test database with quick polls and what its stand declares, stopped by `stopAll`. */
export function createBroker(db: TestDatabase, brokers: Broker[], options: Partial<BrokerOptions> = {}): Broker {
  const broker = new Broker({
    database: db.brokerDatabase as string,
    pollIntervalMs: 50,
    stopTimeoutMs: 5_000,
    ...db.brokerOptions,
    ...options,
  });
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

/** The stats of `queue`'s subscription on `broker`. */
export function statsOf(broker: Broker, queue: Queue<unknown>): SubscriptionStats {
  const stats = broker.stats().subscriptions.find((subscription) => subscription.queue === queue.label);
  if (stats === undefined) throw new Error(`no subscription of ${queue.label}`);
  return stats;
}

/**
 * Waits until `check` holds for the stats of `queue`'s subscription on `broker`: at once, or
 * after one of its claim loop's, delivery runner's or lease keeper's test signals, which mark
 * every change of the counters. No polling: a test that fails here waited `timeoutMs` for a
 * signal after which `check` held.
 */
export function untilStats(
  broker: Broker,
  queue: Queue<unknown>,
  check: (stats: SubscriptionStats) => boolean,
  what: string,
  timeoutMs = 20_000,
): Promise<void> {
  return untilSignalled(testHooksOf(broker, queue).all(), () => check(statsOf(broker, queue)), what, timeoutMs).catch((error: unknown) => {
    throw new Error(`${(error as Error).message}; stats: ${JSON.stringify(statsOf(broker, queue))}`);
  });
}

/** As `untilStats`, for a condition over the subscriptions of `queues` on `broker`. */
export function untilSubscriptions(
  broker: Broker,
  queues: readonly Queue<unknown>[],
  check: () => boolean,
  what: string,
  timeoutMs = 20_000,
): Promise<void> {
  const signals = queues.flatMap((queue) => testHooksOf(broker, queue).all());
  return untilSignalled(signals, check, what, timeoutMs);
}

/** Waits until `check` holds: at once, or after one of `relays` marked a batch relayed. */
export function untilRelayed(relays: readonly Relay[], check: () => boolean, what: string, timeoutMs = 20_000): Promise<void> {
  return untilSignalled(relays.map((relay) => testSignalsOfRelay(relay).relayed), check, what, timeoutMs);
}

/**
 * Polls until `check` holds, for what this process gets no signal of: the database's own state
 * (its sessions, its statistics) and what other processes change. Everything a broker of this
 * process does is awaited through its signals (`untilStats`, `untilRelayed`) instead.
 */
export async function waitForDatabase(check: () => Promise<boolean>, timeoutMs = 30_000, what = 'condition'): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

export async function countRows(db: TestDatabase, table: string, where = '1 = 1'): Promise<number> {
  const rows = await db.query<{ n: unknown }>(`SELECT COUNT(*) AS n FROM ${table} WHERE ${where}`);
  return Number(rows[0]?.n ?? 0);
}

export function json(value: unknown): string {
  return JSON.stringify(value);
}
