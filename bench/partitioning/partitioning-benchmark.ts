import { loadavg } from 'node:os';
import {
  assertReachable,
  createBenchDatabase,
  type BenchDatabaseName,
  type BenchServers,
} from '../bench-database.js';
import { median, spread } from '../statistics.js';
import { countRemainingRows, createBenchTable, fillBenchTable, isFormAvailable, type BenchForm } from './bench-table.js';
import type { DrainMeasurement, DrainRun } from './drain-watch.js';
import { drainWithRawLoop } from './raw-drain.js';
import { drainWithService } from './service-drain.js';

export interface PartitioningSettings {
  readonly messages: number;
  readonly databases: readonly BenchDatabaseName[];
  readonly forms: readonly BenchForm[];
  readonly workerCounts: readonly number[];
  readonly rounds: number;
  /** Each run (fresh database, fill, drain, check) ends by itself after this long. */
  readonly runTimeoutMs: number;
  readonly servers: BenchServers;
}

export type Variant = 'service' | 'raw';

/** Service first, then raw, in every round: both meet the same drift of the machine. */
const VARIANTS: readonly Variant[] = ['service', 'raw'];

const DRAINS: Readonly<Record<Variant, (run: DrainRun) => Promise<DrainMeasurement>>> = {
  service: drainWithService,
  raw: drainWithRawLoop,
};

export interface RunRecord extends DrainMeasurement {
  readonly round: number;
  /** Rows left in the table after the drain. */
  readonly remaining: number | undefined;
  /** Every row handled exactly once, the table empty, the run not cut short. Only these count. */
  readonly isValid: boolean;
  /** Why the run failed outright (start-up, fill), when it did. */
  readonly failure: string | undefined;
  /**
   * The machine's one-minute load average when the drain ended: other processes on the two
   * cores (a test suite, another benchmark) show up here and explain an outlier.
   */
  readonly loadAverage: number;
}

export interface VariantSummary {
  readonly runs: RunRecord[];
  /** Over the valid runs, in messages per second. */
  readonly median: number | undefined;
  readonly min: number | undefined;
  readonly max: number | undefined;
  /** Over the valid runs: this process's CPU time per message, in microseconds. */
  readonly medianCpuMicrosecondsPerMessage: number | undefined;
}

export interface PointResult {
  readonly database: BenchDatabaseName;
  readonly form: BenchForm;
  readonly workers: number;
  readonly service: VariantSummary;
  readonly raw: VariantSummary;
  /** Median service throughput over median raw throughput. */
  readonly ratio: number | undefined;
}

export interface PartitioningOutcome {
  readonly serverVersions: Partial<Record<BenchDatabaseName, string>>;
  readonly points: PointResult[];
  readonly isInterrupted: boolean;
}

/**
 * For each database, form and worker count: `rounds` rounds of (service, raw), each run on a
 * fresh database filled with `messages` rows and drained to empty. `onProgress` hears each run.
 */
export async function runPartitioningBenchmark(
  settings: PartitioningSettings,
  interrupt: AbortSignal,
  onProgress: (line: string) => void,
): Promise<PartitioningOutcome> {
  for (const database of settings.databases) await assertReachable(database, settings.servers);
  const serverVersions: Partial<Record<BenchDatabaseName, string>> = {};
  const points: PointResult[] = [];
  for (const database of settings.databases) {
    for (const form of settings.forms) {
      if (!isFormAvailable(database, form)) {
        onProgress(`${database}: no ${describeForm(form)} form (it has no row locks); skipped`);
        continue;
      }
      for (const workers of settings.workerCounts) {
        const runs: Record<Variant, RunRecord[]> = { service: [], raw: [] };
        for (let round = 1; round <= settings.rounds && !interrupt.aborted; round += 1) {
          for (const variant of VARIANTS) {
            if (interrupt.aborted) break;
            const { record, serverVersion } = await runOnce({ settings, database, form, workers, variant, round, interrupt });
            serverVersions[database] ??= serverVersion;
            runs[variant].push(record);
            onProgress(describeRun({ database, form, workers, variant, rounds: settings.rounds, record }));
          }
        }
        const service = summarize(runs.service);
        const raw = summarize(runs.raw);
        const ratio = service.median !== undefined && raw.median ? service.median / raw.median : undefined;
        points.push({ database, form, workers, service, raw, ratio });
        if (interrupt.aborted) return { serverVersions, points, isInterrupted: true };
      }
    }
  }
  return { serverVersions, points, isInterrupted: false };
}

