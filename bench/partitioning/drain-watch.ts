import type { QueueTable } from '../../src/definition/define-table.js';
import type { BenchDatabase } from '../bench-database.js';

/** Errors beyond this many end a run: the drain is failing, not slow. */
export const MAX_ERRORS_PER_RUN = 100;

/** One drain to run: the same for the service and the raw loop. */
export interface DrainRun {
  readonly database: BenchDatabase;
  readonly table: QueueTable;
  readonly workers: number;
  readonly messages: number;
  /** Rows per claim (the service's `batch`, the raw loop's claim limit); one when absent. */
  readonly batch?: number;
  /** Aborts on the run's timeout or an interrupt. */
  readonly signal: AbortSignal;
}

/** What one drain measured. */
export interface DrainMeasurement {
  /** Handler calls (service) or rows claimed (raw loop); above the row count means a row ran twice. */
  readonly handled: number;
  /** From the first handled message to the last, in seconds. */
  readonly seconds: number;
  readonly messagesPerSecond: number;
  /**
   * CPU time this process spent per message between the first and the last handled message
   * (user + system, microseconds). Unlike throughput it hardly moves when other processes load
   * the machine, so it shows the work the client adds per message.
   */
  readonly cpuMicrosecondsPerMessage: number;
  /** Claim statements run, and those that found no row (the last ones of a drain are empty). */
  readonly claims: number;
  readonly emptyClaims: number;
  /** The most pool connections held at once, as the driver counts them. */
  readonly maxConnectionsHeld: number;
  /** The service only: claims that met a deadlock or lock wait timeout and were run again. */
  readonly deadlocksRetried?: number;
  readonly errors: number;
  readonly firstError: string | undefined;
  /** The run was stopped by its timeout, an interrupt or too many errors before every row was handled. */
  readonly isCut: boolean;
}

/**
 * Times a drain from the first handled message to the last one expected, counts errors, and
 * resolves `finished` when every message was handled, or when the run must end early.
 */
export class DrainWatch {
  readonly #expected: number;
  readonly #cut = new AbortController();
  readonly #finished: Promise<void>;
  #resolveFinished!: () => void;
  #handled = 0;
  #firstHandledAt = 0;
  #lastHandledAt = 0;
  #cpuAtFirst: NodeJS.CpuUsage | undefined;
  #cpuSinceFirst: NodeJS.CpuUsage | undefined;
  #errors = 0;
  #firstError: string | undefined;

  constructor(expected: number, signal: AbortSignal) {
    this.#expected = expected;
    this.#finished = new Promise<void>((resolve) => (this.#resolveFinished = resolve));
    const cut = () => this.#cutShort();
    if (signal.aborted) cut();
    else signal.addEventListener('abort', cut, { once: true });
  }

  /** Aborted when the run ends early (timeout, interrupt, too many errors): loops stop on it. */
  get cutSignal(): AbortSignal {
    return this.#cut.signal;
  }

  /** Resolves when every expected message was handled or the run was cut short. */
  get finished(): Promise<void> {
    return this.#finished;
  }

  recordHandled(): void {
    const now = performance.now();
    if (this.#handled === 0) {
      this.#firstHandledAt = now;
      this.#cpuAtFirst = process.cpuUsage();
    }
    this.#handled += 1;
    if (this.#handled === this.#expected) {
      this.#lastHandledAt = now;
      this.#cpuSinceFirst = process.cpuUsage(this.#cpuAtFirst);
      this.#resolveFinished();
    }
  }

  recordError(error: unknown): void {
    this.#errors += 1;
    this.#firstError ??= error instanceof Error ? error.message : String(error);
    if (this.#errors > MAX_ERRORS_PER_RUN) this.#cutShort();
  }

  measurement(counts: Pick<DrainMeasurement, 'claims' | 'emptyClaims' | 'maxConnectionsHeld' | 'deadlocksRetried'>): DrainMeasurement {
    const isComplete = this.#handled >= this.#expected && this.#lastHandledAt > 0;
    const seconds = isComplete ? (this.#lastHandledAt - this.#firstHandledAt) / 1000 : 0;
    const cpu = this.#cpuSinceFirst;
    // The interval covers the messages after the first one.
    const intervals = this.#expected - 1;
    return {
      handled: this.#handled,
      seconds,
      messagesPerSecond: isComplete && seconds > 0 ? intervals / seconds : 0,
      cpuMicrosecondsPerMessage: cpu === undefined ? 0 : (cpu.user + cpu.system) / intervals,
      ...counts,
      errors: this.#errors,
      firstError: this.#firstError,
      isCut: !isComplete,
    };
  }

  #cutShort(): void {
    this.#cut.abort();
    this.#resolveFinished();
  }
}

/**
 * Whether `promise` settles (resolves or rejects) within `ms`: the bench never hangs on a pool
 * that will not close; the database's drop ends whatever sessions remain.
 */
export async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
  try {
    return await Promise.race([promise.then(() => true, () => true), timeout]);
  } finally {
    clearTimeout(timer);
  }
}
