import { Broker } from '../../src/broker/broker.js';
import { createDriver } from '../../src/driver/create-driver.js';
import { runSql } from '../bench-database.js';
import type { LatencyWatch } from '../latency/latency-benchmark.js';
import { publishAtSteadyRate, wallClockMs, type LatencyPayload } from '../latency/steady-publishing.js';
import { BENCH_QUEUE_NAME, createBenchTable, type BenchForm } from '../partitioning/bench-table.js';
import { settlesWithin } from '../partitioning/drain-watch.js';
import type { ExtraSubscribeOptions } from '../partitioning/service-drain.js';
import { importPackage } from '../peers/peer-packages.js';
import { SUITE_BATCH, SUITE_PREFETCH } from '../suite/library-contenders.js';

/** One latency run: messages published one at a time at a steady rate, each timed to its handler's start. */
export interface LatencyRun {
  /** The database as the contender reaches it (through the proxy). */
  readonly url: string;
  /** The same database reached directly: tables are made there, untimed. */
  readonly directUrl: string;
  readonly workers: number;
  readonly messages: number;
  readonly intervalMs: number;
  readonly watch: LatencyWatch;
  /** The library's contenders report their subscription's claims over the run, and how many found nothing. */
  readonly onClaims: (claims: number, emptyClaims: number) => void;
}

export interface LatencyContender {
  /** The drain contender's id it matches, so one `--only` names both. */
  readonly id: string;
  readonly label: string;
  run(run: LatencyRun): Promise<void>;
}

const STOP_TIMEOUT_MS = 10_000;

/**
 * The library's settings measured at a distance, as a service runs them: the subscribing broker
 * publishes (a publish wakes its own subscriptions; on PostgreSQL it also sends NOTIFY).
 */
export function libraryLatencyContenders(): LatencyContender[] {
  const shapes: { id: string; label: string; form: BenchForm; extra: ExtraSubscribeOptions; batch?: number }[] = [
    { id: 'service.leaseCoalesced', label: 'tablequeue lease, defaults', form: 'lease', extra: {} },
    { id: 'service.rowLock', label: 'tablequeue row lock, defaults', form: 'rowLock', extra: {} },
    { id: 'service.leaseCoalescedPrefetch', label: `tablequeue lease, prefetch ${SUITE_PREFETCH}`, form: 'lease', extra: { prefetch: SUITE_PREFETCH } },
    { id: 'service.leaseBatch', label: `tablequeue lease, batch ${SUITE_BATCH}`, form: 'lease', extra: {}, batch: SUITE_BATCH },
  ];
  return shapes.map((shape) => ({
    id: shape.id,
    label: shape.label,
    run: async (run) => {
      const table = createBenchTable(shape.form);
      const setup = createDriver(run.directUrl, { poolSize: 1 });
      await setup.open();
      try {
        for (const sql of table.createTableSql('postgres')) await runSql(setup, sql);
      } finally {
        await setup.close();
      }
      const queue = table.queue<LatencyPayload>(BENCH_QUEUE_NAME);
      const broker = new Broker({ database: run.url, pool: { max: run.workers + 2 } });
      broker.on('error', (error) => run.watch.recordError(error));
      if (shape.batch === undefined) {
        broker.subscribe(queue, (message) => run.watch.recordHandled(message.payload as LatencyPayload, wallClockMs()), { ...shape.extra, workers: run.workers });
      } else {
        broker.subscribe(
          queue,
          (messages) => {
            const startedAt = wallClockMs();
            for (const message of messages) run.watch.recordHandled(message.payload as LatencyPayload, startedAt);
          },
          { ...shape.extra, workers: run.workers, batch: shape.batch },
        );
      }
      await broker.start();
      try {
        await publishUntilHandled(run, (payload) => broker.publish(queue, payload));
        const [subscription] = broker.stats().subscriptions;
        run.onClaims(subscription?.claims ?? 0, subscription?.emptyClaims ?? 0);
      } finally {
        await settlesWithin(broker.stop({ timeoutMs: STOP_TIMEOUT_MS }), 2 * STOP_TIMEOUT_MS);
      }
    },
  }));
}

/** The parts of graphile-worker 0.17 a latency run uses. */
interface GraphileWorkerLike {
  run(options: {
    connectionString: string;
    concurrency: number;
    maxPoolSize: number;
    noHandleSignals: boolean;
    logger: unknown;
    taskList: Record<string, (payload: unknown) => Promise<void>>;
    preset?: { worker: Record<string, unknown> };
  }): Promise<{ stop(): Promise<void>; addJob(identifier: string, payload: unknown): Promise<unknown> }>;
  Logger: new (factory: (scope: unknown) => (level: string, message: string) => void) => unknown;
}

