import { loadavg } from 'node:os';
import { Broker } from '../../src/broker/broker.js';
import type { QueueTable } from '../../src/definition/define-table.js';
import { ensureFifoGuardRow } from '../../src/claim/fifo-guard-rows.js';
import { assertReachable, createBenchDatabase, type BenchDatabase, type BenchDatabaseName, type BenchServers } from '../bench-database.js';
import { runPublisherProcess, LatencyWatch } from '../latency/latency-benchmark.js';
import { wallClockMs, type LatencyPayload } from '../latency/steady-publishing.js';
import { BENCH_QUEUE_NAME } from '../partitioning/bench-table.js';
import { drainWithService } from '../partitioning/service-drain.js';
import { settlesWithin } from '../partitioning/drain-watch.js';
import { ClaimProbe, type ClaimTiming } from './claim-probe.js';
import { PEERS_LARGEST_BACKLOG, type GrowthContender, type GrowthDrainOutcome, type LibraryShape } from './growth-contenders.js';
import { countRows, fillGrowthTable, growthTable, withDriver, type FillBlock } from './growth-table.js';

export const GROWTH_PARTS = ['drain', 'delayed', 'groups', 'fifo', 'publish', 'latency'] as const;
export type GrowthPart = (typeof GROWTH_PARTS)[number];

export interface GrowthSettings {
  readonly databases: readonly BenchDatabaseName[];
  readonly parts: readonly GrowthPart[];
  /** Backlogs of due rows, e.g. 10,000 to 10,000,000. */
  readonly backlogs: readonly number[];
  /** Backlogs above this run on PostgreSQL only (10,000,000 would take most of an hour to fill elsewhere). */
  readonly largestBacklogBesidesPostgres: number;
  /** Messages timed per drain: the first N of the backlog (all of a smaller one). */
  readonly first: number;
  readonly workerCounts: Readonly<Record<BenchDatabaseName, number>>;
  /** Rows a day ahead in the same table, in the delayed part. */
  readonly delayedRows: number;
  /** The groups part: queues in one table, and rows in all of them together. */
  readonly groups: number;
  readonly groupRows: number;
  /** The fifo part: messages timed per backlog (claims of one FIFO group run one at a time). */
  readonly fifoFirst: number;
  /** The publish part: rows published one at a time, and through publishMany in calls of 1,000. */
  readonly publishOne: number;
  readonly publishMany: number;
  /** The latency part: messages published across processes, their interval, and the backlog draining beside them. */
  readonly latencyMessages: number;
  readonly latencyIntervalMs: number;
  readonly latencyBacklog: number;
  readonly contenders: readonly GrowthContender[];
  /** PostgreSQL storage parameters set on tablequeue's tables before the fill (a DDL change tried out). */
  readonly storage: string | undefined;
  readonly runTimeoutMs: number;
  readonly servers: BenchServers;
}

export interface DrainGrowthPoint {
  readonly part: 'drain' | 'delayed' | 'groups' | 'fifo';
  readonly database: BenchDatabaseName;
  readonly contender: string;
  readonly kind: 'service' | 'peer';
  readonly label: string;
  readonly workers: number;
  /** Due rows in the table (groups: in the one queue read), and rows a day ahead. */
  readonly backlog: number;
  readonly delayed: number;
  /** Groups: rows of every queue in the table together, and the number of queues. */
  readonly tableRows: number;
  readonly groups: number;
  readonly timed: number;
  readonly messagesPerSecond: number | undefined;
  readonly cpuMicrosecondsPerMessage: number | undefined;
  readonly claim: ClaimTiming | undefined;
  readonly fillSeconds: number | undefined;
  readonly isValid: boolean;
  readonly failure: string | undefined;
  readonly loadAverage: number;
}

export interface PublishGrowthPoint {
  readonly database: BenchDatabaseName;
  readonly tableRows: number;
  readonly mode: 'one' | 'many';
  readonly rows: number;
  readonly rowsPerSecond: number | undefined;
  readonly failure: string | undefined;
  readonly loadAverage: number;
}

