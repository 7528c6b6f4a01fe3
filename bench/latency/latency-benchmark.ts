import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { Broker } from '../../src/broker/broker.js';
import { createDriver } from '../../src/driver/create-driver.js';
import type { QueueTable } from '../../src/definition/define-table.js';
import {
  assertReachable,
  createBenchDatabase,
  runSql,
  type BenchDatabase,
  type BenchDatabaseName,
  type BenchServers,
} from '../bench-database.js';
import { settlesWithin } from '../partitioning/drain-watch.js';
import { BENCH_QUEUE_NAME, createBenchTable, isFormAvailable, type BenchForm } from '../partitioning/bench-table.js';
import { percentile } from '../statistics.js';
import type { PublisherOrder } from './publisher-process.js';
import { publishAtSteadyRate, wallClockMs, type LatencyPayload } from './steady-publishing.js';

export type LatencyMode = 'sameProcess' | 'acrossProcesses';

export const LATENCY_MODES: readonly LatencyMode[] = ['sameProcess', 'acrossProcesses'];

export interface LatencySettings {
  readonly messages: number;
  readonly intervalMs: number;
  readonly workers: number;
  readonly databases: readonly BenchDatabaseName[];
  readonly forms: readonly BenchForm[];
  readonly modes: readonly LatencyMode[];
  /** The subscriber's `pollIntervalMs`, one run per value. */
  readonly pollIntervalsMs: readonly number[];
  /** Each run (fresh database, publishing, handling) ends by itself after this long. */
  readonly runTimeoutMs: number;
  readonly servers: BenchServers;
}

/** What one run measured, in milliseconds from the publish to the handler's start. */
export interface LatencyRecord {
  readonly database: BenchDatabaseName;
  readonly form: BenchForm;
  readonly mode: LatencyMode;
  readonly pollIntervalMs: number;
  /** Distinct messages whose handler started; a message handled twice counts once here. */
  readonly handled: number;
  readonly duplicates: number;
  readonly p50: number | undefined;
  readonly p99: number | undefined;
  readonly max: number | undefined;
  readonly mean: number | undefined;
  /** Each message's latency by its index (publish order), null for one never handled: shows where the tail falls. */
  readonly latenciesMs: (number | null)[];
  readonly errors: number;
  readonly firstError: string | undefined;
  /** Every message handled, no error, not cut short: only these runs count. */
  readonly isValid: boolean;
  /** The machine's one-minute load average when the run ended (other processes share the cores). */
  readonly loadAverage: number;
}

const PUBLISHER_SCRIPT = fileURLToPath(new URL('./publisher-process.ts', import.meta.url));
const REPOSITORY_ROOT = fileURLToPath(new URL('../..', import.meta.url));
/** Handlers are no-ops: stopping only waits for settlements and claims in flight. */
const STOP_TIMEOUT_MS = 10_000;
const CLOSE_GRACE_MS = 10_000;

export async function runLatencyBenchmark(
  settings: LatencySettings,
  interrupt: AbortSignal,
  onProgress: (line: string) => void,
): Promise<{ records: LatencyRecord[]; isInterrupted: boolean }> {
  for (const database of settings.databases) await assertReachable(database, settings.servers);
  const records: LatencyRecord[] = [];
  for (const database of settings.databases) {
    for (const form of settings.forms.filter((candidate) => isFormAvailable(database, candidate))) {
      for (const mode of settings.modes) {
        for (const pollIntervalMs of settings.pollIntervalsMs) {
          if (interrupt.aborted) return { records, isInterrupted: true };
          const record = await runOnce({ settings, database, form, mode, pollIntervalMs, interrupt });
          records.push(record);
          onProgress(describeRecord(record));
        }
      }
    }
  }
  return { records, isInterrupted: interrupt.aborted };
}

export function describeMode(mode: LatencyMode): string {
  return mode === 'sameProcess' ? 'same process' : 'across processes';
}

async function runOnce(options: {
  settings: LatencySettings;
  database: BenchDatabaseName;
  form: BenchForm;
  mode: LatencyMode;
  pollIntervalMs: number;
  interrupt: AbortSignal;
}): Promise<LatencyRecord> {
  const { settings, form, mode, pollIntervalMs, interrupt } = options;
  // A controller held here rather than AbortSignal.any(), as in the partitioning benchmark: on
  // Node 20 the combined signal can be garbage-collected while a run is in progress.
  const deadline = new AbortController();
  const endRun = () => deadline.abort();
  const timer = setTimeout(endRun, settings.runTimeoutMs);
  interrupt.addEventListener('abort', endRun, { once: true });
  const watch = new LatencyWatch(settings.messages, deadline.signal);
  const database = await createBenchDatabase(options.database, settings.servers);
  try {
    const table = createBenchTable(form);
    await createTable(database, table);
    const queue = table.queue<LatencyPayload>(BENCH_QUEUE_NAME);
    const broker = new Broker({ database: database.url, pollIntervalMs, pool: { max: settings.workers + 2 } });
    broker.on('error', (error) => watch.recordError(error));
    broker.subscribe(queue, (message) => watch.recordHandled(message.payload, wallClockMs()), { workers: settings.workers });
    await broker.start();
    try {
      // Same process: the subscribing broker publishes, since a publish wakes only the
      // subscriptions of its own broker. Across processes: a child process with its own broker.
      const publishing =
        mode === 'sameProcess'
          ? publishAtSteadyRate((payload) => broker.publish(queue, payload), { ...settings, signal: watch.cutSignal })
          : runPublisherProcess({ databaseUrl: database.url, form, ...settings }, watch.cutSignal);
      await Promise.all([publishing.catch((error: unknown) => watch.recordFailure(error)), watch.finished]);
    } finally {
      await settlesWithin(broker.stop({ timeoutMs: STOP_TIMEOUT_MS }), STOP_TIMEOUT_MS + CLOSE_GRACE_MS);
    }
  } catch (error) {
    watch.recordFailure(error);
  } finally {
    clearTimeout(timer);
    interrupt.removeEventListener('abort', endRun);
    await database.drop().catch((error: unknown) => {
      console.error(`could not drop the benchmark database at ${database.url}; remove it by hand:`, error);
    });
  }
  return { database: options.database, form, mode, pollIntervalMs, ...watch.summary(), loadAverage: loadavg()[0]! };
}

