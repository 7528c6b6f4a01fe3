import { loadavg } from 'node:os';
import {
  assertReachable,
  createBenchDatabase,
  type BenchDatabaseName,
  type BenchServers,
} from '../bench-database.js';
import type { DrainMeasurement } from '../partitioning/drain-watch.js';
import { failedRun } from '../partitioning/partitioning-benchmark.js';
import { median, spread } from '../statistics.js';
import type { Contender, ContenderKind } from './contender.js';
import { measureMemoryWhileDraining, type MemoryResult, type MemorySettings } from './memory-drain.js';
import { measurePublish, PUBLISH_MODE_LABELS, PUBLISH_VARIANT_LABELS, type PublishMode, type PublishVariant } from './publish-throughput.js';

export interface SuiteSettings {
  readonly messages: number;
  readonly databases: readonly BenchDatabaseName[];
  /** Worker counts per database. */
  readonly workerCounts: Readonly<Record<BenchDatabaseName, readonly number[]>>;
  readonly rounds: number;
  /** Each run (fresh database, fill, drain, check) ends by itself after this long. */
  readonly runTimeoutMs: number;
  readonly servers: BenchServers;
  /** The drains to run, already narrowed by `--only`; empty runs no drain. */
  readonly contenders: readonly Contender[];
  /** Rows published one at a time per publish run (publishMany writes `messages`); 0 runs none. */
  readonly publishOneRows: number;
  /** The publish runs, in the order each round takes them; empty runs none. */
  readonly publishWays: readonly PublishWay[];
  /** The memory drain, when it runs. */
  readonly memory: Omit<MemorySettings, 'servers' | 'signal'> | undefined;
}

export interface DrainRecord extends DrainMeasurement {
  readonly round: number;
  /** Messages not finished after the drain. */
  readonly remaining: number | undefined;
  /** Every message handled exactly once, nothing left, not cut short. Only these count. */
  readonly isValid: boolean;
  /** Why the run failed outright (start-up, fill), when it did. */
  readonly failure: string | undefined;
  /** The one-minute load average when the run ended. */
  readonly loadAverage: number;
  readonly insertRowsPerSecond: number | undefined;
}

interface Summary {
  readonly median: number | undefined;
  readonly min: number | undefined;
  readonly max: number | undefined;
}

export interface DrainPoint extends Summary {
  readonly database: BenchDatabaseName;
  readonly workers: number;
  readonly contender: string;
  readonly kind: ContenderKind;
  readonly label: string;
  readonly batch: number | undefined;
  readonly rawBaseline: string | undefined;
  readonly runs: DrainRecord[];
  /** Over the valid runs: this process's CPU time per message, in microseconds. */
  readonly medianCpuMicrosecondsPerMessage: number | undefined;
  /** Peers: their bulk insert while filling, rows per second, median over the runs. */
  readonly medianInsertRowsPerSecond: number | undefined;
  /** The service's claims that met a deadlock and were run again, summed over the runs. */
  readonly deadlocksRetried: number;
  /** Errors reported over the runs (events, failed statements of raw loops, peers' errors). */
  readonly errors: number;
}

export interface PublishRecord {
  readonly round: number;
  readonly rows: number;
  readonly seconds: number;
  readonly rowsPerSecond: number;
  readonly isValid: boolean;
  readonly failure: string | undefined;
  readonly loadAverage: number;
}

/** One way of publishing: a variant, and a mode (one at a time, many callers at once, or publishMany). */
export interface PublishWay {
  readonly variant: PublishVariant;
  readonly mode: PublishMode;
}

/**
 * Every publish run, in the order a round takes them: each keyed way right after the plain one it
 * is held against, so both meet the same moment of a shared machine.
 */
export const PUBLISH_WAYS: readonly PublishWay[] = [
  { variant: 'service', mode: 'one' },
  { variant: 'keyed', mode: 'one' },
  { variant: 'keyedDuplicate', mode: 'one' },
  { variant: 'raw', mode: 'one' },
  { variant: 'service', mode: 'atOnce' },
  { variant: 'raw', mode: 'atOnce' },
  { variant: 'service', mode: 'many' },
  { variant: 'keyed', mode: 'many' },
  { variant: 'raw', mode: 'many' },
];

export interface PublishPoint extends Summary {
  readonly database: BenchDatabaseName;
  readonly variant: PublishVariant;
  readonly mode: PublishMode;
  readonly runs: PublishRecord[];
}

export interface SuiteOutcome {
  readonly serverVersions: Partial<Record<BenchDatabaseName, string>>;
  readonly drains: DrainPoint[];
  readonly publishes: PublishPoint[];
  readonly memory: MemoryResult | { readonly failure: string } | undefined;
  readonly isInterrupted: boolean;
}

const KIND_ORDER: readonly ContenderKind[] = ['service', 'raw', 'peer'];

/**
 * Per database and worker count, `rounds` rounds in which every contender drains once: the
 * service's forms, then the raw loops, then the peers, each on a fresh database, so that all of
 * them meet the same drift of a shared machine. Then publish throughput per database (its ways
 * interleaved the same way), then the memory drain.
 */
