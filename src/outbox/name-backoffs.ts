import { backoffDelayMs, type Backoff } from '../internal/backoff.js';

/** Names whose failure count is kept; past this the oldest are forgotten (their next backoff starts over). */
const MAX_REMEMBERED_FAILING_NAMES = 10_000;

/**
 * The relay's backoffs, per record name: how many sends of a name failed in a row, and a timer
 * per name that wakes the relay when the name's backoff ends.
 */
export class NameBackoffs {
  readonly #backoff: Backoff;
  readonly #onEnded: () => void;
  readonly #failures = new Map<string, number>();
  readonly #timers = new Map<string, NodeJS.Timeout>();

  constructor(backoff: Backoff, onEnded: () => void) {
    this.#backoff = backoff;
    this.#onEnded = onEnded;
  }

  /** Names waiting for their backoff to end. */
  get waitingCount(): number {
    return this.#timers.size;
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

  /** Wakes the relay at `at`, when the name's backoff ends. */
  wakeAt(name: string, at: Date): void {
    clearTimeout(this.#timers.get(name));
    this.#timers.set(
      name,
      setTimeout(() => {
        this.#timers.delete(name);
        this.#onEnded();
      }, at.getTime() - Date.now()),
    );
  }

  /** Stop: no backoff wakes the relay any more. */
  clear(): void {
    for (const timer of this.#timers.values()) clearTimeout(timer);
    this.#timers.clear();
  }
}
