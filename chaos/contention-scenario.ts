/**
 * MySQL/MariaDB under contention: six replicas of eight workers claim a few hot rows, each
 * retried until its fourth attempt, while more rows are published into the same queue. Every
 * session of the replicas has `innodb_lock_wait_timeout = 1` and `lock_wait_timeout = 1` (set
 * per session), so a claim that waits on a lock fails within a second (errno 1205), and a
 * deadlock fails at once (1213). A claim that meets either is retried at once and counted in
 * `deadlocksRetried`; it must never reach a handler or lose a row. The replicas report their
 * stats and errors as they stop.
 *
 * The `table locked` variants add what makes claims wait: a session of the harness takes
 * `LOCK TABLES … WRITE` on the queue table for 1.5 s of every 3 s, as a dump or a schema change
 * would, so claims queue behind its metadata lock and time out.
 */
import type { Stand, TestDatabase } from '../conformance/stand.js';
import type { Driver } from '../src/driver/driver.js';
import { Broker, defineTable, type IsolationLevel, type Queue, type TableDeclaration } from '../src/index.js';
import {
  createEffectsSql,
  readCount,
  readRows,
  recordEffectSql,
  sleep,
  startReplicas,
  stopReplica,
  waitFor,
  withDatabase,
} from './chaos-processes.js';
import type { ChaosWorkerConfig, WorkerReport } from './chaos-worker.js';

export type ContentionVariant =
  | 'rowLock'
  | 'rowLock repeatable read'
  | 'rowLock fifo'
  | 'rowLock table locked'
  | 'lease'
  | 'lease fifo'
  | 'lease table locked';

export interface ContentionResult {
  readonly database: string;
  readonly variant: ContentionVariant;
  readonly messages: number;
  /** Times the harness held `LOCK TABLES … WRITE` (the `table locked` variants). */
  readonly tableLocks: number;
  readonly deliveries: number;
  readonly claims: number;
  /** Claims that met errno 1213 or 1205 and were retried (the replicas' `deadlocksRetried`). */
  readonly deadlocksRetried: number;
  /** Contention errors reported after five retries in a row, by phase and errno. */
  readonly errors: Record<string, number>;
  /** The server's `Innodb_deadlocks` grew by this much during the run (a server-wide counter). */
  readonly serverDeadlocks: number;
  readonly handlerErrors: number;
  readonly lost: number;
  readonly handledTwice: number;
  readonly seconds: number;
}

const REPLICAS = 6;
const WORKERS_PER_REPLICA = 8;
const ACK_ON_ATTEMPT = 4;
const FIFO_GROUPS = 4;
const LOCK_WAIT_TIMEOUT_SECONDS = 1;
const RUN_LIMIT_MS = 5 * 60_000;
const TABLE_LOCK_MS = 1_500;

function declaration(variant: ContentionVariant): TableDeclaration {
  const isFifo = variant.endsWith('fifo');
  const isolation: IsolationLevel | undefined = variant === 'rowLock repeatable read' ? 'repeatable read' : undefined;
  return {
    table: 'chaos_jobs',
    id: 'id',
    group: isFifo ? { column: 'queue', fifo: true } : 'queue',
    retryAfter: 'retry_after',
    attempt: 'attempt',
    payload: 'payload',
    ...(variant.startsWith('lease') ? { lockedUntil: 'locked_until' } : {}),
    ...(isolation === undefined ? {} : { isolation }),
  };
}