export interface LatencyGrowthPoint {
  readonly database: BenchDatabaseName;
  /** Rows draining in the other queue of the same table while the latency messages are published. */
  readonly backlog: number;
  /** Messages of the backlog handled during the latency run, and their rate. */
  readonly backlogHandled: number;
  readonly handled: number;
  readonly p50: number | undefined;
  readonly p99: number | undefined;
  readonly max: number | undefined;
  readonly isValid: boolean;
  readonly failure: string | undefined;
  readonly loadAverage: number;
}

export interface GrowthOutcome {
  readonly drains: DrainGrowthPoint[];
  readonly publishes: PublishGrowthPoint[];
  readonly latencies: LatencyGrowthPoint[];
  readonly isInterrupted: boolean;
}

/**
 * Each point once (the biggest take minutes to fill, and a shared machine's drift between
 * rounds is read from the load average recorded with each point): per database, the drains at
 * every backlog, the same with the delayed rows beside them, one queue among many, publishes
 * into tables of every size, then the latency on PostgreSQL beside a draining backlog.
 */
export async function runGrowth(settings: GrowthSettings, interrupt: AbortSignal, onProgress: (line: string) => void): Promise<GrowthOutcome> {
  for (const database of settings.databases) await assertReachable(database, settings.servers);
  const outcome: GrowthOutcome = { drains: [], publishes: [], latencies: [], isInterrupted: false };
  const done = () => ({ ...outcome, isInterrupted: interrupt.aborted });
  for (const database of settings.databases) {
    const backlogs = settings.backlogs.filter((backlog) => database === 'postgres' || backlog <= settings.largestBacklogBesidesPostgres);
    for (const part of ['drain', 'delayed'] as const) {
      if (!settings.parts.includes(part)) continue;
      for (const backlog of backlogs) {
        for (const contender of settings.contenders) {
          if (interrupt.aborted) return done();
          if (!contender.databases.includes(database)) continue;
          if (contender.kind === 'peer' && backlog > (contender.largestBacklog ?? PEERS_LARGEST_BACKLOG)) continue;
          const delayed = part === 'delayed' ? settings.delayedRows : 0;
          const point = await drainPoint(settings, interrupt, { part, database, contender, backlog, delayed });
          outcome.drains.push(point);
          onProgress(describeDrainPoint(point));
        }
      }
    }
    if (settings.parts.includes('groups')) {
      for (const contender of settings.contenders.filter((candidate) => candidate.kind === 'service')) {
        for (const groups of [1, settings.groups]) {
          if (interrupt.aborted) return done();
          const point = await groupsPoint(settings, interrupt, { database, contender, groups });
          outcome.drains.push(point);
          onProgress(describeDrainPoint(point));
        }
      }
    }
    if (settings.parts.includes('fifo')) {
      const contender = settings.contenders.find((candidate) => candidate.libraryShape !== undefined && candidate.libraryShape.batch === undefined && candidate.libraryShape.claimLimit === 1);
      for (const backlog of contender === undefined ? [] : backlogs.filter((size) => size <= settings.largestBacklogBesidesPostgres)) {
        if (interrupt.aborted) return done();
        const point = await fifoPoint(settings, interrupt, { database, contender: contender!, backlog });
        outcome.drains.push(point);
        onProgress(describeDrainPoint(point));
      }
    }
    if (settings.parts.includes('publish')) {
      for (const tableRows of [0, ...backlogs]) {
        for (const mode of ['one', 'many'] as const) {
          if (interrupt.aborted) return done();
          const point = await publishPoint(settings, { database, tableRows, mode });
          outcome.publishes.push(point);
          onProgress(describePublishPoint(point));
        }
      }
    }
    if (database === 'postgres' && settings.parts.includes('latency')) {
      for (const backlog of [0, settings.latencyBacklog]) {
        if (interrupt.aborted) return done();
        const point = await latencyPoint(settings, interrupt, { database, backlog });
        outcome.latencies.push(point);
        onProgress(describeLatencyPoint(point));
      }
    }
  }
  return done();
}

