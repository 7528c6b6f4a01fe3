import { DrainWatch } from '../partitioning/drain-watch.js';
import { fillRanges, isGrowthRun, PEER_INSERT_CHUNK, type FillRange, rowsPerSecondSince, type Contender, type ContenderOutcome, type ContenderRun } from '../suite/contender.js';
import { sqliteFileOf } from './peer-database.js';
import { importPackage } from './peer-packages.js';

interface SqliteDatabaseLike {
  pragma(source: string): unknown;
  prepare(sql: string): { get(): unknown };
  exec(sql: string): unknown;
}

const JOB_STATUS = { pending: 0, processing: 1, failed: 3 } as const;

/** The parts of plainjob 0.0.14 the benchmark uses. */
interface PlainjobLike {
  better(database: SqliteDatabaseLike): unknown;
  defineQueue(options: { connection: unknown; logger: Logger }): {
    addMany(type: string, data: unknown[]): unknown;
    countJobs(options: { type?: string; status?: number }): number;
    close(): void;
  };
  defineWorker(
    type: string,
    processor: () => void,
    options: { queue: ReturnType<PlainjobLike['defineQueue']>; logger: Logger; onFailed: (job: unknown, error: string) => void },
  ): { start(): Promise<void>; stop(): Promise<void> };
}

interface Logger {
  error(message: string): void;
  warn(message: string): void;
  info(message: string): void;
  debug(message: string): void;
}

type SqliteDatabaseConstructor = new (file: string) => SqliteDatabaseLike;

const JOB_TYPE = 'bench';

/**
 * plainjob 0.0.14 on a new SQLite file: `workers` worker loops on one queue and one
 * better-sqlite3 handle (the library's own, from the repository). plainjob sets WAL and
 * `synchronous = NORMAL` itself; the second run puts `synchronous` back to FULL, the setting the
 * tablequeue runs have (better-sqlite3's default), so the two can be compared at equal durability.
 */
export function plainjobContenders(): Contender[] {
  return [
    { id: 'peer.plainjob', kind: 'peer', label: 'plainjob (synchronous NORMAL, its own)', databases: ['sqlite'], run: (run) => drainWithPlainjob(run, 'NORMAL') },
    {
      id: 'peer.plainjobFullSync',
      kind: 'peer',
      label: 'plainjob, synchronous FULL',
      databases: ['sqlite'],
      run: (run) => drainWithPlainjob(run, 'FULL'),
    },
  ];
}

async function drainWithPlainjob(run: ContenderRun, synchronous: 'NORMAL' | 'FULL'): Promise<ContenderOutcome> {
  const plainjob = await importPackage<PlainjobLike>('plainjob', 'module');
  const SqliteDatabase = await importPackage<SqliteDatabaseConstructor>('better-sqlite3', 'commonjs');
  const watch = new DrainWatch(run.messages, run.signal);
  const database = new SqliteDatabase(sqliteFileOf(run.database));
  // plainjob logs every job at debug level through the logger it is given; errors count against the run.
  const logger: Logger = {
    error: (message) => watch.recordError(new Error(message)),
    warn: () => undefined,
    info: () => undefined,
    debug: () => undefined,
  };
  const queue = plainjob.defineQueue({ connection: plainjob.better(database), logger });
  try {
    if (synchronous === 'FULL') database.pragma('synchronous = FULL');
    let insertRowsPerSecond: number | undefined;
    if (isGrowthRun(run)) {
      for (const range of fillRanges(run)) database.exec(insertSeries(range));
      database.exec('ANALYZE');
    } else {
      const insertStartedAt = performance.now();
      for (let first = 0; first < run.messages; first += PEER_INSERT_CHUNK) {
        const count = Math.min(PEER_INSERT_CHUNK, run.messages - first);
        queue.addMany(JOB_TYPE, Array.from({ length: count }, (_, index) => ({ n: first + index })));
      }
      insertRowsPerSecond = rowsPerSecondSince(run.messages, insertStartedAt);
    }
    const onFailed = (_job: unknown, error: string) => watch.recordError(new Error(error));
    const workers = Array.from({ length: run.workers }, () => plainjob.defineWorker(JOB_TYPE, () => watch.recordHandled(), { queue, logger, onFailed }));
    const running = workers.map((worker) => worker.start());
    try {
      await watch.finished;
    } finally {
      await Promise.all(workers.map((worker) => worker.stop()));
      await Promise.allSettled(running);
    }
    const measurement = watch.measurement({ claims: 0, emptyClaims: 0, maxConnectionsHeld: 0 });
    const remaining = [JOB_STATUS.pending, JOB_STATUS.processing, JOB_STATUS.failed]
      .map((status) => queue.countJobs({ type: JOB_TYPE, status }))
      .reduce((sum, count) => sum + count, 0);
    const { version } = database.prepare('SELECT sqlite_version() AS version').get() as { version: string };
    return { measurement, remaining, serverVersion: version, ...(insertRowsPerSecond === undefined ? {} : { insertRowsPerSecond }) };
  } finally {
    queue.close();
  }
}

const EPOCH_MS_NOW = "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)";

/** The rows plainjob's `addMany` writes (pending, data as JSON text; due an hour ago or a day ahead, in milliseconds), from a recursive CTE. */
function insertSeries({ from, to, isDelayed }: FillRange): string {
  const nextRunAt = `${EPOCH_MS_NOW} ${isDelayed ? '+ 86400000' : '- 3600000'}`;
  return (
    `WITH RECURSIVE series(n) AS (SELECT ${from} UNION ALL SELECT n + 1 FROM series WHERE n < ${to}) ` +
    `INSERT INTO plainjob_jobs (type, data, created_at, next_run_at) ` +
    `SELECT '${JOB_TYPE}', '{"n":' || n || '}', ${EPOCH_MS_NOW}, ${nextRunAt} FROM series`
  );
}