/** The parts of pg-boss 10 a latency run uses. */
interface PgBossLike {
  on(event: 'error', listener: (error: unknown) => void): void;
  start(): Promise<unknown>;
  createQueue(name: string): Promise<void>;
  send(name: string, data: object): Promise<string | null>;
  work(name: string, options: { batchSize: number; pollingIntervalSeconds: number }, handler: (jobs: { data: unknown }[]) => Promise<void>): Promise<string>;
  stop(options: { graceful: boolean; wait: boolean; timeout: number }): Promise<void>;
}
type PgBossConstructor = new (options: { connectionString: string; max: number; supervise: boolean; schedule: boolean }) => PgBossLike;

/** graphile-worker's fast mode, as its drain runs it (bench/peers/graphile-worker-drain.ts). */
const GRAPHILE_LOCAL_QUEUE_PRESET = { worker: { localQueue: { size: 500 }, completeJobBatchDelay: 0, failJobBatchDelay: 0 } };
/** pg-boss's batch mode, as its drain runs it (bench/peers/pg-boss-drain.ts): its smallest poll. */
const PG_BOSS_BATCH = 100;
const PG_BOSS_POLL_SECONDS = 0.5;

/**
 * The peers measured the same way: the process that works the jobs also adds them, through the
 * peer's own API (graphile-worker's runner.addJob, whose insert trigger sends its NOTIFY; pg-boss's
 * send, which its workers find at their next poll).
 */
export function peerLatencyContenders(): LatencyContender[] {
  const graphile = (id: string, label: string, preset: typeof GRAPHILE_LOCAL_QUEUE_PRESET | undefined): LatencyContender => ({
    id,
    label,
    run: async (run) => {
      const worker = await importPackage<GraphileWorkerLike>('graphile-worker', 'commonjs');
      const logger = new worker.Logger(() => (level, message) => {
        if (level === 'error') run.watch.recordError(new Error(message));
      });
      const runner = await worker.run({
        connectionString: run.url,
        concurrency: run.workers,
        maxPoolSize: run.workers + 2,
        noHandleSignals: true,
        logger,
        taskList: { bench: async (payload) => run.watch.recordHandled(payload as LatencyPayload, wallClockMs()) },
        ...(preset === undefined ? {} : { preset }),
      });
      try {
        await publishUntilHandled(run, (payload) => runner.addJob('bench', payload));
      } finally {
        await settlesWithin(runner.stop(), 2 * STOP_TIMEOUT_MS);
      }
    },
  });
  return [
    graphile('peer.graphileWorker', 'graphile-worker', undefined),
    graphile('peer.graphileWorkerLocalQueue', 'graphile-worker, localQueue 500, batched completes', GRAPHILE_LOCAL_QUEUE_PRESET),
    {
      id: 'peer.pgBossBatch',
      label: `pg-boss, batchSize ${PG_BOSS_BATCH}`,
      run: async (run) => {
        const PgBoss = await importPackage<PgBossConstructor>('pg-boss', 'commonjs');
        const boss = new PgBoss({ connectionString: run.url, max: run.workers + 2, supervise: false, schedule: false });
        boss.on('error', (error) => run.watch.recordError(error));
        try {
          await boss.start();
          await boss.createQueue(BENCH_QUEUE_NAME);
          const handle = async (jobs: { data: unknown }[]) => {
            const startedAt = wallClockMs();
            for (const job of jobs) run.watch.recordHandled(job.data as LatencyPayload, startedAt);
          };
          for (let loop = 0; loop < run.workers; loop += 1) {
            await boss.work(BENCH_QUEUE_NAME, { batchSize: PG_BOSS_BATCH, pollingIntervalSeconds: PG_BOSS_POLL_SECONDS }, handle);
          }
          await publishUntilHandled(run, (payload) => boss.send(BENCH_QUEUE_NAME, payload));
        } finally {
          await settlesWithin(boss.stop({ graceful: true, wait: true, timeout: STOP_TIMEOUT_MS }), 2 * STOP_TIMEOUT_MS);
        }
      },
    },
  ];
}

async function publishUntilHandled(run: LatencyRun, publish: (payload: LatencyPayload) => Promise<unknown>): Promise<void> {
  const publishing = publishAtSteadyRate(publish, { messages: run.messages, intervalMs: run.intervalMs, signal: run.watch.cutSignal });
  await Promise.all([publishing.catch((error: unknown) => run.watch.recordFailure(error)), run.watch.finished]);
}
