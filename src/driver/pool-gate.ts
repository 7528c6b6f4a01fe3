import { PoolExhaustedError } from '../errors.js';

/**
 * What a connection is for. A lease renewal may take the connection kept for renewals; all other
 * work (claims, deliveries, settlements, publishes, handlers' own queries) may not.
 */
export type AcquirePurpose = 'work' | 'renewal';

/**
 * What a loan's commits must survive. `durable` (the default): a power loss or an OS crash right
 * after the commit. `redeliverable`: only an application crash; a power loss may roll the commit
 * back, which must leave nothing worse than a message delivered again. That holds for a lease
 * claim, renewal or settlement (a claim lost hands the row out again, a settlement lost leaves it
 * to be redelivered when its lease runs out, as a crash before the ack does), never for a publish.
 *
 * Only SQLite files the driver opened from a URL act on it: in WAL mode the loan's commits run at
 * `PRAGMA synchronous = NORMAL`, which syncs the log at checkpoints instead of at every commit
 * (a loop of lease claim and fenced delete over 3,000 rows drained 250 to 580 msg/s at FULL and
 * 8,000 to 9,300 at NORMAL), and durable loans at FULL or above. A handle the service passed
 * keeps its own level, and PostgreSQL and MySQL drivers ignore the option.
 */
export type CommitDurability = 'durable' | 'redeliverable';

export interface AcquireOptions {
  readonly purpose?: AcquirePurpose;
  /** `durable` unless given; see `CommitDurability`. */
  readonly commitDurability?: CommitDurability;
}

/** Waits for a connection at most this long by default before failing with `PoolExhaustedError`. */
export const DEFAULT_ACQUIRE_TIMEOUT_MS = 30_000;

/**
 * Below this pool size nothing is kept for renewals: a pool of two that kept one would leave a
 * transactional delivery no connection for its handler's own queries.
 */
const MIN_POOL_SIZE_FOR_RENEWAL_RESERVE = 3;

interface Waiter {
  readonly purpose: AcquirePurpose;
  readonly enter: () => void;
}

/**
 * Admits the connections that every tablequeue driver on one pool takes from it, so that the
 * pool's own queue, which serves callers in arrival order, never holds ours. While a lease
 * subscription is open on the pool (and it has at least three connections), one connection is
 * kept for lease renewals: handlers' own queries can then use every other connection and still
 * never make a renewal wait behind them (with a pool of 4, 8 workers whose handlers each held a
 * connection for 1.5 s, and a 2 s lease, renewals waited in the pool's queue and leases were lost).
 * Waiting renewals enter before waiting work. Shared through `poolGateFor` by every driver on the
 * same pool object.
 */
export class PoolGate {
  readonly #size: () => number;
  #lent = 0;
  #renewalHolds = 0;
  readonly #waiters: Waiter[] = [];

  constructor(size: () => number) {
    this.#size = size;
  }

  /** Connections admitted and not yet left. */
  get lent(): number {
    return this.#lent;
  }

  /** Connections kept for lease renewals: 0 or 1. */
  get reservedForRenewals(): number {
    return this.#renewalHolds > 0 && this.#size() >= MIN_POOL_SIZE_FOR_RENEWAL_RESERVE ? 1 : 0;
  }

  /** Work that could enter now without waiting. */
  get availableForWork(): number {
    // Read before every parallel claim: count the line only when there is one.
    const waitingWork = this.#waiters.length === 0 ? 0 : this.#waiters.filter((waiter) => waiter.purpose === 'work').length;
    return Math.max(0, this.#size() - this.reservedForRenewals - this.#lent - waitingWork);
  }

  /** Keeps a connection for renewals until the returned function is called (once per lease subscription). */
  holdForRenewals(): () => void {
    this.#renewalHolds += 1;
    let isReleased = false;
    return () => {
      if (isReleased) return;
      isReleased = true;
      this.#renewalHolds -= 1;
      this.#admitWaiters();
    };
  }

  /**
   * Resolves once the connection may be taken from the pool; `leave()` must follow exactly once.
   * Fails with `PoolExhaustedError` after `timeoutMs`.
   */
  enter(options: { purpose: AcquirePurpose; timeoutMs: number; describe: (timeoutMs: number) => string }): Promise<void> {
    const { purpose, timeoutMs } = options;
    // Nothing passes a waiter of its own kind; a renewal passes waiting work.
    const isFirstInLine = purpose === 'renewal' ? !this.#waiters.some((waiter) => waiter.purpose === 'renewal') : this.#waiters.length === 0;
    if (isFirstInLine && this.#canEnter(purpose)) {
      this.#lent += 1;
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = {
        purpose,
        enter: () => {
          clearTimeout(timer);
          this.#lent += 1;
          resolve();
        },
      };
      const timer = setTimeout(() => {
        this.#waiters.splice(this.#waiters.indexOf(waiter), 1);
        reject(new PoolExhaustedError(options.describe(timeoutMs)));
        // A waiting renewal removed from the head may unblock work behind it.
        this.#admitWaiters();
      }, timeoutMs);
      // Renewals go before every waiting piece of work; each kind keeps its arrival order.
      const index = purpose === 'renewal' ? this.#waiters.findIndex((other) => other.purpose === 'work') : -1;
      if (index === -1) this.#waiters.push(waiter);
      else this.#waiters.splice(index, 0, waiter);
    });
  }

  leave(): void {
    this.#lent -= 1;
    this.#admitWaiters();
  }

  #canEnter(purpose: AcquirePurpose): boolean {
    const limit = purpose === 'renewal' ? this.#size() : this.#size() - this.reservedForRenewals;
    return this.#lent < limit;
  }

  #admitWaiters(): void {
    // Waiting renewals stand before all waiting work, so the head is always the next to enter.
    while (this.#waiters.length > 0 && this.#canEnter(this.#waiters[0]!.purpose)) this.#waiters.shift()!.enter();
  }
}

const gates = new WeakMap<object, PoolGate>();

/** The gate of one pool object, shared by every driver (and broker) that lends from it. */
export function poolGateFor(pool: object, size: () => number): PoolGate {
  let gate = gates.get(pool);
  if (gate === undefined) {
    gate = new PoolGate(size);
    gates.set(pool, gate);
  }
  return gate;
}

/** The message of a `PoolExhaustedError`: the numbers, and what to change. */
export function describeExhaustion(description: string, size: number, gate: PoolGate, timeoutMs: number): string {
  const kept = gate.reservedForRenewals > 0 ? ', one of them kept for lease renewals' : '';
  return (
    `no connection of ${description} became free within ${timeoutMs} ms: the pool has ${size}, ` +
    `tablequeue holds ${gate.lent}${kept}; give the pool more connections (poolSize, or the size of your own pool), ` +
    `run fewer workers, or let handlers hold connections for less time (acquireTimeoutMs sets this wait)`
  );
}
