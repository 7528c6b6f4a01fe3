/**
 * Order under kills, across three replica processes, one killed with SIGKILL every two seconds:
 *
 * - FIFO groups: each group's rows must start in claim order; the only repeat allowed is the
 *   row that was in work when its replica died (it is the group's head again). A sampler reads
 *   the in_work table every 100 ms: no group may have two rows in work at once.
 * - keyed lanes: the library keeps each key's order inside one process only. The run counts
 *   out-of-order starts per process and key, and across processes, and samples that no process
 *   runs two rows of one key at once.
 */
import type { Stand } from '../conformance/stand.js';
import type { Driver } from '../src/driver/driver.js';
import { defineTable, type TableDeclaration } from '../src/index.js';
import {
  chaosTable,
  createEffectsSql,
  killWhileRunning,
  placeholder,
  placeholders,
  publishAll,
  readCount,
  readRows,
  recordEffectSql,
  startReplicas,
  stopReplica,
  withDatabase,
} from './chaos-processes.js';
import type { ChaosWorkerConfig } from './chaos-worker.js';
import type { ChaosForm } from './drain-scenario.js';

export type OrderKind = 'fifo groups' | 'keyed lanes';

export interface OrderResult {
  readonly database: string;
  readonly kind: OrderKind;
  readonly form: ChaosForm;
  readonly messages: number;
  readonly groups: number;
  readonly kills: number;
  readonly lost: number;
  /** Starts of a row already started before (after a kill). */
  readonly repeats: number;
  /** FIFO: starts out of claim order in a group. Keyed: out of order within one process and key. */
  readonly outOfOrder: number;
  /** Keyed lanes: starts out of order per key across processes (not promised). */
  readonly outOfOrderAcrossProcesses?: number;
  readonly samples: number;
  /** The most rows of one group (FIFO) or of one key in one process (keyed) seen in work at once. */
  readonly mostInWorkAtOnce: number;
  /** FIFO, lease form: the most rows of one group seen holding a live lease at once. */
  readonly mostLiveLeasesAtOnce?: number;
  readonly broken: number;
  readonly seconds: number;
}

const REPLICAS = 3;
const LEASE_MS = 2_000;
const KILL_EVERY_MS = 2_000;
const SAMPLE_EVERY_MS = 100;
const RUN_LIMIT_MS = 10 * 60_000;
const FIFO_GROUPS = 6;
const KEYS = 12;
const LANES = 4;

function declaration(form: ChaosForm, kind: OrderKind): TableDeclaration {
  return chaosTable(form, {
    ...(kind === 'fifo groups' ? { group: { column: 'queue', fifo: true } } : {}),
    ...(kind === 'keyed lanes' ? { partitionKey: 'customer' } : {}),
  });
}

export function runOrderCase(options: {
  readonly stand: Stand;
  readonly form: ChaosForm;
  readonly kind: OrderKind;
  readonly messages: number | undefined;
}): Promise<OrderResult> {
  const { stand, form, kind } = options;
  const isFifo = kind === 'fifo groups';
  const groups = isFifo ? FIFO_GROUPS : KEYS;
  const perGroup = Math.ceil((options.messages ?? (isFifo ? 1_800 : 6_000)) / groups);
  const messages = perGroup * groups;
  const names = Array.from({ length: groups }, (_, index) => `${isFifo ? 'g' : 'k'}${index}`);
  return withDatabase(stand, async (db) => {
    const table = defineTable(declaration(form, kind));
    for (const sql of table.createTableSql(stand.ddlDialect)) await db.exec(sql);
    await db.exec(createEffectsSql(stand));
    await db.exec('CREATE TABLE in_work (grp VARCHAR(64) NOT NULL, n INTEGER NOT NULL, pid INTEGER NOT NULL)');
    const marks = placeholders(stand, 3).split(', ');
    const config: ChaosWorkerConfig = {
      database: db.url!,
      table: declaration(form, kind),
      queues: isFifo ? names : ['keyed'],
      mode: 'sequence',
      // FIFO: one worker per group (one row of a group is in work at a time anyway).
      workers: isFifo ? 1 : LANES,
      isKeyed: !isFifo,
      // Each delivery may hold a connection, and its handler's queries take another.
      poolMax: isFifo ? 2 * groups + 2 : 2 * LANES + 2,
      leaseMs: LEASE_MS,
      handlerMs: 5,
      recordSql: recordEffectSql(stand),
      enterSql: `INSERT INTO in_work (grp, n, pid) VALUES (${marks.join(', ')})`,
      leaveSql: `DELETE FROM in_work WHERE grp = ${marks[0]} AND n = ${marks[1]} AND pid = ${marks[2]}`,
    };
    const probe = await db.openDriver({ poolSize: 3 });
    const replicas = await startReplicas(REPLICAS, config);
    const startedAt = Date.now();
    // Published once every replica is ready, so all three take part from the first row. One
    // publish per group keeps each group's ids, and so its claim order, in payload order.
    if (isFifo) {
      for (const name of names) {
        await publishAll(db, table.queue(name), Array.from({ length: perGroup }, (_, n) => ({ payload: n })));
      }
    } else {
      const items = Array.from({ length: messages }, (_, index) => ({
        payload: Math.floor(index / groups),
        partitionKey: names[index % groups]!,
      }));
      await publishAll(db, table.queue('keyed'), items);
    }
    // A killed replica's in_work rows stay behind; its pid is left out from the moment it is killed.
    const deadPids = new Set<number>();
    const liveLeasesSql =
      isFifo && form === 'lease'
        ? `SELECT MAX(c) AS most FROM (SELECT COUNT(*) AS c FROM chaos_jobs WHERE locked_until > ${placeholder(stand, 1)} GROUP BY queue) t`
        : undefined;
    const sampler = new InWorkSampler(probe, { isFifo, liveLeasesSql, deadPids });
    sampler.start();
    const kills = await killWhileRunning({
      replicas,
      config,
      everyMs: KILL_EVERY_MS,
      limitMs: RUN_LIMIT_MS,
      isDone: async () => (await readCount(probe, 'SELECT COUNT(*) AS n FROM chaos_jobs')) === 0,
      onKilling: (pid) => deadPids.add(pid),
    });
    const seconds = (Date.now() - startedAt) / 1000;
    await sampler.stop();
    await Promise.all(replicas.map((replica) => stopReplica(replica)));
    const starts = await readRows(probe, "SELECT message_id, grp, n, pid FROM effects WHERE phase = 'start' ORDER BY seq");
    const done = await readCount(probe, "SELECT COUNT(DISTINCT message_id) AS n FROM effects WHERE phase = 'done'");
    const order = isFifo ? fifoOrder(starts) : keyedOrder(starts);
    const lost = messages - done;
    const overlaps = Math.max(0, sampler.mostInWork - 1) + Math.max(0, sampler.mostLiveLeases - 1);
    const broken = (isFifo ? order.outOfOrder : 0) + overlaps;
    return {
      database: stand.name,
      kind,
      form,
      messages,
      groups,
      kills,
      lost,
      ...order,
      samples: sampler.samples,
      mostInWorkAtOnce: sampler.mostInWork,
      ...(isFifo && form === 'lease' ? { mostLiveLeasesAtOnce: sampler.mostLiveLeases } : {}),
      broken,
      seconds,
    };
  });
}

