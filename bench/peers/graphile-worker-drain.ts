import { DrainWatch, settlesWithin } from '../partitioning/drain-watch.js';
import { fillRanges, isGrowthRun, PEER_INSERT_CHUNK, type FillRange, rowsPerSecondSince, type Contender, type ContenderOutcome, type ContenderRun } from '../suite/contender.js';
import { readCount, readServerVersion, runOnPeerDatabase, untilNoneLeft } from './peer-database.js';
import { importPackage } from './peer-packages.js';

type LogLevel = 'error' | 'warning' | 'info' | 'debug';
type LogFunction = (level: LogLevel, message: string, meta?: unknown) => void;

/** The parts of graphile-worker 0.17 the benchmark uses. */
interface GraphileWorkerLike {
  makeWorkerUtils(options: { connectionString: string; logger: unknown }): Promise<{
    migrate(): Promise<void>;
    addJobs(specs: { identifier: string; payload: unknown }[]): Promise<unknown>;
    release(): Promise<void>;
  }>;
  run(options: {
    connectionString: string;
    concurrency: number;
    maxPoolSize: number;
    noHandleSignals: boolean;
    logger: unknown;
    taskList: Record<string, () => Promise<void>>;
    preset?: { worker: Record<string, unknown> };
  }): Promise<{ stop(): Promise<void> }>;
  Logger: new (factory: (scope: unknown) => LogFunction) => unknown;
}

const TASK = 'bench';
/** Finished jobs are deleted; a job that failed stays with its attempt counted. */
const REMAINING_SQL = 'SELECT COUNT(*) AS remaining FROM graphile_worker._private_jobs';

/**
 * graphile-worker's documented fast mode: the pool locks up to 500 jobs into a local queue that
 * its workers take from, and completions that arrive together go to the database in one call.
 */
const LOCAL_QUEUE_PRESET = { worker: { localQueue: { size: 500 }, completeJobBatchDelay: 0, failJobBatchDelay: 0 } };

/** graphile-worker 0.17.3 as `run()` starts it by default, and in its fast mode. */
export function graphileWorkerContenders(): Contender[] {
  return [
    { id: 'peer.graphileWorker', kind: 'peer', label: 'graphile-worker', databases: ['postgres'], run: (run) => drainWithGraphileWorker(run, undefined) },
    {
      id: 'peer.graphileWorkerLocalQueue',
      kind: 'peer',
      label: 'graphile-worker, localQueue 500, batched completes',
      databases: ['postgres'],
      run: (run) => drainWithGraphileWorker(run, LOCAL_QUEUE_PRESET),
    },
  ];
}

async function drainWithGraphileWorker(run: ContenderRun, preset: typeof LOCAL_QUEUE_PRESET | undefined): Promise<ContenderOutcome> {
  const worker = await importPackage<GraphileWorkerLike>('graphile-worker', 'commonjs');
  const watch = new DrainWatch(run.messages, run.signal);
  // Its own log lines (start-up, each stop) are not printed; errors count against the run.
  const logger = new worker.Logger(() => (level, message) => {
    if (level === 'error') watch.recordError(new Error(message));
  });
  const connectionString = run.database.url;
  const utils = await worker.makeWorkerUtils({ connectionString, logger });
  let insertRowsPerSecond: number | undefined;
  const isGrowth = isGrowthRun(run);
  try {
    await utils.migrate();
    if (isGrowth) {
      await runOnPeerDatabase(run.database, [...fillRanges(run).map(addJobsSeries), ...SETTLE_SQL]);
    } else {
      const insertStartedAt = performance.now();
      for (let first = 0; first < run.messages; first += PEER_INSERT_CHUNK) {
        const count = Math.min(PEER_INSERT_CHUNK, run.messages - first);
        await utils.addJobs(Array.from({ length: count }, (_, index) => ({ identifier: TASK, payload: { n: first + index } })));
      }
      insertRowsPerSecond = rowsPerSecondSince(run.messages, insertStartedAt);
    }
  } finally {
    await utils.release();
  }
  const runner = await worker.run({
    connectionString,
    concurrency: run.workers,
    maxPoolSize: run.workers + 2,
    noHandleSignals: true,
    logger,
    taskList: { [TASK]: async () => watch.recordHandled() },
    ...(preset === undefined ? {} : { preset }),
  });
  try {
    await watch.finished;
    if (!watch.cutSignal.aborted && !isGrowth) await untilNoneLeft(run.database, REMAINING_SQL);
  } finally {
    await settlesWithin(runner.stop(), 20_000);
  }
  const measurement = watch.measurement({ claims: 0, emptyClaims: 0, maxConnectionsHeld: 0 });
  const remaining = await readCount(run.database, REMAINING_SQL);
  return { measurement, remaining, serverVersion: await readServerVersion(run.database), ...(insertRowsPerSecond === undefined ? {} : { insertRowsPerSecond }) };
}

/** graphile-worker's own bulk function, `add_jobs`, fed a generated series on the server (`run_at` a day ahead for delayed rows). */
function addJobsSeries({ from, to, isDelayed }: FillRange): string {
  const runAt = isDelayed ? "now() + interval '1 day'" : 'NULL';
  return (
    `SELECT count(*) FROM graphile_worker.add_jobs(ARRAY(SELECT ROW('${TASK}', json_build_object('n', n), NULL, ${runAt}, NULL, NULL, NULL, NULL)::graphile_worker.job_spec ` +
    `FROM generate_series(${from}, ${to}) AS n))`
  );
}

/** As the library's growth tables are settled after their fill: what autovacuum would do next, then a checkpoint. */
const SETTLE_SQL = ['VACUUM (ANALYZE) graphile_worker._private_jobs', 'CHECKPOINT'];