export async function runSuite(settings: SuiteSettings, interrupt: AbortSignal, onProgress: (line: string) => void): Promise<SuiteOutcome> {
  const databases = settings.databases.filter(
    (database) =>
      settings.publishWays.length > 0 ||
      settings.contenders.some((contender) => contender.databases.includes(database)) ||
      (database === 'postgres' && settings.memory !== undefined),
  );
  for (const database of databases) await assertReachable(database, settings.servers);
  const serverVersions: Partial<Record<BenchDatabaseName, string>> = {};
  const drains: DrainPoint[] = [];
  const publishes: PublishPoint[] = [];
  const ordered = [...settings.contenders].sort((a, b) => KIND_ORDER.indexOf(a.kind) - KIND_ORDER.indexOf(b.kind));
  const outcome = (isInterrupted: boolean, memory?: SuiteOutcome['memory']): SuiteOutcome => ({
    serverVersions,
    drains,
    publishes,
    memory,
    isInterrupted,
  });

  for (const database of settings.databases) {
    const here = ordered.filter((contender) => contender.databases.includes(database));
    if (here.length === 0) continue;
    for (const workers of settings.workerCounts[database]) {
      const runs = new Map<string, DrainRecord[]>(here.map((contender) => [contender.id, []]));
      for (let round = 1; round <= settings.rounds && !interrupt.aborted; round += 1) {
        for (const contender of here) {
          if (interrupt.aborted) break;
          const { record, serverVersion } = await drainOnce({ settings, database, workers, contender, round, interrupt });
          if (serverVersion !== undefined) serverVersions[database] ??= serverVersion;
          runs.get(contender.id)!.push(record);
          onProgress(describeDrain(database, workers, contender, settings.rounds, record));
        }
      }
      for (const contender of here) drains.push(summarizeDrain(database, workers, contender, runs.get(contender.id)!));
      if (interrupt.aborted) return outcome(true);
    }
  }

  if (settings.publishWays.length > 0) {
    for (const database of settings.databases) {
      const ways = settings.publishWays.map((way) => ({ ...way, runs: [] as PublishRecord[] }));
      for (let round = 1; round <= settings.rounds && !interrupt.aborted; round += 1) {
        for (const way of ways) {
          if (interrupt.aborted) break;
          const rows = way.mode === 'one' ? settings.publishOneRows : settings.messages;
          if (rows === 0) continue;
          const record = await publishOnce({ settings, database, ...way, rows, round });
          way.runs.push(record);
          onProgress(describePublish(database, way.variant, way.mode, settings.rounds, record));
        }
      }
      for (const way of ways) {
        if (way.runs.length > 0) publishes.push({ database, variant: way.variant, mode: way.mode, runs: way.runs, ...summarize(way.runs.filter((run) => run.isValid).map((run) => run.rowsPerSecond)) });
      }
      if (interrupt.aborted) return outcome(true);
    }
  }

  let memory: SuiteOutcome['memory'];
  if (settings.memory !== undefined && !interrupt.aborted) {
    onProgress(`memory: draining ${settings.memory.rows.toLocaleString('en-US')} rows on postgres, ${settings.memory.label}, ${settings.memory.workers} workers`);
    memory = await measureMemoryWhileDraining({ ...settings.memory, servers: settings.servers, signal: interrupt }).catch(
      (error: unknown) => ({ failure: error instanceof Error ? error.message : String(error) }),
    );
    onProgress(describeMemory(memory));
  }
  return outcome(interrupt.aborted, memory);
}

async function drainOnce(options: {
  settings: SuiteSettings;
  database: BenchDatabaseName;
  workers: number;
  contender: Contender;
  round: number;
  interrupt: AbortSignal;
}): Promise<{ record: DrainRecord; serverVersion: string | undefined }> {
  const { settings, workers, contender, round, interrupt } = options;
  // A controller held here rather than AbortSignal.any(): on Node 20 the combined signal can be
  // garbage-collected while a drain runs, and its abort is lost.
  const deadline = new AbortController();
  const endRun = () => deadline.abort();
  const timer = setTimeout(endRun, settings.runTimeoutMs);
  interrupt.addEventListener('abort', endRun, { once: true });
  let serverVersion: string | undefined;
  const database = await createBenchDatabase(options.database, settings.servers);
  try {
    const result = await contender.run({ database, workers, messages: settings.messages, signal: deadline.signal });
    serverVersion = result.serverVersion;
    const { measurement, remaining } = result;
    const isValid = !measurement.isCut && measurement.handled === settings.messages && remaining === 0;
    return {
      record: {
        round,
        ...measurement,
        remaining,
        isValid,
        failure: undefined,
        loadAverage: loadavg()[0]!,
        insertRowsPerSecond: result.insertRowsPerSecond,
      },
      serverVersion,
    };
  } catch (error) {
    return { record: failedDrain(round, error), serverVersion };
  } finally {
    clearTimeout(timer);
    interrupt.removeEventListener('abort', endRun);
    await database.drop().catch((error: unknown) => {
      console.error(`could not drop the benchmark database at ${database.url}; remove it by hand:`, error);
    });
  }
}