type Start = Record<string, unknown>;

/**
 * Per group, in the order written, each start must be the next row of the group (a first
 * handling) or the row started last (a repeat after a kill).
 */
function fifoOrder(starts: Start[]): { repeats: number; outOfOrder: number } {
  const lastOf = new Map<string, number>();
  let repeats = 0;
  let outOfOrder = 0;
  for (const start of starts) {
    const group = String(start['grp']);
    const n = Number(start['n']);
    const last = lastOf.get(group) ?? -1;
    if (n === last + 1) lastOf.set(group, n);
    else if (n === last) repeats += 1;
    else outOfOrder += 1;
  }
  return { repeats, outOfOrder };
}

/** Out-of-order first starts per process and key, and per key across processes. */
function keyedOrder(starts: Start[]): { repeats: number; outOfOrder: number; outOfOrderAcrossProcesses: number } {
  const seen = new Set<string>();
  const highestInProcess = new Map<string, number>();
  const highestOfKey = new Map<string, number>();
  let repeats = 0;
  let outOfOrder = 0;
  let outOfOrderAcrossProcesses = 0;
  for (const start of starts) {
    const key = String(start['grp']);
    const n = Number(start['n']);
    if (seen.has(String(start['message_id']))) {
      repeats += 1;
      continue;
    }
    seen.add(String(start['message_id']));
    const processKey = `${String(start['pid'])}/${key}`;
    if (n < (highestInProcess.get(processKey) ?? -1)) outOfOrder += 1;
    if (n < (highestOfKey.get(key) ?? -1)) outOfOrderAcrossProcesses += 1;
    highestInProcess.set(processKey, Math.max(n, highestInProcess.get(processKey) ?? -1));
    highestOfKey.set(key, Math.max(n, highestOfKey.get(key) ?? -1));
  }
  return { repeats, outOfOrder, outOfOrderAcrossProcesses };
}

interface SamplerOptions {
  readonly isFifo: boolean;
  /** FIFO lease tables: the most rows of one group whose lease is live at the bound instant. */
  readonly liveLeasesSql: string | undefined;
  readonly deadPids: ReadonlySet<number>;
}

/**
 * Reads from the database, every 100 ms while the run goes on, the most rows in work at once:
 * per group (FIFO) or per process and key (keyed lanes), from the in_work table the handlers
 * keep, and for FIFO lease tables the most rows of a group holding a live lease.
 */
class InWorkSampler {
  samples = 0;
  mostInWork = 0;
  mostLiveLeases = 0;
  readonly #probe: Driver;
  readonly #options: SamplerOptions;
  #running: Promise<void> | undefined;
  #isStopping = false;

  constructor(probe: Driver, options: SamplerOptions) {
    this.#probe = probe;
    this.#options = options;
  }

  start(): void {
    this.#running = this.#loop();
  }

  async stop(): Promise<void> {
    this.#isStopping = true;
    await this.#running;
  }

  async #loop(): Promise<void> {
    const { isFifo, liveLeasesSql, deadPids } = this.#options;
    while (!this.#isStopping) {
      const live = deadPids.size === 0 ? '' : `WHERE pid NOT IN (${[...deadPids].join(', ')})`;
      const by = isFifo ? 'grp' : 'pid, grp';
      const inWork = await readCount(this.#probe, `SELECT MAX(c) AS most FROM (SELECT COUNT(*) AS c FROM in_work ${live} GROUP BY ${by}) t`);
      this.mostInWork = Math.max(this.mostInWork, inWork);
      if (liveLeasesSql !== undefined) {
        this.mostLiveLeases = Math.max(this.mostLiveLeases, await readCount(this.#probe, liveLeasesSql, [new Date()]));
      }
      this.samples += 1;
      await new Promise((resolve) => setTimeout(resolve, SAMPLE_EVERY_MS));
    }
  }
}
