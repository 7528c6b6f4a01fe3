import type { HeldRow } from '../claim/claim-form.js';
import type { PoolStats } from '../driver/driver.js';
import { abortableSleep } from '../internal/abortable-sleep.js';
import { WakeSignal } from '../internal/wake-signal.js';

/** After a claim statement fails, the next claim waits this long (not the poll interval). */
export const FAILED_CLAIM_BACKOFF_MS = 1_000;

export interface ClaimLoopOptions {
  readonly workers: number;
  /** Whether each delivery in work holds a pool connection (WP-5). */
  readonly holdsConnection: boolean;
  /** Only one claim in flight at a time (WP-7). */
  readonly isSingleClaim: boolean;
  /** Rows one claim asks for, given the workers without a delivery or a waiting row. */
  readonly rowsPerClaim: (idleWorkers: number) => number;
  readonly pollIntervalMs: number;
  readonly poolStats: () => PoolStats;
  readonly claim: (limit: number) => Promise<HeldRow[]>;
  /** Starts a delivery for one row; the promise settles when the worker is free again. */
  readonly deliver: (row: HeldRow) => Promise<void>;
  readonly onClaimError: (error: unknown) => void;
  /** Rows claimed after stop began go back to the queue through this. */
  readonly handBack: (row: HeldRow) => Promise<void>;
}

export interface ClaimLoopCounters {
  claims: number;
  emptyClaims: number;
  failedClaims: number;
  maxConnectionsHeld: number;
}

/**
 * Decides when to claim. One claim in flight per idle worker (WP-1), never more connections
 * than the pool's size minus one (WP-2), a parallel claim only with two spare connections (WP-3),
 * one claim at a time after an empty claim until one takes rows again (WP-6), and one claim at a
 * time on single-claim tables (WP-7). Rows a claim takes beyond the idle workers wait here for
 * the next idle worker (WP-9).
 *
 * States: running (claims start as workers free up), waiting (after an empty or failed claim,
 * until the poll interval passes or a wake arrives), stopping (no new claims; rows that arrive
 * go back to the queue), stopped.
 */
export class ClaimLoop {
  readonly counters: ClaimLoopCounters = { claims: 0, emptyClaims: 0, failedClaims: 0, maxConnectionsHeld: 0 };
  readonly #options: ClaimLoopOptions;
  readonly #wake = new WakeSignal();
  readonly #stop = new AbortController();
  readonly #waitingRows: HeldRow[] = [];
  readonly #claimsInFlight = new Set<Promise<void>>();
  readonly #deliveries = new Set<Promise<void>>();
  #inWork = 0;
  #isProbing = true;
  #isWaiting = false;
  #isStopping = false;

  constructor(options: ClaimLoopOptions) {
    this.#options = options;
  }

  get inWork(): number {
    return this.#inWork;
  }

  get claimsRunning(): number {
    return this.#claimsInFlight.size;
  }

  get waitingRows(): number {
    return this.#waitingRows.length;
  }

  /** Connections this subscription holds now: claims running plus deliveries that hold one. */
  get connectionsHeld(): number {
    return this.#claimsInFlight.size + (this.#options.holdsConnection ? this.#inWork : 0);
  }

  start(): void {
    this.#pump();
  }

  /** A publish or a notification: the next wait returns at once, even if it has not begun. */
  wake(): void {
    this.#wake.wake();
  }

  /**
   * Stops claiming, waits for claims in flight, and hands back every row that waits here.
   * Deliveries in work go on; `drain()` waits for them.
   */
  async stop(): Promise<void> {
    this.#isStopping = true;
    this.#stop.abort();
    this.#wake.cancel();
    while (this.#claimsInFlight.size > 0) await Promise.allSettled([...this.#claimsInFlight]);
    const waiting = this.#waitingRows.splice(0);
    await Promise.allSettled(waiting.map((row) => this.#options.handBack(row)));
  }

  /** Resolves when every delivery in work has finished. */
  async drain(): Promise<void> {
    while (this.#deliveries.size > 0) await Promise.allSettled([...this.#deliveries]);
  }

  #pump(): void {
    if (this.#isStopping) return;
    const { workers } = this.#options;
    while (this.#waitingRows.length > 0 && this.#inWork < workers) {
      this.#startDelivery(this.#waitingRows.shift()!);
    }
    if (this.#isWaiting) return;
    while (this.#canStartClaim()) this.#startClaim();
  }

  #canStartClaim(): boolean {
    const { workers, isSingleClaim, poolStats } = this.#options;
    const running = this.#claimsInFlight.size;
    const idle = workers - this.#inWork - this.#waitingRows.length;
    const wanted = this.#isProbing || isSingleClaim ? Math.min(idle, 1) : idle;
    if (running >= wanted) return false;
    const stats = poolStats();
    const budget = Math.max(stats.size - 1, 1);
    if (this.connectionsHeld >= budget) return false;
    return running === 0 || stats.spare >= 2;
  }

  #startClaim(): void {
    const idle = this.#options.workers - this.#inWork - this.#waitingRows.length;
    const claim = this.#runClaim(this.#options.rowsPerClaim(idle));
    const tracked = claim.then(() => undefined);
    this.#claimsInFlight.add(tracked);
    this.#noteConnections();
    void claim.then((result) => {
      this.#claimsInFlight.delete(tracked);
      if (result !== 'took rows' && this.#claimsInFlight.size === 0 && !this.#isStopping) {
        void this.#waitThenPump(result);
      } else {
        this.#pump();
      }
    });
  }

  async #runClaim(limit: number): Promise<'took rows' | 'empty' | 'failed'> {
    let rows: HeldRow[];
    try {
      this.counters.claims += 1;
      rows = await this.#options.claim(limit);
    } catch (error) {
      this.counters.failedClaims += 1;
      this.#isProbing = true;
      this.#options.onClaimError(error);
      return 'failed';
    }
    if (this.#isStopping) {
      await Promise.allSettled(rows.map((row) => this.#options.handBack(row)));
      return 'took rows';
    }
    if (rows.length === 0) {
      this.counters.emptyClaims += 1;
      this.#isProbing = true;
      return 'empty';
    }
    this.#isProbing = false;
    for (const row of rows) {
      if (this.#inWork < this.#options.workers) this.#startDelivery(row);
      else this.#waitingRows.push(row);
    }
    return 'took rows';
  }

  /**
   * After the last claim in flight came back empty, the next claim waits for the poll interval
   * or a wake; after a failed claim it waits FAILED_CLAIM_BACKOFF_MS whatever wakes arrive.
   */
  async #waitThenPump(result: 'empty' | 'failed'): Promise<void> {
    this.#isWaiting = true;
    try {
      if (result === 'failed') await abortableSleep(FAILED_CLAIM_BACKOFF_MS, this.#stop.signal);
      else await this.#wake.wait(this.#options.pollIntervalMs);
    } finally {
      this.#isWaiting = false;
    }
    this.#pump();
  }

  #startDelivery(row: HeldRow): void {
    this.#inWork += 1;
    this.#noteConnections();
    const delivery = this.#options.deliver(row).finally(() => {
      this.#inWork -= 1;
      this.#deliveries.delete(delivery);
      this.#pump();
    });
    this.#deliveries.add(delivery);
  }

  #noteConnections(): void {
    this.counters.maxConnectionsHeld = Math.max(this.counters.maxConnectionsHeld, this.connectionsHeld);
  }
}