/** A run's own deadline, aborted by its timeout or an interrupt; a controller, as the suite holds it. */
async function withDeadline<T>(settings: GrowthSettings, interrupt: AbortSignal, work: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const deadline = new AbortController();
  const endRun = () => deadline.abort();
  const timer = setTimeout(endRun, settings.runTimeoutMs);
  interrupt.addEventListener('abort', endRun, { once: true });
  try {
    return await work(deadline.signal);
  } finally {
    clearTimeout(timer);
    interrupt.removeEventListener('abort', endRun);
  }
}

async function onFreshDatabase<T>(settings: GrowthSettings, name: BenchDatabaseName, work: (database: BenchDatabase) => Promise<T>): Promise<T> {
  const database = await createBenchDatabase(name, settings.servers);
  try {
    return await work(database);
  } finally {
    await database.drop().catch((error: unknown) => {
      console.error(`could not drop the benchmark database at ${database.url}; remove it by hand:`, error);
    });
  }
}

async function drainPoint(
  settings: GrowthSettings,
  interrupt: AbortSignal,
  options: { part: 'drain' | 'delayed'; database: BenchDatabaseName; contender: GrowthContender; backlog: number; delayed: number },
): Promise<DrainGrowthPoint> {
  const { part, database, contender, backlog, delayed } = options;
  const workers = settings.workerCounts[database];
  const timed = Math.min(settings.first, backlog);
  const base = { part, database, contender: contender.id, kind: contender.kind, label: contender.label, workers, backlog, delayed, tableRows: backlog + delayed, groups: 1, timed };
  try {
    const result = await withDeadline(settings, interrupt, (signal) =>
      onFreshDatabase(settings, database, (fresh) => contender.run({ database: fresh, workers, backlog, delayed, first: timed, storage: settings.storage, signal })),
    );
    return { ...base, ...figuresOf(result), loadAverage: loadavg()[0]! };
  } catch (error) {
    return { ...base, ...failed(error), loadAverage: loadavg()[0]! };
  }
}

function figuresOf(result: GrowthDrainOutcome): Pick<DrainGrowthPoint, 'messagesPerSecond' | 'cpuMicrosecondsPerMessage' | 'claim' | 'fillSeconds' | 'isValid' | 'failure'> {
  const { measurement } = result;
  const failure = result.isValid
    ? undefined
    : `handled ${measurement.handled}${result.remaining === undefined ? '' : `, ${result.remaining} rows left`}${measurement.isCut ? ', cut short' : ''}${measurement.firstError === undefined ? '' : ` (${measurement.firstError})`}`;
  return {
    messagesPerSecond: result.isValid ? measurement.messagesPerSecond : undefined,
    cpuMicrosecondsPerMessage: result.isValid ? measurement.cpuMicrosecondsPerMessage : undefined,
    claim: result.claim,
    fillSeconds: result.fillSeconds,
    isValid: result.isValid,
    failure,
  };
}

function failed(error: unknown): Pick<DrainGrowthPoint, 'messagesPerSecond' | 'cpuMicrosecondsPerMessage' | 'claim' | 'fillSeconds' | 'isValid' | 'failure'> {
  return { messagesPerSecond: undefined, cpuMicrosecondsPerMessage: undefined, claim: undefined, fillSeconds: undefined, isValid: false, failure: error instanceof Error ? error.message : String(error) };
}

/**
 * One queue read among many: a table of `groupRows` rows spread round-robin over `groups` queues
 * (the benchmark's queue is one of them), of which the service drains its queue's rows alone,
 * against the same queue's rows alone in a table (`groups` 1).
 */