async function createTable(database: BenchDatabase, table: QueueTable): Promise<void> {
  const driver = createDriver(database.url, { poolSize: 1 });
  await driver.open();
  try {
    for (const sql of table.createTableSql(database.name)) await runSql(driver, sql);
  } finally {
    await driver.close();
  }
}

/** Runs the publisher in a child process; resolves when it exits 0, and ends it when `signal` aborts. */
export async function runPublisherProcess(order: PublisherOrder, signal: AbortSignal): Promise<void> {
  const child = spawn(process.execPath, [...process.execArgv, PUBLISHER_SCRIPT, JSON.stringify(order)], {
    cwd: REPOSITORY_ROOT,
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  const stopChild = () => child.kill('SIGTERM');
  signal.addEventListener('abort', stopChild, { once: true });
  try {
    const [exitCode, exitSignal] = (await once(child, 'exit')) as [number | null, NodeJS.Signals | null];
    if (exitCode !== 0 && !signal.aborted) {
      throw new Error(`the publisher process ended with ${exitSignal ?? `exit code ${exitCode}`}`);
    }
  } finally {
    signal.removeEventListener('abort', stopChild);
  }
}

/**
 * Collects one latency per message, counts what went wrong, and resolves `finished` when every
 * message was handled, or when the run must end early (timeout, interrupt, failure).
 */
export class LatencyWatch {
  readonly #expected: number;
  readonly #latencies = new Map<number, number>();
  readonly #cut = new AbortController();
  readonly #finished: Promise<void>;
  #resolveFinished!: () => void;
  #duplicates = 0;
  #errors = 0;
  #firstError: string | undefined;

  constructor(expected: number, signal: AbortSignal) {
    this.#expected = expected;
    this.#finished = new Promise<void>((resolve) => (this.#resolveFinished = resolve));
    const cut = () => this.#cutShort();
    if (signal.aborted) cut();
    else signal.addEventListener('abort', cut, { once: true });
  }

  /** Aborted when the run ends early: the publisher stops on it. */
  get cutSignal(): AbortSignal {
    return this.#cut.signal;
  }

  get finished(): Promise<void> {
    return this.#finished;
  }

  recordHandled(payload: LatencyPayload, handledAt: number): void {
    if (this.#latencies.has(payload.index)) {
      this.#duplicates += 1;
      return;
    }
    this.#latencies.set(payload.index, handledAt - payload.publishedAt);
    if (this.#latencies.size === this.#expected) this.#resolveFinished();
  }

  recordError(error: unknown): void {
    this.#errors += 1;
    this.#firstError ??= error instanceof Error ? error.message : String(error);
  }

  /** An error that ends the run: the publisher failed, or the run could not start. */
  recordFailure(error: unknown): void {
    this.recordError(error);
    this.#cutShort();
  }

  summary(): Omit<LatencyRecord, 'database' | 'form' | 'mode' | 'pollIntervalMs' | 'loadAverage'> {
    const latencies = [...this.#latencies.values()];
    const handled = latencies.length;
    return {
      handled,
      duplicates: this.#duplicates,
      p50: percentile(latencies, 50),
      p99: percentile(latencies, 99),
      max: percentile(latencies, 100),
      mean: handled === 0 ? undefined : latencies.reduce((sum, value) => sum + value, 0) / handled,
      latenciesMs: Array.from({ length: this.#expected }, (_, index) => this.#latencies.get(index) ?? null),
      errors: this.#errors,
      firstError: this.#firstError,
      isValid: handled === this.#expected && this.#errors === 0 && !this.#cut.signal.aborted,
    };
  }

  #cutShort(): void {
    this.#cut.abort();
    this.#resolveFinished();
  }
}

function describeRecord(record: LatencyRecord): string {
  const where = `${record.database} ${record.form}, ${describeMode(record.mode)}, poll ${record.pollIntervalMs} ms:`;
  const errors = record.errors > 0 ? `, ${record.errors} errors (first: ${record.firstError})` : '';
  const duplicates = record.duplicates > 0 ? `, ${record.duplicates} handled twice` : '';
  if (!record.isValid) return `${where} not counted: handled ${record.handled}${duplicates}${errors}`;
  const figures = `p50 ${formatMs(record.p50)}, p99 ${formatMs(record.p99)}, max ${formatMs(record.max)} ms`;
  return `${where} ${figures} (load ${record.loadAverage.toFixed(1)})${duplicates}${errors}`;
}

export function formatMs(value: number | undefined): string {
  if (value === undefined) return '–';
  return value < 100 ? value.toFixed(1) : Math.round(value).toLocaleString('en-US');
}
