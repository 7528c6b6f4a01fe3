/**
 * The drain scenario: three replicas drain the queue while they are killed, their connections
 * are killed from the server, or the server restarts, every two seconds.
 */
import { execFileSync } from 'node:child_process';
import type { Stand, TestDatabase } from '../conformance/stand.js';
import { defineTable } from '../src/index.js';
import {
  chaosTable,
  createEffectsSql,
  killReplica,
  publishAll,
  readCount,
  readRows,
  recordEffectSql,
  sleep,
  startReplica,
  startReplicas,
  stopReplica,
  withDatabase,
  type Replica,
} from './chaos-processes.js';
import type { ChaosWorkerConfig } from './chaos-worker.js';

export type ChaosForm = 'rowLock' | 'lease';
export type Disruption = 'kill replicas' | 'kill connections' | 'restart database';

export interface ChaosCase {
  readonly stand: Stand;
  readonly form: ChaosForm;
  readonly disruption: Disruption;
  readonly messages: number;
}

export interface ChaosResult {
  readonly database: string;
  readonly form: ChaosForm;
  readonly disruption: Disruption;
  readonly messages: number;
  readonly disruptions: number;
  readonly lost: number;
  readonly handledTwice: number;
  readonly seconds: number;
}

const REPLICAS = 3;
const WORKERS_PER_REPLICA = 4;
const LEASE_MS = 2_000;
const DISRUPTION_EVERY_MS = 2_000;
/** A run that has not drained by then has lost rows or stalled: it stops and reports. */
const RUN_LIMIT_MS = 10 * 60_000;

/**
 * Publishes the messages, starts three replicas in their own processes and disrupts them every
 * two seconds until the queue is empty; then reads the effects table: every message must be
 * there (nothing lost), and each once unless a crash rule allows a second delivery.
 */
export function runChaosCase(chaos: ChaosCase): Promise<ChaosResult> {
  return withDatabase(chaos.stand, async (db) => {
    const table = defineTable(chaosTable(chaos.form));
    for (const sql of table.createTableSql(chaos.stand.ddlDialect)) await db.exec(sql);
    await db.exec(createEffectsSql(chaos.stand));
    await publishAll(db, table.queue('chaos'), Array.from({ length: chaos.messages }, (_, index) => ({ payload: index })));
    const config: ChaosWorkerConfig = {
      database: db.url!,
      table: chaosTable(chaos.form),
      queues: ['chaos'],
      mode: 'record',
      workers: WORKERS_PER_REPLICA,
      poolMax: WORKERS_PER_REPLICA + 2,
      leaseMs: LEASE_MS,
      recordSql: recordEffectSql(chaos.stand),
    };
    // The harness reads through a pool of its own, which reconnects after kills and restarts.
    const probe = await db.openDriver({ poolSize: 2 });
    const remaining = () => readCount(probe, 'SELECT COUNT(*) AS n FROM chaos_jobs');
    const startedAt = Date.now();
    const replicas = await startReplicas(REPLICAS, config);
    let disruptions = 0;
    while ((await remaining()) > 0) {
      if (Date.now() - startedAt > RUN_LIMIT_MS) break;
      await sleep(DISRUPTION_EVERY_MS);
      if ((await remaining()) === 0) break;
      await disrupt(chaos, db, replicas, config);
      disruptions += 1;
    }
    const seconds = (Date.now() - startedAt) / 1000;
    await Promise.all(replicas.map((replica) => stopReplica(replica)));
    const [counts] = await readRows(probe, 'SELECT COUNT(*) AS total, COUNT(DISTINCT message_id) AS distinct_ids FROM effects');
    const distinct = Number(counts!['distinct_ids']);
    return {
      database: chaos.stand.name,
      form: chaos.form,
      disruption: chaos.disruption,
      messages: chaos.messages,
      disruptions,
      lost: chaos.messages - distinct,
      handledTwice: Number(counts!['total']) - distinct,
      seconds,
    };
  });
}

async function disrupt(chaos: ChaosCase, db: TestDatabase, replicas: Replica[], config: ChaosWorkerConfig) {
  switch (chaos.disruption) {
    case 'kill replicas': {
      const index = Math.floor(Math.random() * replicas.length);
      await killReplica(replicas[index]!);
      replicas[index] = await startReplica(config);
      return;
    }
    case 'kill connections':
      await killConnections(chaos.stand, db);
      return;
    case 'restart database':
      restartServer(chaos.stand);
      return;
  }
}

/** Ends every session on the run's database but the harness's own, from the server side. */
async function killConnections(stand: Stand, db: TestDatabase): Promise<void> {
  if (stand.kind === 'postgres') {
    await db.query(
      'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()',
    );
    return;
  }
  const sessions = await db.query<{ id: unknown }>(
    'SELECT id FROM information_schema.processlist WHERE db = DATABASE() AND id <> CONNECTION_ID()',
  );
  for (const session of sessions) await db.exec(`KILL ${Number(session.id)}`).catch(() => undefined);
}

/** Restarts the local server the way an operator would; the harness's own admin session reconnects. */
function restartServer(stand: Stand): void {
  if (stand.kind === 'postgres') {
    const version = execFileSync('ls', ['/etc/postgresql']).toString().trim().split('\n')[0]!;
    execFileSync('pg_ctlcluster', ['--skip-systemctl-redirect', version, 'main', 'restart']);
    return;
  }
  execFileSync('mariadb-admin', ['-h', '127.0.0.1', '-u', 'root', 'shutdown']);
  // The old server must be gone before the new one starts: start-stop-daemon --oknodo sees a
  // server still shutting down as running and starts nothing.
  waitUntil(() => !isProcessRunning('mariadbd'), 'the old MariaDB server to exit');
  execFileSync('start-stop-daemon', ['--start', '--oknodo', '--background', '--exec', '/usr/sbin/mariadbd']);
  for (let attempt = 0; attempt < 60; attempt += 1) {
    try {
      execFileSync('mariadb-admin', ['-h', '127.0.0.1', '-u', 'root', 'ping'], { stdio: 'ignore' });
      return;
    } catch {
      execFileSync('sleep', ['1']);
    }
  }
  throw new Error('MariaDB did not come back within 60 s');
}

function isProcessRunning(name: string): boolean {
  try {
    execFileSync('pgrep', ['-x', name], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

function waitUntil(check: () => boolean, what: string): void {
  for (let attempt = 0; attempt < 120; attempt += 1) {
    if (check()) return;
    execFileSync('sleep', ['0.5']);
  }
  throw new Error(`timed out waiting for ${what}`);
}
