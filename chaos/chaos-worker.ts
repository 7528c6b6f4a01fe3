/**
 * One replica in a chaos run: a broker that reads one or more queues and records what its
 * handlers do in the effects table. Configured by one JSON argument; prints `ready` once started,
 * and on SIGTERM stops gracefully and prints `report <json>` (its stats and the errors it saw).
 *
 * Modes:
 * - `record`: records `done`, then acks;
 * - `slow`: records `start`, works `handlerMs`, records `done`;
 * - `transactional`: records `done` through `context.tx`, so the record commits with the ack;
 * - `sequence`: marks the message in work (`in_work`), records `start`, works `handlerMs`,
 *   unmarks it and records `done`: for order and overlap checks;
 * - `contended`: retries each message (due again a millisecond later, behind the rows due now)
 *   until its attempt `ackOnAttempt`, then records `done`.
 */
import { Broker, defineTable, LeaseLostError, Outcome, StatementError, type TableDeclaration } from '../src/index.js';
import type { HandlerContext, Message, SubscriptionStats } from '../src/index.js';

export type WorkerMode = 'record' | 'slow' | 'transactional' | 'sequence' | 'contended';

export interface ChaosWorkerConfig {
  readonly database: string;
  readonly table: TableDeclaration;
  /** One subscription per queue (FIFO groups are queues). */
  readonly queues: readonly string[];
  readonly mode: WorkerMode;
  /** Workers per subscription, or keyed lanes with `isKeyed`. */
  readonly workers: number;
  readonly isKeyed?: boolean;
  readonly leaseMs: number;
  readonly pollIntervalMs?: number;
  readonly poolMax: number;
  readonly handlerMs?: number;
  readonly ackOnAttempt?: number;
  /** The effects insert: message id, group or key, number, pid, phase, time (`recordEffectSql`). */
  readonly recordSql: string;
  /** `sequence` mode: insert and delete of (group, number, pid) in the in_work table. */
  readonly enterSql?: string;
  readonly leaveSql?: string;
  /**
   * MySQL/MariaDB: `innodb_lock_wait_timeout` (row locks) and `lock_wait_timeout` (table
   * metadata locks) for every session of this replica's pool, set per session when the pool
   * opens it (never globally: the server is shared).
   */
  readonly lockWaitTimeoutSeconds?: number;
}

/** What a replica prints as it stops. */
export interface WorkerReport {
  readonly pid: number;
  /** Every numeric counter of `stats()`, summed over the replica's subscriptions. */
  readonly stats: Partial<Record<keyof SubscriptionStats, number>>;
  readonly maxConnectionsHeld: number;
  /** Errors by `phase code errno-or-sqlstate`. */
  readonly errors: Record<string, number>;
  /** Messages whose settlement met `LeaseLostError`. */
  readonly leaseLostIds: string[];
}

const config = JSON.parse(process.argv[2]!) as ChaosWorkerConfig;
const servicePool = config.lockWaitTimeoutSeconds === undefined ? undefined : await openMysqlPool(config);
const broker = new Broker({
  database: servicePool ?? config.database,
  pollIntervalMs: config.pollIntervalMs ?? 100,
  leaseMs: config.leaseMs,
  pool: { max: config.poolMax },
  stopTimeoutMs: 2_000,
});
const errors: Record<string, number> = {};
const leaseLostIds: string[] = [];
// Killed connections, lost leases and contention are what the run provokes: they are counted
// here and reported at exit, and the invariants are read from the database afterwards.
broker.on('error', (error: unknown, detail: { phase?: string; messageId?: string } = {}) => {
  const code = error instanceof Error && 'code' in error ? String(error.code) : 'unknown';
  const server = error instanceof StatementError ? (error.errno ?? error.sqlState ?? '') : '';
  const key = `${detail.phase ?? 'other'} ${code} ${server}`.trim();
  errors[key] = (errors[key] ?? 0) + 1;
  if (error instanceof LeaseLostError && detail.messageId !== undefined) leaseLostIds.push(detail.messageId);
});

const table = defineTable(config.table);
for (const queue of config.queues) {
  broker.subscribe(table.queue(queue), (message, context) => handle(message, context), {
    ...(config.isKeyed ? { workersByKey: config.workers } : { workers: config.workers }),
    transactional: config.mode === 'transactional',
  });
}
await broker.start();
process.stdout.write('ready\n');
process.on('SIGTERM', () => void stop());

async function handle(message: Message<unknown>, context: HandlerContext): Promise<Outcome | void> {
  const grp = message.partitionKey ?? message.group ?? null;
  const n = Number(message.payload);
  const record = (phase: string) =>
    context.query(config.recordSql, [message.id, grp, n, process.pid, phase, Date.now()]);
  switch (config.mode) {
    case 'record':
      await record('done');
      return;
    case 'slow':
      await record('start');
      await sleep(config.handlerMs ?? 0);
      await record('done');
      return;
    case 'transactional':
      await context.tx!.query(config.recordSql, [message.id, grp, n, process.pid, 'done', Date.now()]);
      return;
    case 'sequence':
      await context.query(config.enterSql!, [grp, n, process.pid]);
      await record('start');
      await sleep(config.handlerMs ?? 0);
      await context.query(config.leaveSql!, [grp, n, process.pid]);
      await record('done');
      return;
    case 'contended':
      if (message.attempt < (config.ackOnAttempt ?? 1)) return Outcome.retryAfter(1);
      await record('done');
      return;
  }
}

async function stop(): Promise<void> {
  await broker.stop();
  const summed: Record<string, number> = {};
  const subscriptions = broker.stats().subscriptions;
  for (const subscription of subscriptions) {
    for (const [name, value] of Object.entries(subscription)) {
      if (typeof value === 'number') summed[name] = (summed[name] ?? 0) + value;
    }
  }
  const report: WorkerReport = {
    pid: process.pid,
    stats: summed,
    maxConnectionsHeld: broker.stats().pool.maxHeld,
    errors,
    leaseLostIds,
  };
  process.stdout.write(`report ${JSON.stringify(report)}\n`);
  if (servicePool !== undefined) await new Promise<void>((resolve) => servicePool.end(() => resolve()));
  process.exit(0);
}

/** The little of a mysql2 pool this worker touches. */
interface MysqlPool {
  on(event: 'connection', listener: (connection: { query(sql: string): unknown }) => void): void;
  end(callback: () => void): void;
}

/**
 * A pool like the broker's own, whose sessions get short lock wait timeouts as they open: the
 * service's own pool, as a user would pass it. Loaded at run time, as the library loads its
 * client libraries, so only the MySQL runs need mysql2.
 */
async function openMysqlPool(workerConfig: ChaosWorkerConfig): Promise<MysqlPool> {
  const mysql2 = (await import('mysql2')).default as { createPool(options: Record<string, unknown>): MysqlPool };
  const url = new URL(workerConfig.database);
  const pool = mysql2.createPool({
    host: url.hostname,
    port: Number(url.port || 3306),
    user: decodeURIComponent(url.username),
    password: decodeURIComponent(url.password),
    database: url.pathname.slice(1),
    connectionLimit: workerConfig.poolMax,
    supportBigNumbers: true,
    bigNumberStrings: true,
    timezone: 'Z',
    dateStrings: false,
  });
  pool.on('connection', (connection) => {
    const seconds = Number(workerConfig.lockWaitTimeoutSeconds);
    connection.query(`SET SESSION innodb_lock_wait_timeout = ${seconds}, lock_wait_timeout = ${seconds}`);
  });
  return pool;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
