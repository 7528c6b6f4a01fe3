import { backoffDelayMs } from '../internal/backoff.js';
import { WakeSignal } from '../internal/wake-signal.js';

/** A names query that failed waits this long before the next, as a subscription's claim does. */
const FAILED_NAMES_BACKOFF_MS = 1_000;

/**
 * A write on the service's own connection commits when the service says so, which the broker
 * never sees: after one, the relay looks again after 5 ms, then 10, 20… up to the poll interval,
 * so a commit that follows its write by a few milliseconds is relayed within about as long.
 */
const FIRST_UNSEEN_COMMIT_RECHECK_MS = 5;

export interface RelayLoopOptions {
  readonly concurrency: number;
  readonly pollIntervalMs: number;
  /** The pool's size now: the names in work leave one of its connections free (WP-2). */
  readonly poolSize: () => number;
  /** Names with records and none in work, up to `limit`, the longest waiting first. */
  readonly names: (limit: number) => Promise<string[]>;
  /** Relays one batch of the name; resolves whether it took records. */
  readonly relayName: (name: string) => Promise<boolean>;
  readonly onError: (error: unknown, detail: Record<string, unknown>) => void;
}

/**
 * When the relay looks for names: it hands up to `concurrency` names to a worker each, then waits
 * for a wake-up (a write in this process, a LISTEN notification, a worker that ends, a backoff
 * that ends), the poll interval being the floor.
 */
export class RelayLoop {
  readonly #options: RelayLoopOptions;
  readonly #signal = new WakeSignal();
  readonly #inWork = new Map<string, Promise<void>>();
  #loop: Promise<void> | undefined;
  #isStopping = false;
  /** Rechecks made since a write whose commit nobody reports; undefined when none is due. */
  #unseenCommitRechecks: number | undefined;

  constructor(options: RelayLoopOptions) {
    this.#options = options;
  }

  get namesInWork(): number {
    return this.#inWork.size;
  }

  get isStopping(): boolean {
    return this.#isStopping;
  }

  start(): void {
    this.#loop ??= this.#run();
  }

  /** Something may wait: look at once. */
  wake(): void {
    this.#signal.wake();
  }

  /** A record was written on a connection whose commit nobody reports: look at once and again shortly after. */
  wakeAfterUnseenCommit(): void {
    this.#unseenCommitRechecks = 0;
    this.#signal.wake();
  }

  /** Starts no more names, and waits up to `timeoutMs` for those in work. */
  async stop(timeoutMs: number): Promise<void> {
    this.#isStopping = true;
    this.#signal.wake();
    await this.#loop;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.allSettled(this.#inWork.values()),
      new Promise((resolve) => (timer = setTimeout(resolve, timeoutMs))),
    ]);
    clearTimeout(timer);
  }

  async #run(): Promise<void> {
    const { pollIntervalMs, onError } = this.#options;
    while (!this.#isStopping) {
      const free = this.#maxNamesInWork() - this.#inWork.size;
      let started = 0;
      if (free > 0) {
        let names: string[];
        try {
          names = await this.#options.names(free + this.#inWork.size);
        } catch (error) {
          onError(error, { phase: 'names' });
          await this.#signal.wait(FAILED_NAMES_BACKOFF_MS);
          continue;
        }
        for (const name of names) {
          if (this.#isStopping || started >= free) break;
          if (this.#inWork.has(name)) continue;
          this.#startName(name);
          started += 1;
        }
      }
      if (this.#isStopping) break;
      if (started > 0 || this.#inWork.size > 0) {
        // A worker that ends wakes the loop; the poll interval only bounds the wait.
        this.#unseenCommitRechecks = undefined;
        await this.#signal.wait(pollIntervalMs);
      } else {
        await this.#signal.wait(this.#idleWaitMs());
      }
    }
  }

  /** WP-2 for the relay: at most the pool's size minus one connection in use, at least one. */
  #maxNamesInWork(): number {
    return Math.min(this.#options.concurrency, Math.max(this.#options.poolSize() - 1, 1));
  }

  #idleWaitMs(): number {
    const { pollIntervalMs } = this.#options;
    if (this.#unseenCommitRechecks === undefined) return pollIntervalMs;
    this.#unseenCommitRechecks += 1;
    const recheckMs = backoffDelayMs({ initialMs: FIRST_UNSEEN_COMMIT_RECHECK_MS, maxMs: pollIntervalMs }, this.#unseenCommitRechecks);
    if (recheckMs >= pollIntervalMs) this.#unseenCommitRechecks = undefined;
    return recheckMs;
  }

  /**
   * A worker that took records wakes the loop when it ends, since more may wait. One that found
   * the name taken (another replica, a writer holding a record's row lock) does not: the loop
   * would only find the same name again at once.
   */
  #startName(name: string): void {
    const work = this.#options.relayName(name).then(
      (tookRecords) => {
        this.#inWork.delete(name);
        if (tookRecords) this.#signal.wake();
      },
      (error: unknown) => {
        this.#inWork.delete(name);
        this.#options.onError(error, { name, phase: 'claim' });
      },
    );
    this.#inWork.set(name, work);
  }
}