async function groupsPoint(
  settings: GrowthSettings,
  interrupt: AbortSignal,
  options: { database: BenchDatabaseName; contender: GrowthContender; groups: number },
): Promise<DrainGrowthPoint> {
  const { database, contender, groups } = options;
  const workers = settings.workerCounts[database];
  const queueRows = Math.floor(settings.groupRows / settings.groups);
  const tableRows = groups === 1 ? queueRows : queueRows * groups;
  const base = { part: 'groups' as const, database, contender: contender.id, kind: contender.kind, label: contender.label, workers, backlog: queueRows, delayed: 0, tableRows, groups, timed: queueRows };
  const shape = contender.libraryShape;
  if (shape === undefined) return { ...base, ...failed(new Error(`no groups run for ${contender.id}`)), loadAverage: loadavg()[0]! };
  const table = growthTable('grouped');
  const blocks: FillBlock[] = [{ rows: tableRows, timing: 'due', group: { groups } }];
  return { ...base, ...(await drainFilledTable(settings, interrupt, { database, shape, table, blocks, messages: queueRows })), loadAverage: loadavg()[0]! };
}

/**
 * One FIFO group of `backlog` due rows in a FIFO lease table, drained by the service at its lease
 * defaults for its first `fifoFirst` messages: each claim takes the group's head only while no row
 * of the group is in work, so however many workers wait, one message is in work at a time and the
 * rate is one claim, handler and ack after another. What grows with the backlog is what a claim
 * reads to know that no row of the group is in work.
 */
async function fifoPoint(
  settings: GrowthSettings,
  interrupt: AbortSignal,
  options: { database: BenchDatabaseName; contender: GrowthContender; backlog: number },
): Promise<DrainGrowthPoint> {
  const { database, contender, backlog } = options;
  const workers = settings.workerCounts[database];
  const timed = Math.min(settings.fifoFirst, backlog);
  const base = { part: 'fifo' as const, database, contender: contender.id, kind: contender.kind, label: contender.label, workers, backlog, delayed: 0, tableRows: backlog, groups: 1, timed };
  const shape = contender.libraryShape!;
  const table = growthTable('fifo');
  const blocks: FillBlock[] = [{ rows: backlog, timing: 'due', group: BENCH_QUEUE_NAME }];
  // The probe's claim runs the group guard from the start: on MariaDB its guard row must be there.
  const afterFill = (fresh: BenchDatabase) =>
    withDriver(fresh, (driver) => ensureFifoGuardRow(driver, database === 'mariadb' ? 'mysql' : database, table.spec, BENCH_QUEUE_NAME));
  return { ...base, ...(await drainFilledTable(settings, interrupt, { database, shape, table, blocks, messages: timed, afterFill })), loadAverage: loadavg()[0]! };
}

/**
 * The service's drain of `messages` rows of the benchmark's queue from a table filled with
 * `blocks` on a fresh database, the probe timing the claim meanwhile: valid when the drain was not
 * cut, handled them all, and left in the table every row it did not handle.
 */
async function drainFilledTable(
  settings: GrowthSettings,
  interrupt: AbortSignal,
  run: {
    database: BenchDatabaseName;
    shape: LibraryShape;
    table: QueueTable;
    blocks: readonly FillBlock[];
    messages: number;
    afterFill?: (fresh: BenchDatabase) => Promise<void>;
  },
): Promise<Pick<DrainGrowthPoint, 'messagesPerSecond' | 'cpuMicrosecondsPerMessage' | 'claim' | 'fillSeconds' | 'isValid' | 'failure'>> {
  const { database, shape, table, blocks, messages } = run;
  const tableRows = blocks.reduce((rows, block) => rows + block.rows, 0);
  try {
    const result = await withDeadline(settings, interrupt, (signal) =>
      onFreshDatabase(settings, database, async (fresh) => {
        const fillStartedAt = performance.now();
        await fillGrowthTable(fresh, table, blocks, settings.storage);
        await run.afterFill?.(fresh);
        const fillSeconds = (performance.now() - fillStartedAt) / 1000;
        const probe = await ClaimProbe.start(fresh, table, BENCH_QUEUE_NAME, shape.claimLimit);
        let claim: ClaimTiming | undefined;
        let measurement;
        try {
          const batch = shape.batch === undefined ? {} : { batch: shape.batch };
          measurement = await drainWithService({ database: fresh, table, workers: settings.workerCounts[database], messages, signal, ...batch }, shape.options);
        } finally {
          claim = await probe.stop().catch(() => undefined);
        }
        const remaining = await countRows(fresh, table);
        const isValid = !measurement.isCut && measurement.handled >= messages && remaining === tableRows - measurement.handled;
        return { measurement, claim, remaining, isValid, fillSeconds };
      }),
    );
    return figuresOf(result);
  } catch (error) {
    return failed(error);
  }
}

