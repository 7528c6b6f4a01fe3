import type { PoolStats } from './driver.js';

/** What a pool says about itself; each driver reads these from its client library. */
export interface PoolCounts {
  /** The most connections the pool opens. */
  readonly size: number;
  /** Connections open now, lent or idle (including ones being opened). */
  readonly open: number;
  /** Connections open and idle. */
  readonly idle: number;
  /** Callers queued for a connection; they take idle ones before we can. */
  readonly waiting: number;
}

/** What the pool's gate says: see `PoolGate`. */
export interface GateCounts {
  readonly availableForWork: number;
  readonly reservedForRenewals: number;
}

/** A pool without a gate (SQLite's one handle): nothing kept, nothing limited beyond the pool. */
export const UNGATED: GateCounts = Object.freeze({ availableForWork: Number.POSITIVE_INFINITY, reservedForRenewals: 0 });

/**
 * Counts the connections one driver holds, and the most it ever held at once, and combines them
 * with the pool's own counts into `PoolStats`. The pool may be shared with the service, so what
 * this driver holds is counted here, while what is spare comes from the pool.
 */
export class PoolLedger {
  #held = 0;
  #maxHeld = 0;

  get held(): number {
    return this.#held;
  }

  countLent(): void {
    this.#held += 1;
    this.#maxHeld = Math.max(this.#maxHeld, this.#held);
  }

  countReturned(): void {
    this.#held -= 1;
  }

  stats(counts: PoolCounts, gate: GateCounts = UNGATED): PoolStats {
    const roomToOpen = Math.max(0, counts.size - counts.open);
    return {
      size: counts.size,
      held: this.#held,
      idle: counts.idle,
      spare: Math.max(0, Math.min(counts.idle + roomToOpen - counts.waiting, gate.availableForWork)),
      maxHeld: this.#maxHeld,
      reservedForRenewals: gate.reservedForRenewals,
    };
  }
}
