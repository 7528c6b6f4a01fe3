/**
 * Transactional exactly-once under kills: three replicas whose handlers record each message
 * through `context.tx`, inside the delivery's transaction, while one replica is killed with
 * SIGKILL every two seconds. A record commits only with its ack, so every message must be
 * recorded exactly once: a delivery cut off by a kill rolls back, record and all.
 */
import type { Stand } from '../conformance/stand.js';
import { defineTable } from '../src/index.js';
import {
  chaosTable,
  createEffectsSql,
  killWhileRunning,
  publishAll,
  readCount,
  readRows,
  recordEffectSql,
  startReplicas,
  stopReplica,
  withDatabase,
} from './chaos-processes.js';
import type { ChaosWorkerConfig } from './chaos-worker.js';

export type ExactlyOnceForm = 'rowLock' | 'lease' | 'advisory';

export interface ExactlyOnceResult {
  readonly database: string;
  readonly form: ExactlyOnceForm;
  readonly messages: number;
  readonly kills: number;
  readonly lost: number;
  readonly handledTwice: number;
  /** Promises broken: here, any message recorded more than once. */
  readonly broken: number;
  readonly seconds: number;
}

const REPLICAS = 3;
const WORKERS_PER_REPLICA = 4;
const LEASE_MS = 2_000;
const KILL_EVERY_MS = 2_000;
const RUN_LIMIT_MS = 10 * 60_000;

export function runExactlyOnceCase(options: {
  readonly stand: Stand;
  readonly form: ExactlyOnceForm;
  readonly messages: number;
}): Promise<ExactlyOnceResult> {
  const { stand, form, messages } = options;
  return withDatabase(stand, async (db) => {
    const table = defineTable(chaosTable(form));
    for (const sql of table.createTableSql(stand.ddlDialect)) await db.exec(sql);
    await db.exec(createEffectsSql(stand));
    const config: ChaosWorkerConfig = {
      database: db.url!,
      table: chaosTable(form),
      queues: ['once'],
      mode: 'transactional',
      workers: WORKERS_PER_REPLICA,
      // A transactional delivery holds its connection; its handler's record runs on that one.
      poolMax: WORKERS_PER_REPLICA + 2,
      leaseMs: LEASE_MS,
      recordSql: recordEffectSql(stand),
    };
    const probe = await db.openDriver({ poolSize: 2 });
    const replicas = await startReplicas(REPLICAS, config);
    const startedAt = Date.now();
    // Published once every replica is ready, so all three take part from the first row.
    await publishAll(db, table.queue('once'), Array.from({ length: messages }, (_, index) => ({ payload: index })));
    const kills = await killWhileRunning({
      replicas,
      config,
      everyMs: KILL_EVERY_MS,
      limitMs: RUN_LIMIT_MS,
      isDone: async () => (await readCount(probe, 'SELECT COUNT(*) AS n FROM chaos_jobs')) === 0,
    });
    const seconds = (Date.now() - startedAt) / 1000;
    await Promise.all(replicas.map((replica) => stopReplica(replica)));
    const [counts] = await readRows(probe, 'SELECT COUNT(*) AS total, COUNT(DISTINCT message_id) AS distinct_ids FROM effects');
    const distinct = Number(counts!['distinct_ids']);
    const handledTwice = Number(counts!['total']) - distinct;
    return { database: stand.name, form, messages, kills, lost: messages - distinct, handledTwice, broken: handledTwice, seconds };
  });
}
