import type { PauseGate } from './claim-loop.js';

export interface PauseWatchOptions {
  /**
   * Reads whether the queue is paused now (one small statement); may throw. `refreshedAt` is when
   * the last refresh arrived, on this watch's clock: a read shared with others must begin after it.
   */
  readonly read: (refreshedAt: number) => Promise<boolean>;
  /** How long a read stays fresh: the subscription's poll interval. */
  readonly freshForMs: number;
  /** The first failed read since the last good one; the queue is taken to run meanwhile. */
  readonly onReadFailed: (error: unknown) => void;
  readonly now?: () => number;
}

/**
 * A subscription's view of whether an operator paused its queue. The claim loop asks before every
 * claim; the answer comes from the last read while it is fresh (one poll interval), so a running
 * queue pays one small statement per interval, and a paused one is read again each time its loop
 * wakes after the interval. A notification (`refresh`) makes the next answer a new read.
 *
 * A read that fails (the table missing where the service may not create it, the database away)
 * leaves the queue running: pausing is an operator's request, and a missing table must never stop
 * a queue that nobody paused. The first such failure is reported, again only after a good read.
 */
export class PauseWatch implements PauseGate {
  readonly #options: PauseWatchOptions;
  readonly #now: () => number;
  #isPaused = false;
  #readAt: number | undefined;
  #reading: Promise<boolean> | undefined;
  #hasReportedFailure = false;
  /** Counts refreshes, so a read that a refresh overtook does not count as fresh. */
  #refreshes = 0;
  /** When the last refresh arrived: a read the broker made for every queue counts only if it began later. */
  #refreshedAt = Number.NEGATIVE_INFINITY;

  constructor(options: PauseWatchOptions) {
    this.#options = options;
    this.#now = options.now ?? (() => performance.now());
  }

  /** The answer of the last read: false before the first. */
  get isPausedNow(): boolean {
    return this.#isPaused;
  }

  isPaused(): boolean | Promise<boolean> {
    if (this.msUntilStale() > 0) return this.#isPaused;
    this.#reading ??= this.#read().finally(() => (this.#reading = undefined));
    return this.#reading;
  }

  msUntilStale(): number {
    if (this.#readAt === undefined) return 0;
    return Math.max(0, this.#readAt + this.#options.freshForMs - this.#now());
  }

  /** The state changed somewhere (a pause or resume, a LISTEN session back): read again before the next claim. */
  refresh(): void {
    this.#refreshes += 1;
    this.#refreshedAt = this.#now();
    this.#readAt = undefined;
  }

  /**
   * A read made for this queue with others (the broker's one read per poll interval), begun at
   * `readStartedAt` on this watch's clock: fresh from then, unless a refresh arrived since it began.
   */
  observe(isPaused: boolean, readStartedAt: number): void {
    if (this.#refreshedAt >= readStartedAt) return;
    this.#isPaused = isPaused;
    this.#hasReportedFailure = false;
    if (this.#readAt === undefined || this.#readAt < readStartedAt) this.#readAt = readStartedAt;
  }

  async #read(): Promise<boolean> {
    const startedAt = this.#now();
    const refreshes = this.#refreshes;
    try {
      this.#isPaused = await this.#options.read(this.#refreshedAt);
      this.#hasReportedFailure = false;
    } catch (error) {
      this.#isPaused = false;
      if (!this.#hasReportedFailure) this.#options.onReadFailed(error);
      this.#hasReportedFailure = true;
    }
    // Fresh from the start of the read, and not at all when a refresh arrived while it ran: the
    // state it announced may have been written after the read saw the table.
    if (refreshes === this.#refreshes) this.#readAt = startedAt;
    return this.#isPaused;
  }
}
