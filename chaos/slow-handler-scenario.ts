/**
 * Handlers slower than the lease, in the lease form, across three replica processes:
 *
 * - renewal: every handler takes three leases; the keeper renews each lease every half lease,
 *   so each message is handled once and no settlement meets `LeaseLostError`;
 * - stall: a replica is frozen with SIGSTOP while its handlers run, past its leases, and thawed
 *   with SIGCONT once another replica has taken its rows. Its settlements then meet
 *   `LeaseLostError` and change nothing; each of those rows is handled once by another replica.
 */
import type { Stand } from '../conformance/stand.js';
import type { Driver } from '../src/driver/driver.js';
import { defineTable, type TableDeclaration } from '../src/index.js';
import {
  createEffectsSql,
  placeholder,
  publishAll,
  readCount,
  readRows,
  recordEffectSql,
  sleep,
  startReplicas,
  stopReplica,
  waitFor,
  withDatabase,
  type Replica,
} from './chaos-processes.js';
import type { ChaosWorkerConfig } from './chaos-worker.js';

export type SlowHandlerCase = 'renewal' | 'stall';

export interface SlowHandlerResult {
  readonly database: string;
  readonly case: SlowHandlerCase;
  readonly messages: number;
  readonly leaseMs: number;
  readonly handlerMs: number;
  /** The shortest time a handler took, from its `start` and `done` records. */
  readonly shortestHandlerMs: number;
  readonly stalls: number;
  /** Rows the frozen replicas had in work when they were frozen. */
  readonly rowsInWorkWhenFrozen: number;
  readonly leaseRenewals: number;
  /** Settlements that met `LeaseLostError`, as the replicas reported them. */
  readonly leaseLostErrors: number;
  readonly rowsWithLostLease: number;
  /** Of those rows, how many another replica handled exactly once. */
  readonly takenOverOnce: number;
  readonly lost: number;
  /** Messages recorded more than once, leaving out the stalled handlers' own late records. */
  readonly handledTwice: number;
  readonly seconds: number;
  /** The errors each replica reported, by phase, code and server error. */
  readonly errors: Record<string, number>[];
}

const REPLICAS = 3;
const WORKERS_PER_REPLICA = 4;
const LEASE_MS = 2_000;
const RUN_LIMIT_MS = 5 * 60_000;
const STALLS = 3;

const DECLARATION: TableDeclaration = {
  table: 'chaos_jobs',
  id: 'id',
  group: 'queue',
  retryAfter: 'retry_after',
  attempt: 'attempt',
  lockedUntil: 'locked_until',
  payload: 'payload',
};

export function runSlowHandlerCase(stand: Stand, slowCase: SlowHandlerCase): Promise<SlowHandlerResult> {
  // Renewal: two rounds of every worker, each handler three leases long. Stall: handlers shorter
  // than a lease, enough rows that every replica is busy through three freezes.
  const handlerMs = slowCase === 'renewal' ? 3 * LEASE_MS : 1_000;
  const messages = slowCase === 'renewal' ? 2 * REPLICAS * WORKERS_PER_REPLICA : 240;
  return withDatabase(stand, async (db) => {
    const table = defineTable(DECLARATION);
    for (const sql of table.createTableSql(stand.ddlDialect)) await db.exec(sql);
    await db.exec(createEffectsSql(stand));
    await publishAll(db, table.queue('slow'), Array.from({ length: messages }, (_, index) => ({ payload: index })));
    const config: ChaosWorkerConfig = {
      database: db.url!,
      table: DECLARATION,
      queues: ['slow'],
      mode: 'slow',
      workers: WORKERS_PER_REPLICA,
      poolMax: WORKERS_PER_REPLICA + 2,
      leaseMs: LEASE_MS,
      handlerMs,
      recordSql: recordEffectSql(stand),
    };
    const probe = await db.openDriver({ poolSize: 2 });
    const startedAt = Date.now();
    const replicas = await startReplicas(REPLICAS, config);
    const isDrained = async () => (await readCount(probe, 'SELECT COUNT(*) AS n FROM chaos_jobs')) === 0;
    let stalls = 0;
    let rowsInWorkWhenFrozen = 0;
    if (slowCase === 'stall') {
      for (let stall = 0; stall < STALLS && !(await isDrained()); stall += 1) {
        rowsInWorkWhenFrozen += await freezeAndThaw(stand, probe, replicas[stall % REPLICAS]!);
        stalls += 1;
        // Let the thawed replica's settlements and the takeovers finish before the next freeze.
        await sleep(3_000);
      }
    }
    const drained = await waitFor(isDrained, { everyMs: 200, limitMs: RUN_LIMIT_MS });
    const seconds = (Date.now() - startedAt) / 1000;
    await Promise.all(replicas.map((replica) => stopReplica(replica)));
    if (!drained) console.error('the queue did not drain within the run limit');
    return {
      database: stand.name,
      case: slowCase,
      messages,
      leaseMs: LEASE_MS,
      handlerMs,
      stalls,
      rowsInWorkWhenFrozen,
      seconds,
      ...(await countEffects(probe, replicas, messages)),
    };
  });
}