export function describeForm(form: BenchForm): string {
  return form === 'rowLock' ? 'row lock' : 'lease';
}

async function runOnce(options: {
  settings: PartitioningSettings;
  database: BenchDatabaseName;
  form: BenchForm;
  workers: number;
  variant: Variant;
  round: number;
  interrupt: AbortSignal;
}): Promise<{ record: RunRecord; serverVersion: string | undefined }> {
  const { settings, variant, round, workers, interrupt } = options;
  // A controller held here rather than AbortSignal.any(): on Node 20 the combined signal can be
  // garbage-collected while a drain runs, and its abort is lost (a raw drain ran past its timeout).
  const deadline = new AbortController();
  const endRun = () => deadline.abort();
  const timer = setTimeout(endRun, settings.runTimeoutMs);
  interrupt.addEventListener('abort', endRun, { once: true });
  const database = await createBenchDatabase(options.database, settings.servers);
  let serverVersion: string | undefined;
  try {
    const table = createBenchTable(options.form);
    serverVersion = await fillBenchTable(database, table, settings.messages);
    const signal = deadline.signal;
    const measurement = await DRAINS[variant]({ database, table, workers, messages: settings.messages, signal });
    const remaining = await countRemainingRows(database);
    const isValid = !measurement.isCut && measurement.handled === settings.messages && remaining === 0;
    const loadAverage = loadavg()[0]!;
    return { record: { round, ...measurement, remaining, isValid, failure: undefined, loadAverage }, serverVersion };
  } catch (error) {
    return { record: failedRun(round, error), serverVersion };
  } finally {
    clearTimeout(timer);
    interrupt.removeEventListener('abort', endRun);
    await database.drop().catch((error: unknown) => {
      console.error(`could not drop the benchmark database at ${database.url}; remove it by hand:`, error);
    });
  }
}

/** A run that failed: no figures, the error kept as its failure. */
export function failedRun(round: number, error: unknown): RunRecord {
  const message = error instanceof Error ? error.message : String(error);
  return {
    round,
    handled: 0,
    seconds: 0,
    messagesPerSecond: 0,
    cpuMicrosecondsPerMessage: 0,
    claims: 0,
    emptyClaims: 0,
    maxConnectionsHeld: 0,
    errors: 1,
    firstError: message,
    isCut: true,
    remaining: undefined,
    isValid: false,
    failure: message,
    loadAverage: loadavg()[0]!,
  };
}

function summarize(runs: RunRecord[]): VariantSummary {
  const valid = runs.filter((run) => run.isValid);
  const rates = valid.map((run) => run.messagesPerSecond);
  const range = spread(rates);
  return {
    runs,
    median: median(rates),
    min: range?.min,
    max: range?.max,
    medianCpuMicrosecondsPerMessage: median(valid.map((run) => run.cpuMicrosecondsPerMessage)),
  };
}

function describeRun(options: {
  database: BenchDatabaseName;
  form: BenchForm;
  workers: number;
  variant: Variant;
  rounds: number;
  record: RunRecord;
}): string {
  const { database, form, workers, variant, rounds, record } = options;
  const where = `${database} ${describeForm(form)}, ${workers} workers, round ${record.round}/${rounds}, ${variant}:`;
  if (record.failure !== undefined) return `${where} failed: ${record.failure}`;
  const errors = record.errors > 0 ? `, ${record.errors} errors (first: ${record.firstError})` : '';
  if (!record.isValid) {
    return `${where} not counted: handled ${record.handled}, ${record.remaining ?? '?'} rows left${record.isCut ? ', cut short' : ''}${errors}`;
  }
  const rate = Math.round(record.messagesPerSecond).toLocaleString('en-US');
  const cpu = Math.round(record.cpuMicrosecondsPerMessage);
  return `${where} ${rate} msg/s (${record.seconds.toFixed(2)} s, ${cpu} µs CPU/msg, load ${record.loadAverage.toFixed(1)})${errors}`;
}
