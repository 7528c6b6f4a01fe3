import { boundLastError, describeThrown } from '../delivery/last-error.js';
import { backoffDelayMs, type Backoff } from '../internal/backoff.js';

/** Names whose failure count is kept; past this the oldest are forgotten (their next backoff starts over). */
const MAX_REMEMBERED_FAILING_NAMES = 10_000;

/** A name waiting for its backoff to end, as `stats()` and the heartbeat report it. */
export interface RelayWaitingName {
  readonly name: string;
  /** Sends of the name that failed in a row. */
  readonly failedSends: number;
  /** When the relay sends the name again. */
  readonly retryAt: Date;
  /**
   * The error that failed the last send, as a dead letter records its last error (cut at 2,000
   * characters); null when the send could not begin (a service transaction held the shared
   * SQLite handle).
   */
  readonly error: string | null;
}

interface Waiting {
  readonly timer: NodeJS.Timeout;
  readonly retryAt: Date;
  readonly error: string | null;
}

/**
 * The relay's backoffs, per record name: how many sends of a name failed in a row, and for each
 * name waiting, the timer that wakes the relay when its backoff ends, when that is and why.
 */
export class NameBackoffs {
  readonly #backoff: Backoff;
  readonly #onEnded: () => void;
  readonly #failures = new Map<string, number>();
  readonly #waiting = new Map<string, Waiting>();

  constructor(backoff: Backoff, onEnded: () => void) {
    this.#backoff = backoff;
    this.#onEnded = onEnded;
  }

  /** Names waiting for their backoff to end. */
  get waitingCount(): number {
    return this.#waiting.size;
  }

  /** Up to `limit` of the names waiting, the soonest to go again first. */
  waiting(limit: number): RelayWaitingName[] {
    return [...this.#waiting]
      .sort(([, a], [, b]) => a.retryAt.getTime() - b.retryAt.getTime())
      .slice(0, limit)
      .map(([name, { retryAt, error }]) => ({ name, failedSends: this.#failures.get(name) ?? 0, retryAt, error }));
  }

  /**
   * How long the name waits before its next send: from `initialMs`, doubling with each failure
   * in a row, up to `maxMs`. A send that could not begin (`isFailure` false) adds no failure.
   */
  delayMs(name: string, isFailure: boolean): number {
    const failures = (this.#failures.get(name) ?? 0) + (isFailure ? 1 : 0);
    this.#failures.delete(name);
    this.#failures.set(name, failures);
    if (this.#failures.size > MAX_REMEMBERED_FAILING_NAMES) this.#failures.delete(this.#failures.keys().next().value!);
    return backoffDelayMs(this.#backoff, failures);
  }

  /** A send of the name went through: its next failure starts the backoff over. */
  succeeded(name: string): void {
    this.#failures.delete(name);
  }

  /** Wakes the relay at `at`, when the name's backoff ends; `error` failed its last send (undefined: the send did not begin). */
  wakeAt(name: string, at: Date, error: unknown): void {
    clearTimeout(this.#waiting.get(name)?.timer);
    const timer = setTimeout(() => {
      this.#waiting.delete(name);
      this.#onEnded();
    }, at.getTime() - Date.now());
    this.#waiting.set(name, { timer, retryAt: at, error: error === undefined ? null : boundLastError(describeThrown(error)) });
  }

  /** Stop: no backoff wakes the relay any more. */
  clear(): void {
    for (const { timer } of this.#waiting.values()) clearTimeout(timer);
    this.#waiting.clear();
  }
}
