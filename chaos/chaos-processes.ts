/**
 * What every chaos scenario shares: replicas in child processes (started, stopped, killed,
 * frozen), the effects table they write, reads that survive a killed connection, and publishing.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { Stand, TestDatabase } from '../conformance/stand.js';
import type { Driver } from '../src/driver/driver.js';
import { Broker, type PublishItem, type Queue, type TableDeclaration } from '../src/index.js';
import type { ChaosWorkerConfig, WorkerReport } from './chaos-worker.js';

const WORKER = fileURLToPath(new URL('./chaos-worker.ts', import.meta.url));

/** A replica that does not stop within this long after SIGTERM is killed. */
const STOP_LIMIT_MS = 15_000;

export interface Replica {
  readonly child: ChildProcess;
  readonly pid: number;
  /** The stats and errors the replica printed as it stopped; undefined when it was killed. */
  report: WorkerReport | undefined;
  readonly exited: Promise<void>;
}

/**
 * Starts one replica (a broker in its own Node process) and resolves once it printed `ready`.
 * It prints `report <json>` after a graceful stop.
 */
export function startReplica(config: ChaosWorkerConfig): Promise<Replica> {
  const child = spawn(process.execPath, ['--import', 'tsx', WORKER, JSON.stringify(config)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return new Promise((resolve, reject) => {
    const replica: Replica = { child, pid: child.pid!, report: undefined, exited };
    createInterface({ input: child.stdout! }).on('line', (line) => {
      if (line === 'ready') resolve(replica);
      else if (line.startsWith('report ')) replica.report = JSON.parse(line.slice('report '.length)) as WorkerReport;
    });
    child.once('exit', (code, signal) => reject(new Error(`a replica exited (${code ?? signal}) before it was ready`)));
  });
}

export function startReplicas(count: number, config: ChaosWorkerConfig): Promise<Replica[]> {
  return Promise.all(Array.from({ length: count }, () => startReplica(config)));
}

/** Stops a replica gracefully (SIGTERM) and waits for its report; kills it past the limit. */
export async function stopReplica(replica: Replica): Promise<void> {
  const { child } = replica;
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), STOP_LIMIT_MS);
  await replica.exited;
  clearTimeout(timer);
}

export async function killReplica(replica: Replica): Promise<void> {
  replica.child.kill('SIGKILL');
  await replica.exited;
}

/**
 * Replicas killed with SIGKILL every `everyMs` and replaced, until `isDone` answers true.
 * `onKilling` runs just before each kill (with the victim's pid). Returns the number of kills.
 */
export async function killWhileRunning(options: {
  readonly replicas: Replica[];
  readonly config: ChaosWorkerConfig;
  readonly everyMs: number;
  readonly isDone: () => Promise<boolean>;
  readonly limitMs: number;
  readonly onKilling?: (pid: number) => void;
}): Promise<number> {
  const { replicas, config, everyMs, isDone, limitMs } = options;
  const startedAt = Date.now();
  let kills = 0;
  while (!(await isDone())) {
    if (Date.now() - startedAt > limitMs) break;
    await sleep(everyMs);
    if (await isDone()) break;
    const index = Math.floor(Math.random() * replicas.length);
    const victim = replicas[index]!;
    options.onKilling?.(victim.pid);
    await killReplica(victim);
    kills += 1;
    replicas[index] = await startReplica(config);
  }
  return kills;
}

/**
 * The effects table every handler writes to: one row per handler phase, in the order written
 * (`seq`), with the message id, its group or partition key, its payload number, the process and
 * the host time in milliseconds.
 */
export function createEffectsSql(stand: Stand): string {
  const seq =
    stand.kind === 'postgres'
      ? 'seq BIGSERIAL PRIMARY KEY'
      : stand.kind === 'mysql'
        ? 'seq BIGINT AUTO_INCREMENT PRIMARY KEY'
        : 'seq INTEGER PRIMARY KEY AUTOINCREMENT';
  return `CREATE TABLE effects (${seq}, message_id VARCHAR(64) NOT NULL, grp VARCHAR(64), n INTEGER, pid INTEGER NOT NULL, phase VARCHAR(16) NOT NULL, at_ms BIGINT NOT NULL)`;
}

/** The insert the worker runs for each effect: message id, group or key, number, pid, phase, time. */
export function recordEffectSql(stand: Stand): string {
  return `INSERT INTO effects (message_id, grp, n, pid, phase, at_ms) VALUES (${placeholders(stand, 6)})`;
}

export function placeholders(stand: Stand, count: number): string {
  return Array.from({ length: count }, (_, index) => placeholder(stand, index + 1)).join(', ');
}

/** The placeholder of the 1-based parameter `index`: `$index` on Postgres, `?` elsewhere. */
export function placeholder(stand: Stand, index: number): string {
  return stand.kind === 'postgres' ? `$${index}` : '?';
}

/** Rows of a query through the harness's own pool, retried while the server is away. */
export async function readRows(probe: Driver, sql: string, values: unknown[] = []): Promise<Record<string, unknown>[]> {
  for (let attempt = 0; ; attempt += 1) {
    try {
      return (await probe.execute({ name: 'chaos.read', sql, values })).rows;
    } catch (error) {
      if (attempt >= 120) throw error;
      if (attempt === 10) console.error(`a read keeps failing (${String(error)}): ${sql}`);
      await sleep(500);
    }
  }
}

export async function readCount(probe: Driver, sql: string, values: unknown[] = []): Promise<number> {
  const row = (await readRows(probe, sql, values))[0];
  return Number(Object.values(row ?? {})[0] ?? 0);
}

/** Publishes the items through a broker of its own, in chunks. */
export async function publishAll<Payload>(db: TestDatabase, queue: Queue<Payload>, items: PublishItem<Payload>[]): Promise<void> {
  const publisher = new Broker({ database: db.brokerDatabase as string });
  await publisher.start();
  const chunk = 5_000;
  for (let start = 0; start < items.length; start += chunk) {
    await publisher.publishMany(queue, items.slice(start, start + chunk));
  }
  await publisher.stop();
}

/** Waits until `check` answers true, polling every `everyMs`; false when `limitMs` passed first. */
export async function waitFor(check: () => Promise<boolean>, options: { everyMs: number; limitMs: number }): Promise<boolean> {
  const startedAt = Date.now();
  while (!(await check())) {
    if (Date.now() - startedAt > options.limitMs) return false;
    await sleep(options.everyMs);
  }
  return true;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Runs `work` against a fresh database of the stand and drops it afterwards, whatever happened. */
export async function withDatabase<T>(stand: Stand, work: (db: TestDatabase) => Promise<T>): Promise<T> {
  const db = await stand.createDatabase();
  try {
    return await work(db);
  } finally {
    await db.drop().catch((error: unknown) => console.error(`could not drop the run's database: ${String(error)}`));
  }
}

/**
 * The queue table the chaos scenarios drain: grouped, with retries counted, in the form asked for.
 * `extra` adds or overrides roles (a FIFO group, a partition key).
 */
export function chaosTable(form: 'rowLock' | 'lease' | 'advisory', extra: Partial<TableDeclaration> = {}): TableDeclaration {
  return {
    table: 'chaos_jobs',
    id: 'id',
    group: 'queue',
    retryAfter: 'retry_after',
    attempt: 'attempt',
    payload: 'payload',
    ...(form === 'lease' ? { lockedUntil: 'locked_until' } : {}),
    ...(form === 'advisory' ? { advisoryLock: 'chaos-{id}' } : {}),
    ...extra,
  };
}