const PUBLISH_MANY_CALL = 1_000;

/** Publishes into a lease table already holding `tableRows` due rows, one at a time or through publishMany in calls of 1,000. */
async function publishPoint(settings: GrowthSettings, options: { database: BenchDatabaseName; tableRows: number; mode: 'one' | 'many' }): Promise<PublishGrowthPoint> {
  const { database, tableRows, mode } = options;
  const rows = mode === 'one' ? settings.publishOne : settings.publishMany;
  const base = { database, tableRows, mode, rows };
  try {
    const rowsPerSecond = await onFreshDatabase(settings, database, async (fresh) => {
      const table = growthTable('single');
      await fillGrowthTable(fresh, table, [{ rows: tableRows, timing: 'due' }], settings.storage);
      const broker = new Broker({ database: fresh.url, pool: { max: 2 } });
      await broker.start();
      let seconds: number;
      try {
        const queue = table.queue<{ n: number }>(BENCH_QUEUE_NAME);
        const startedAt = performance.now();
        if (mode === 'one') {
          for (let n = 0; n < rows; n += 1) await broker.publish(queue, { n });
        } else {
          for (let first = 0; first < rows; first += PUBLISH_MANY_CALL) {
            const count = Math.min(PUBLISH_MANY_CALL, rows - first);
            await broker.publishMany(queue, Array.from({ length: count }, (_, index) => ({ payload: { n: first + index } })));
          }
        }
        seconds = (performance.now() - startedAt) / 1000;
      } finally {
        await settlesWithin(broker.stop(), 10_000);
      }
      const counted = await countRows(fresh, table);
      if (counted !== tableRows + rows) throw new Error(`${counted} rows in the table, not ${tableRows + rows}`);
      return rows / seconds;
    });
    return { ...base, rowsPerSecond, failure: undefined, loadAverage: loadavg()[0]! };
  } catch (error) {
    return { ...base, rowsPerSecond: undefined, failure: error instanceof Error ? error.message : String(error), loadAverage: loadavg()[0]! };
  }
}

/**
 * Publish-to-handler latency across processes on PostgreSQL: a child process publishes
 * `latencyMessages` messages at a steady interval to the `bench` queue of a table of many queues,
 * while in the same broker as the latency handler a subscription of the table's `backlog` queue
 * (the lease defaults, the run's worker count) drains `backlog` rows filled before it started.
 * Both subscriptions at their defaults otherwise; the latency queue with one worker.
 */
