import { DrainWatch, settlesWithin } from '../partitioning/drain-watch.js';
import { fillRanges, isGrowthRun, PEER_INSERT_CHUNK, type FillRange, rowsPerSecondSince, type Contender, type ContenderRun, type ContenderOutcome } from '../suite/contender.js';
import { readCount, readServerVersion, runOnPeerDatabase, untilNoneLeft } from './peer-database.js';
import { importPackage } from './peer-packages.js';

/** The parts of pg-boss 10 the benchmark uses. */
interface PgBossLike {
  on(event: 'error', listener: (error: unknown) => void): void;
  start(): Promise<unknown>;
  createQueue(name: string): Promise<void>;
  insert(jobs: { name: string; data: unknown }[]): Promise<unknown>;
  work(name: string, options: { batchSize: number; pollingIntervalSeconds: number }, handler: (jobs: unknown[]) => Promise<void>): Promise<string>;
  stop(options: { graceful: boolean; wait: boolean; timeout: number }): Promise<void>;
}

type PgBossConstructor = new (options: {
  connectionString: string;
  max: number;
  supervise: boolean;
  schedule: boolean;
}) => PgBossLike;

const QUEUE = 'bench';
/** Completed jobs stay, marked completed. */
const REMAINING_SQL = "SELECT COUNT(*) AS remaining FROM pgboss.job WHERE state <> 'completed'";
/** Jobs per fetch in pg-boss's documented batch mode. */
const PG_BOSS_BATCH = 100;
/** pg-boss 10's smallest poll interval: each `work()` loop waits this long after every fetch. */
const PG_BOSS_POLL_SECONDS = 0.5;
const STOP_TIMEOUT_MS = 10_000;

/**
 * pg-boss 10.4.2 in its batch mode: `workers` `work()` loops, each fetching up to 100 jobs and
 * completing them together. Its default (one job per fetch, a 2-second poll after every fetch)
 * drains at most `workers / 2` jobs per second, so it is not run: 20,000 jobs would take hours.
 * No supervision or scheduling (their timers would only add noise).
 */
export function pgBossContender(): Contender {
  return {
    id: 'peer.pgBossBatch',
    kind: 'peer',
    label: `pg-boss, batchSize ${PG_BOSS_BATCH}`,
    databases: ['postgres'],
    batch: PG_BOSS_BATCH,
    run: drainWithPgBoss,
  };
}

async function drainWithPgBoss(run: ContenderRun): Promise<ContenderOutcome> {
  const PgBoss = await importPackage<PgBossConstructor>('pg-boss', 'commonjs');
  const watch = new DrainWatch(run.messages, run.signal);
  const boss = new PgBoss({ connectionString: run.database.url, max: run.workers + 2, supervise: false, schedule: false });
  boss.on('error', (error) => watch.recordError(error));
  let insertRowsPerSecond: number | undefined;
  const isGrowth = isGrowthRun(run);
  try {
    await boss.start();
    await boss.createQueue(QUEUE);
    if (isGrowth) {
      await runOnPeerDatabase(run.database, [...fillRanges(run).map(insertSeries), ...SETTLE_SQL]);
    } else {
      const insertStartedAt = performance.now();
      for (let first = 0; first < run.messages; first += PEER_INSERT_CHUNK) {
        const count = Math.min(PEER_INSERT_CHUNK, run.messages - first);
        await boss.insert(Array.from({ length: count }, (_, index) => ({ name: QUEUE, data: { n: first + index } })));
      }
      insertRowsPerSecond = rowsPerSecondSince(run.messages, insertStartedAt);
    }
    const handle = async (jobs: unknown[]) => {
      for (let index = 0; index < jobs.length; index += 1) watch.recordHandled();
    };
    for (let loop = 0; loop < run.workers; loop += 1) {
      await boss.work(QUEUE, { batchSize: PG_BOSS_BATCH, pollingIntervalSeconds: PG_BOSS_POLL_SECONDS }, handle);
    }
    await watch.finished;
    if (!watch.cutSignal.aborted && !isGrowth) await untilNoneLeft(run.database, REMAINING_SQL);
  } finally {
    await settlesWithin(boss.stop({ graceful: true, wait: true, timeout: STOP_TIMEOUT_MS }), 2 * STOP_TIMEOUT_MS);
  }
  const measurement = watch.measurement({ claims: 0, emptyClaims: 0, maxConnectionsHeld: 0 });
  const remaining = await readCount(run.database, REMAINING_SQL);
  return { measurement, remaining, serverVersion: await readServerVersion(run.database), ...(insertRowsPerSecond === undefined ? {} : { insertRowsPerSecond }) };
}

/**
 * The rows pg-boss's own insert writes for a job with only a name and data: the queue's policy,
 * every other column at the table's defaults (retry limit 2, expiry 15 minutes, kept 14 days,
 * due now, or `start_after` a day ahead for delayed rows), which are what its insert falls back
 * to for a queue created without options.
 */
function insertSeries({ from, to, isDelayed }: FillRange): string {
  const startAfter = isDelayed ? "now() + interval '1 day'" : 'now()';
  return (
    `INSERT INTO pgboss.job (name, data, policy, start_after) SELECT q.name, jsonb_build_object('n', n), q.policy, ${startAfter} ` +
    `FROM generate_series(${from}, ${to}) AS n, pgboss.queue AS q WHERE q.name = '${QUEUE}'`
  );
}

/** As the library's growth tables are settled after their fill: what autovacuum would do next, then a checkpoint. */
const SETTLE_SQL = ['VACUUM (ANALYZE) pgboss.job', 'CHECKPOINT'];
