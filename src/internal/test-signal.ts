/** How long `next` waits before it fails, unless the test says otherwise. */
const DEFAULT_WAIT_MS = 20_000;

/** Any signal, whatever it carries, as `untilSignalled` watches it. */
export interface ObservableSignal {
  observe(observer: () => void): () => void;
}

export interface SignalWait<T> {
  /** Takes the first emission that matches; the ones before it are dropped. Any emission without it. */
  readonly matches?: (value: T) => boolean;
  /** What the test waits for, named in the failure. */
  readonly what?: string;
  readonly timeoutMs?: number;
}

/**
 * A point in the library's work that a test can wait on instead of polling or sleeping: a claim
 * started, a claim came back empty, a renewal round ended. The code emits it always; until a test
 * turns the signal on, `emit` is one check of a field that is undefined, and nothing is kept.
 *
 * Turned on, the signal keeps every emission until a test takes it with `next`, so one that
 * happens before the test begins to wait is not missed; `clear` starts from now instead.
 */
export class TestSignal<T = void> {
  /** Emissions not taken yet; undefined while no test has turned the signal on. */
  #pending: T[] | undefined;
  readonly #observers = new Set<(value: T) => void>();

  /** Starts keeping emissions. */
  turnOn(): this {
    this.#pending ??= [];
    return this;
  }

  emit(value: T): void {
    if (this.#pending === undefined) return;
    this.#pending.push(value);
    for (const observer of [...this.#observers]) observer(value);
  }

  /** Emissions kept and not taken yet, oldest first. */
  get pending(): readonly T[] {
    return this.#pending ?? [];
  }

  /** Drops the emissions kept so far: the next `next` waits for one still to come. */
  clear(): void {
    if (this.#pending !== undefined) this.#pending.length = 0;
  }

  /**
   * The oldest emission not taken yet (with `matches`, the first that matches), or the next to
   * come; it and the ones before it are taken. Rejects after `timeoutMs` naming `what`.
   */
  next(wait: SignalWait<T> = {}): Promise<T> {
    this.turnOn();
    const matches = wait.matches ?? (() => true);
    const pending = this.#pending!;
    const index = pending.findIndex(matches);
    if (index >= 0) return Promise.resolve(pending.splice(0, index + 1)[index]!);
    pending.length = 0;
    const timeoutMs = wait.timeoutMs ?? DEFAULT_WAIT_MS;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        stop();
        reject(new Error(`waited ${timeoutMs} ms for ${wait.what ?? 'a signal'}`));
      }, timeoutMs);
      const stop = this.observe((value) => {
        if (!matches(value)) {
          this.clear();
          return;
        }
        clearTimeout(timer);
        stop();
        this.clear();
        resolve(value);
      });
    });
  }

  /** Calls `observer` with every emission (turning the signal on) until the returned function is called. */
  observe(observer: (value: T) => void): () => void {
    this.turnOn();
    this.#observers.add(observer);
    return () => this.#observers.delete(observer);
  }
}

/**
 * Resolves once `check` holds: at once, or after an emission of any of `signals`. For state that
 * changes only where one of them is emitted, such as a subscription's counters. The check runs
 * in the event loop's next check phase after an emission, once the promise callbacks the
 * emitting code set off have run (a worker slot freed after a settlement, say). Rejects after
 * `timeoutMs` naming `what`.
 */
export function untilSignalled(
  signals: readonly ObservableSignal[],
  check: () => boolean,
  what: string,
  timeoutMs = DEFAULT_WAIT_MS,
): Promise<void> {
  if (check()) return Promise.resolve();
  return new Promise((resolve, reject) => {
    let isChecking = false;
    const stops = signals.map((signal) =>
      signal.observe(() => {
        if (isChecking) return;
        isChecking = true;
        setImmediate(() => {
          isChecking = false;
          if (!check()) return;
          end();
          resolve();
        });
      }),
    );
    const timer = setTimeout(() => {
      end();
      reject(new Error(`waited ${timeoutMs} ms for ${what}`));
    }, timeoutMs);
    function end(): void {
      clearTimeout(timer);
      for (const stop of stops) stop();
    }
  });
}
