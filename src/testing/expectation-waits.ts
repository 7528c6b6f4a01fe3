import { AssertionError } from 'node:assert';

/**
 * How long a wait of `tablequeue/testing` lasts before it fails, unless told otherwise: under
 * Jest's default test timeout of 5 s, so a test that waits in vain fails with this harness's
 * message (what it waited for, what it saw) instead of the framework's bare timeout.
 */
export const DEFAULT_WAIT_TIMEOUT_MS = 4_000;

/** Options every wait takes. */
export interface WaitOptions {
  /** How long to wait before failing, in ms. Default 4,000 (the test broker's `timeoutMs`). */
  readonly timeoutMs?: number;
}

interface PendingWait {
  /** Resolves the wait and answers true once it holds. */
  readonly settleIfMet: () => boolean;
  readonly fail: (error: Error) => void;
}

/**
 * Waits on what a test broker records: each one re-checked whenever something is recorded (a
 * handler call, a lifecycle event, a publish, a claim that came back empty), never on a timer;
 * the only timer is the timeout, which fails with an `AssertionError` saying what was expected
 * and what was seen, its stack the test's own call.
 */
export class ExpectationWaits {
  readonly #pending = new Set<PendingWait>();
  #stoppedWith: string | undefined;

  /**
   * Resolves with `check()`'s value once it is not undefined: at once, or at a later `changed()`.
   * `expected` completes "waited N ms for …"; `seen` describes what was recorded when it fails.
   */
  until<T>(where: string, expected: string, check: () => T | undefined, seen: () => string, timeoutMs: number): Promise<T> {
    const callSite: { stack?: string } = {};
    Error.captureStackTrace(callSite, this.until);
    const failure = (message: string): AssertionError => {
      // As assert.fail makes it: frameworks print the message alone, with no actual and expected to compare.
      const error = new AssertionError({ message, operator: 'fail' });
      // The frames of the test that waited, not of the timer that fired.
      const frames = callSite.stack?.split('\n').slice(1).join('\n');
      if (frames !== undefined) error.stack = `${error.name}: ${message}\n${frames}`;
      return error;
    };
    const first = check();
    if (first !== undefined) return Promise.resolve(first);
    if (this.#stoppedWith !== undefined) return Promise.reject(failure(`${where}: ${this.#stoppedWith}, so ${expected} can no longer come`));
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#pending.delete(pending);
        reject(failure(`${where}: waited ${timeoutMs} ms for ${expected}; saw ${seen()}`));
      }, timeoutMs);
      const pending: PendingWait = {
        settleIfMet: () => {
          const value = check();
          if (value === undefined) return false;
          clearTimeout(timer);
          resolve(value);
          return true;
        },
        fail: (error) => {
          clearTimeout(timer);
          reject(failure(`${where}: ${error.message}, before ${expected}; saw ${seen()}`));
        },
      };
      this.#pending.add(pending);
    });
  }

  /** Something was recorded: every wait checks again. */
  changed(): void {
    for (const pending of [...this.#pending]) {
      if (pending.settleIfMet()) this.#pending.delete(pending);
    }
  }

  /** The test broker stopped (or failed to start): every wait fails now and any later one at once. */
  stop(reason: string): void {
    this.#stoppedWith = reason;
    for (const pending of this.#pending) pending.fail(new Error(reason));
    this.#pending.clear();
  }
}

/** A value for a failure message: JSON where it can be, cut short past 200 characters. */
export function describeValue(value: unknown): string {
  let text: string;
  try {
    text = value === undefined ? 'undefined' : (JSON.stringify(value) ?? String(value));
  } catch {
    text = String(value);
  }
  return text.length > 200 ? `${text.slice(0, 197)}...` : text;
}

/**
 * Items for a failure message: all of them when few, else how many of each kind and the last
 * few. A handler that retries at once settles dozens of times within one wait.
 */
export function summarized<T>(items: readonly T[], describe: (item: T) => string, kindOf: (item: T) => string, shown = 5): string {
  if (items.length <= shown) return items.map(describe).join(', ');
  const kinds = new Map<string, number>();
  for (const item of items) kinds.set(kindOf(item), (kinds.get(kindOf(item)) ?? 0) + 1);
  const counts = [...kinds].map(([kind, count]) => `${count} ${kind}`).join(', ');
  return `${counts}; the last ${shown}: ${items.slice(-shown).map(describe).join(', ')}`;
}

/** Each distinct text once, ordered by its latest coming, with how many times it came when more than once. */
export function distinctWithCounts(texts: readonly string[]): string[] {
  const counts = new Map<string, number>();
  for (const text of texts) {
    const previous = counts.get(text) ?? 0;
    counts.delete(text);
    counts.set(text, previous + 1);
  }
  return [...counts].map(([text, count]) => (count === 1 ? text : `${text} (${count} times)`));
}

/** "1 call", "2 calls". */
export function counted(count: number, noun: string): string {
  return `${count} ${noun}${count === 1 ? '' : 's'}`;
}

/** Fails with an `AssertionError` showing `actual` and `expected` when `holds` is false. */
export function assertThat(holds: boolean, message: string, actual: unknown, expected: unknown, operator: string): void {
  if (holds) return;
  const error = new AssertionError({ message, actual, expected, operator });
  Error.captureStackTrace(error, assertThat);
  throw error;
}
