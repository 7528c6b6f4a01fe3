import { DrainWatch, settlesWithin } from '../partitioning/drain-watch.js';
import { PEER_INSERT_CHUNK, rowsPerSecondSince, type Contender, type ContenderOutcome, type ContenderRun } from '../suite/contender.js';
import { readCount, readServerVersion, untilNoneLeft } from './peer-database.js';
import { importPackage } from './peer-packages.js';

interface BullConnection {
  connectionString: string;
  max: number;
  migrate: boolean;
}

/** The parts of BullMQ 6.7 (PostgreSQL backend) the benchmark uses. */
interface BullMqLike {
  Queue: new (name: string, options: { connection: BullConnection }, backend: unknown) => {
    waitUntilReady(): Promise<unknown>;
    addBulk(jobs: { name: string; data: unknown; opts: { removeOnComplete: boolean } }[]): Promise<unknown>;
    close(): Promise<void>;
  };
  Worker: new (
    name: string,
    processor: () => Promise<void>,
    options: { connection: BullConnection; concurrency: number },
    backend: unknown,
  ) => {
    on(event: 'error' | 'failed', listener: (...args: unknown[]) => void): void;
    close(): Promise<void>;
  };
  createPostgresBackend: unknown;
}

const QUEUE = 'bench';
/** Jobs are removed on completion (`removeOnComplete`). */
const REMAINING_SQL = 'SELECT COUNT(*) AS remaining FROM bullmq.job';
const CLOSE_TIMEOUT_MS = 20_000;

/** BullMQ 6.7.0 on its PostgreSQL backend: one `Worker` with `concurrency: workers`, finished jobs removed. */
export function bullMqContender(): Contender {
  return { id: 'peer.bullmq', kind: 'peer', label: 'BullMQ (PostgreSQL backend)', databases: ['postgres'], run: drainWithBullMq };
}

async function drainWithBullMq(run: ContenderRun): Promise<ContenderOutcome> {
  const bull = await importPackage<BullMqLike>('bullmq', 'commonjs');
  const watch = new DrainWatch(run.messages, run.signal);
  // Its schema is created by the first connection (`migrate: true`) in the run's fresh database.
  const connection = { connectionString: run.database.url, max: run.workers + 2, migrate: true };
  const queue = new bull.Queue(QUEUE, { connection }, bull.createPostgresBackend);
  let insertRowsPerSecond: number;
  try {
    // Connected and migrated before the insert is timed.
    await queue.waitUntilReady();
    const insertStartedAt = performance.now();
    for (let first = 0; first < run.messages; first += PEER_INSERT_CHUNK) {
      const count = Math.min(PEER_INSERT_CHUNK, run.messages - first);
      await queue.addBulk(
        Array.from({ length: count }, (_, index) => ({ name: QUEUE, data: { n: first + index }, opts: { removeOnComplete: true } })),
      );
    }
    insertRowsPerSecond = rowsPerSecondSince(run.messages, insertStartedAt);
    const worker = new bull.Worker(QUEUE, async () => watch.recordHandled(), { connection, concurrency: run.workers }, bull.createPostgresBackend);
    worker.on('error', (error) => watch.recordError(error));
    worker.on('failed', (_job, error) => watch.recordError(error));
    try {
      await watch.finished;
      if (!watch.cutSignal.aborted) await untilNoneLeft(run.database, REMAINING_SQL);
    } finally {
      await settlesWithin(worker.close(), CLOSE_TIMEOUT_MS);
    }
  } finally {
    await settlesWithin(queue.close(), CLOSE_TIMEOUT_MS);
  }
  const measurement = watch.measurement({ claims: 0, emptyClaims: 0, maxConnectionsHeld: 0 });
  const remaining = await readCount(run.database, REMAINING_SQL);
  return { measurement, remaining, serverVersion: await readServerVersion(run.database), insertRowsPerSecond };
}
