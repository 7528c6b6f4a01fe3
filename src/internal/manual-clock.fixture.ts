import type { Clock } from './clock.js';

interface Timer {
  readonly atMs: number;
  readonly callback: () => void;
}

/**
 * The host's time plus what the test has advanced, with timers that fire only when the test
 * advances: a test moves a lease's time on at once instead of sleeping through it. It never runs
 * behind the host's clock, so rows published at the host's time stay due to a claim that reads it.
 */
export class ManualClock implements Clock {
  #aheadMs = 0;
  readonly #timers = new Set<Timer>();

  now(): Date {
    return new Date(Date.now() + this.#aheadMs);
  }

  setTimer(ms: number, callback: () => void): () => void {
    const timer = { atMs: this.now().getTime() + ms, callback };
    this.#timers.add(timer);
    return () => this.#timers.delete(timer);
  }

  /** Timers set and not yet fired or cancelled. */
  get timersSet(): number {
    return this.#timers.size;
  }

  /**
   * Moves time on by `ms` and calls each timer that is then due, earliest first, including one
   * that a callback sets and that falls due by then.
   */
  advance(ms: number): void {
    this.#aheadMs += ms;
    for (;;) {
      const nowMs = this.now().getTime();
      const due = [...this.#timers].filter((timer) => timer.atMs <= nowMs).sort((a, b) => a.atMs - b.atMs)[0];
      if (due === undefined) return;
      this.#timers.delete(due);
      due.callback();
    }
  }
}