export function runContentionCase(options: {
  readonly stand: Stand;
  readonly variant: ContentionVariant;
  readonly messages: number;
}): Promise<ContentionResult> {
  const { stand, variant, messages } = options;
  const isFifo = variant.endsWith('fifo');
  const queues = isFifo ? Array.from({ length: FIFO_GROUPS }, (_, index) => `g${index}`) : ['hot'];
  return withDatabase(stand, async (db) => {
    const table = defineTable(declaration(variant));
    for (const sql of table.createTableSql(stand.ddlDialect)) await db.exec(sql);
    await db.exec(createEffectsSql(stand));
    const config: ChaosWorkerConfig = {
      database: db.url!,
      table: declaration(variant),
      queues,
      mode: 'contended',
      ackOnAttempt: ACK_ON_ATTEMPT,
      // FIFO: one row of a group is in work at a time, so one worker per group and replica.
      workers: isFifo ? 1 : WORKERS_PER_REPLICA,
      poolMax: isFifo ? 2 * FIFO_GROUPS + 2 : WORKERS_PER_REPLICA + 2,
      pollIntervalMs: 20,
      leaseMs: 2_000,
      recordSql: recordEffectSql(stand),
      lockWaitTimeoutSeconds: LOCK_WAIT_TIMEOUT_SECONDS,
    };
    const probe = await db.openDriver({ poolSize: 2 });
    const deadlocksBefore = await serverDeadlocks(probe);
    const replicas = await startReplicas(REPLICAS, config);
    const startedAt = Date.now();
    const locker = variant.endsWith('table locked') ? lockTableRepeatedly(db) : undefined;
    // A tenth of the rows up front, the rest published in small chunks while the replicas claim.
    await publishWhileClaiming(db, queues.map((queue) => table.queue(queue)), messages);
    const drained = await waitFor(async () => (await readCount(probe, 'SELECT COUNT(*) AS n FROM chaos_jobs')) === 0, {
      everyMs: 100,
      limitMs: RUN_LIMIT_MS,
    });
    const seconds = (Date.now() - startedAt) / 1000;
    const tableLocks = (await locker?.stop()) ?? 0;
    await Promise.all(replicas.map((replica) => stopReplica(replica)));
    if (!drained) console.error('the queue did not drain within the run limit');
    const reports = replicas.map((replica) => replica.report).filter((report) => report !== undefined);
    const sum = (name: keyof WorkerReport['stats']) => reports.reduce((total, report) => total + (report.stats[name] ?? 0), 0);
    const errors: Record<string, number> = {};
    for (const report of reports) {
      for (const [key, count] of Object.entries(report.errors)) errors[key] = (errors[key] ?? 0) + count;
    }
    const [counts] = await readRows(probe, 'SELECT COUNT(*) AS total, COUNT(DISTINCT message_id) AS distinct_ids FROM effects');
    const distinct = Number(counts!['distinct_ids']);
    return {
      database: stand.name,
      variant,
      messages,
      tableLocks,
      deliveries: sum('handled'),
      claims: sum('claims'),
      deadlocksRetried: sum('deadlocksRetried'),
      errors,
      serverDeadlocks: (await serverDeadlocks(probe)) - deadlocksBefore,
      handlerErrors: sum('handlerErrors'),
      lost: messages - distinct,
      handledTwice: Number(counts!['total']) - distinct,
      seconds,
    };
  });
}

async function publishWhileClaiming(db: TestDatabase, queues: Queue<unknown>[], messages: number): Promise<void> {
  const publisher = new Broker({ database: db.url! });
  await publisher.start();
  const chunk = 10;
  let published = 0;
  try {
    while (published < messages) {
      const size = published === 0 ? Math.ceil(messages / 10) : Math.min(chunk, messages - published);
      const queue = queues[Math.floor(published / chunk) % queues.length]!;
      await publisher.publishMany(queue, Array.from({ length: size }, (_, index) => ({ payload: published + index })));
      published += size;
      await sleep(20);
    }
  } finally {
    await publisher.stop();
  }
}

/**
 * Holds `LOCK TABLES chaos_jobs WRITE` on the harness's admin session for 1.5 s, then releases
 * it for 1.5 s, until stopped; resolves the number of times it held the lock.
 */
function lockTableRepeatedly(db: TestDatabase): { stop: () => Promise<number> } {
  let isStopping = false;
  let locks = 0;
  const running = (async () => {
    while (!isStopping) {
      await db.exec('LOCK TABLES chaos_jobs WRITE');
      locks += 1;
      await sleep(TABLE_LOCK_MS);
      await db.exec('UNLOCK TABLES');
      await sleep(TABLE_LOCK_MS);
    }
  })();
  return {
    stop: async () => {
      isStopping = true;
      await running;
      return locks;
    },
  };
}

/** The server's deadlock counter; shared by every database on the server, so only a hint. */
async function serverDeadlocks(probe: Driver): Promise<number> {
  const [row] = await readRows(probe, "SHOW GLOBAL STATUS LIKE 'Innodb_deadlocks'");
  return Number(row?.['Value'] ?? 0);
}