async function publishOnce(options: {
  settings: SuiteSettings;
  database: BenchDatabaseName;
  variant: PublishVariant;
  mode: PublishMode;
  rows: number;
  round: number;
}): Promise<PublishRecord> {
  const { settings, variant, mode, rows, round } = options;
  const database = await createBenchDatabase(options.database, settings.servers);
  try {
    const measurement = await measurePublish(database, variant, mode, rows);
    const isValid = measurement.counted === measurement.expected;
    const failure = isValid ? undefined : `${measurement.counted} rows in the table, not ${measurement.expected}`;
    return { round, rows, seconds: measurement.seconds, rowsPerSecond: measurement.rowsPerSecond, isValid, failure, loadAverage: loadavg()[0]! };
  } catch (error) {
    const failure = error instanceof Error ? error.message : String(error);
    return { round, rows, seconds: 0, rowsPerSecond: 0, isValid: false, failure, loadAverage: loadavg()[0]! };
  } finally {
    await database.drop().catch((error: unknown) => {
      console.error(`could not drop the benchmark database at ${database.url}; remove it by hand:`, error);
    });
  }
}

function failedDrain(round: number, error: unknown): DrainRecord {
  return { ...failedRun(round, error), insertRowsPerSecond: undefined };
}

function summarize(values: readonly number[]): Summary {
  const range = spread(values);
  return { median: median(values), min: range?.min, max: range?.max };
}

function summarizeDrain(database: BenchDatabaseName, workers: number, contender: Contender, runs: DrainRecord[]): DrainPoint {
  const valid = runs.filter((run) => run.isValid);
  const inserts = runs.flatMap((run) => (run.insertRowsPerSecond === undefined ? [] : [run.insertRowsPerSecond]));
  return {
    database,
    workers,
    contender: contender.id,
    kind: contender.kind,
    label: contender.label,
    batch: contender.batch,
    rawBaseline: contender.rawBaseline,
    runs,
    ...summarize(valid.map((run) => run.messagesPerSecond)),
    medianCpuMicrosecondsPerMessage: median(valid.map((run) => run.cpuMicrosecondsPerMessage)),
    medianInsertRowsPerSecond: median(inserts),
    deadlocksRetried: runs.reduce((sum, run) => sum + (run.deadlocksRetried ?? 0), 0),
    errors: runs.reduce((sum, run) => sum + run.errors, 0),
  };
}

function describeDrain(database: BenchDatabaseName, workers: number, contender: Contender, rounds: number, record: DrainRecord): string {
  const where = `${database}, ${workers} workers, round ${record.round}/${rounds}, ${contender.label}:`;
  if (record.failure !== undefined) return `${where} failed: ${record.failure}`;
  const errors = record.errors > 0 ? `, ${record.errors} errors (first: ${record.firstError})` : '';
  const deadlocks = record.deadlocksRetried ? `, ${record.deadlocksRetried} deadlocks retried` : '';
  if (!record.isValid) {
    return `${where} not counted: handled ${record.handled}, ${record.remaining ?? '?'} left${record.isCut ? ', cut short' : ''}${errors}`;
  }
  const rate = Math.round(record.messagesPerSecond).toLocaleString('en-US');
  const cpu = Math.round(record.cpuMicrosecondsPerMessage);
  return `${where} ${rate} msg/s (${record.seconds.toFixed(2)} s, ${cpu} µs CPU/msg, load ${record.loadAverage.toFixed(1)})${deadlocks}${errors}`;
}

function describePublish(database: BenchDatabaseName, variant: PublishVariant, mode: PublishMode, rounds: number, record: PublishRecord): string {
  const where = `${database}, publish ${PUBLISH_MODE_LABELS[mode]}, ${PUBLISH_VARIANT_LABELS[variant]}, round ${record.round}/${rounds}:`;
  if (!record.isValid) return `${where} failed: ${record.failure}`;
  const unit = variant === 'keyedDuplicate' ? 'publishes' : 'rows';
  return `${where} ${Math.round(record.rowsPerSecond).toLocaleString('en-US')} ${unit}/s (${record.rows} ${unit}, ${record.seconds.toFixed(2)} s, load ${record.loadAverage.toFixed(1)})`;
}

function describeMemory(memory: MemoryResult | { failure: string }): string {
  if ('failure' in memory) return `memory: failed: ${memory.failure}`;
  const drained = memory.measurement.isCut ? `cut short after ${memory.measurement.handled} rows` : `${Math.round(memory.measurement.messagesPerSecond).toLocaleString('en-US')} msg/s`;
  return `memory: RSS ${memory.startRssMiB.toFixed(0)} MiB at the start, ${memory.peakRssMiB.toFixed(0)} at the peak, ${memory.endRssMiB.toFixed(0)} at the end (${drained}, ${memory.remaining} rows left)`;
}