async function latencyPoint(settings: GrowthSettings, interrupt: AbortSignal, options: { database: BenchDatabaseName; backlog: number }): Promise<LatencyGrowthPoint> {
  const { database, backlog } = options;
  const base = { database, backlog };
  try {
    return await withDeadline(settings, interrupt, (signal) =>
      onFreshDatabase(settings, database, async (fresh) => {
        const table = growthTable('grouped');
        await fillGrowthTable(fresh, table, [{ rows: backlog, timing: 'due', group: 'backlog' }], settings.storage);
        const watch = new LatencyWatch(settings.latencyMessages, signal);
        const broker = new Broker({ database: fresh.url, pool: { max: settings.workerCounts[database] + 4 } });
        broker.on('error', (error) => watch.recordError(error));
        let backlogHandled = 0;
        broker.subscribe(table.queue('backlog'), () => void (backlogHandled += 1), { workers: settings.workerCounts[database] });
        broker.subscribe(table.queue<LatencyPayload>(BENCH_QUEUE_NAME), (message) => watch.recordHandled(message.payload, wallClockMs()));
        await broker.start();
        let handledDuring: number;
        try {
          const order = { databaseUrl: fresh.url, form: 'lease' as const, messages: settings.latencyMessages, intervalMs: settings.latencyIntervalMs, isGroupedTable: true };
          await Promise.all([runPublisherProcess(order, watch.cutSignal).catch((error: unknown) => watch.recordFailure(error)), watch.finished]);
          handledDuring = backlogHandled;
        } finally {
          await settlesWithin(broker.stop({ timeoutMs: 10_000 }), 20_000);
        }
        const summary = watch.summary();
        const isDrainingThroughout = backlog === 0 || handledDuring < backlog;
        const failure = !summary.isValid ? `handled ${summary.handled} of ${settings.latencyMessages}${summary.firstError === undefined ? '' : ` (${summary.firstError})`}` : isDrainingThroughout ? undefined : 'the backlog ran out before the latency run ended';
        return { ...base, backlogHandled: handledDuring, handled: summary.handled, p50: summary.p50, p99: summary.p99, max: summary.max, isValid: failure === undefined, failure, loadAverage: loadavg()[0]! };
      }),
    );
  } catch (error) {
    const failure = error instanceof Error ? error.message : String(error);
    return { ...base, backlogHandled: 0, handled: 0, p50: undefined, p99: undefined, max: undefined, isValid: false, failure, loadAverage: loadavg()[0]! };
  }
}

function describeDrainPoint(point: DrainGrowthPoint): string {
  const rows =
    point.part === 'groups'
      ? `${point.backlog.toLocaleString('en-US')} rows of 1 queue among ${point.groups}`
      : point.part === 'fifo'
        ? `${point.backlog.toLocaleString('en-US')} rows in one FIFO group`
        : `backlog ${point.backlog.toLocaleString('en-US')}${point.delayed > 0 ? ` + ${point.delayed.toLocaleString('en-US')} delayed` : ''}`;
  const where = `${point.database}, ${point.part}, ${rows}, ${point.label}:`;
  if (!point.isValid) return `${where} not counted: ${point.failure}`;
  const claim = point.claim === undefined ? '' : `, claim p50 ${point.claim.p50Ms?.toFixed(2)} ms p99 ${point.claim.p99Ms?.toFixed(2)} ms${point.claim.pagesP50 === undefined ? '' : ` (${point.claim.pagesP50} pages, ${point.claim.rowsRemovedByFilterP50} rows filtered)`}`;
  return `${where} ${Math.round(point.messagesPerSecond!).toLocaleString('en-US')} msg/s over ${point.timed.toLocaleString('en-US')} (${Math.round(point.cpuMicrosecondsPerMessage!)} µs CPU/msg${claim}, fill ${point.fillSeconds?.toFixed(0)} s, load ${point.loadAverage.toFixed(1)})`;
}

function describePublishPoint(point: PublishGrowthPoint): string {
  const where = `${point.database}, publish ${point.mode === 'one' ? 'one at a time' : 'publishMany'} into ${point.tableRows.toLocaleString('en-US')} rows:`;
  if (point.rowsPerSecond === undefined) return `${where} failed: ${point.failure}`;
  return `${where} ${Math.round(point.rowsPerSecond).toLocaleString('en-US')} rows/s (${point.rows} rows, load ${point.loadAverage.toFixed(1)})`;
}

function describeLatencyPoint(point: LatencyGrowthPoint): string {
  const where = `${point.database}, latency across processes beside a backlog of ${point.backlog.toLocaleString('en-US')}:`;
  if (!point.isValid) return `${where} not counted: ${point.failure}`;
  return `${where} p50 ${point.p50?.toFixed(1)} ms, p99 ${point.p99?.toFixed(1)} ms, max ${point.max?.toFixed(1)} ms (${point.backlogHandled.toLocaleString('en-US')} backlog messages handled meanwhile, load ${point.loadAverage.toFixed(1)})`;
}