/**
 * Freezes a replica while it has handlers in work, keeps it frozen past its leases until another
 * replica has started every row it was handling, then thaws it. Returns the rows it had in work.
 */
async function freezeAndThaw(stand: Stand, probe: Driver, victim: Replica): Promise<number> {
  const mark = (index: number) => placeholder(stand, index);
  const inWorkSql =
    `SELECT s.message_id AS id FROM effects s WHERE s.pid = ${mark(1)} AND s.phase = 'start' AND NOT EXISTS ` +
    `(SELECT 1 FROM effects d WHERE d.message_id = s.message_id AND d.pid = ${mark(2)} AND d.phase = 'done')`;
  const readInWork = async () =>
    (await readRows(probe, inWorkSql, [victim.pid, victim.pid])).map((row) => String(row['id']));
  await waitFor(async () => (await readInWork()).length > 0, { everyMs: 50, limitMs: 30_000 });
  victim.child.kill('SIGSTOP');
  const frozenAt = Date.now();
  const inWork = await readInWork();
  const takenOverSql =
    `SELECT COUNT(DISTINCT message_id) AS n FROM effects WHERE pid <> ${mark(1)} AND phase = 'start' ` +
    `AND message_id IN (${inWork.map((_, index) => mark(index + 2)).join(', ')})`;
  await waitFor(async () => (await readCount(probe, takenOverSql, [victim.pid, ...inWork])) === inWork.length, {
    everyMs: 100,
    limitMs: 30_000,
  });
  // Past the lease in every case, even when the rows were taken over early.
  await sleep(Math.max(0, frozenAt + LEASE_MS + 1_000 - Date.now()));
  victim.child.kill('SIGCONT');
  console.log(`froze ${victim.pid} for ${Date.now() - frozenAt} ms with ${inWork.join(' ')} in work`);
  return inWork.length;
}

async function countEffects(probe: Driver, replicas: Replica[], messages: number) {
  const reports = replicas.map((replica) => replica.report);
  // A row can lose its lease more than once: taken over from one frozen replica by one frozen later.
  const lostCount = new Map<string, number>();
  let leaseLostErrors = 0;
  for (const report of reports) {
    for (const id of report?.leaseLostIds ?? []) {
      lostCount.set(id, (lostCount.get(id) ?? 0) + 1);
      leaseLostErrors += 1;
    }
  }
  const done = await readRows(probe, "SELECT message_id, pid FROM effects WHERE phase = 'done'");
  const doneBy = new Map<string, number[]>();
  for (const row of done) {
    const id = String(row['message_id']);
    doneBy.set(id, [...(doneBy.get(id) ?? []), Number(row['pid'])]);
  }
  // No replica is killed here, so each `done` ended in a settlement: the row's one ack, or a
  // settlement refused with LeaseLostError. A row handled once more than its refusals is fine.
  let takenOverOnce = 0;
  let handledTwice = 0;
  for (const [id, pids] of doneBy) {
    const settled = pids.length - (lostCount.get(id) ?? 0);
    if (lostCount.has(id) && settled === 1) takenOverOnce += 1;
    if (settled > 1) handledTwice += 1;
  }
  // Only handlers that ran once in their process, so each start pairs with its own done.
  const [durations] = await readRows(
    probe,
    "SELECT MIN(d.at_ms - s.at_ms) AS shortest FROM effects s JOIN effects d ON d.message_id = s.message_id AND d.pid = s.pid AND d.phase = 'done' " +
      "WHERE s.phase = 'start' AND NOT EXISTS (SELECT 1 FROM effects o WHERE o.message_id = s.message_id AND o.pid = s.pid AND o.phase = 'start' AND o.seq <> s.seq)",
  );
  return {
    shortestHandlerMs: Number(durations?.['shortest'] ?? 0),
    leaseRenewals: reports.reduce((sum, report) => sum + (report?.stats.leaseRenewals ?? 0), 0),
    leaseLostErrors,
    rowsWithLostLease: lostCount.size,
    takenOverOnce,
    lost: messages - doneBy.size,
    handledTwice,
    errors: reports.map((report) => report?.errors ?? {}),
  };
}
