import { bindStatement, type Statement } from '../statement.js';
import { withConnection } from '../driver/connection-scope.js';
import { systemClock, type Clock } from '../internal/clock.js';
import { TestSignal } from '../internal/test-signal.js';
import type { Connection, Driver } from '../driver/driver.js';
import { LEASE_COMMITS, leaseExpiry, type LeaseBook, type LeaseSlot } from './lease-book.js';

export interface LeaseKeeperOptions {
  readonly driver: Driver;
  readonly book: LeaseBook;
  readonly extend: Statement;
  readonly leaseMs: number;
  readonly onRenewed: () => void;
  readonly onLost: (slot: LeaseSlot) => void;
  readonly onError: (error: unknown) => void;
  /** Where "now" and the half-lease timer come from: the host's clock unless a test moves one. */
  readonly clock?: Clock;
  /** Signals a test turns on; the keeper makes dormant ones without. */
  readonly signals?: LeaseKeeperSignals;
}

/** What the keeper tells a test that turned a signal on (internal/test-signal.ts); nothing otherwise. */
export class LeaseKeeperSignals {
  /** A renewal round ended (leaseRenewals and leasesLost counted); also a round that found no lease to renew. */
  readonly roundEnded = new TestSignal();
}

/**
 * Renews every lease in the book each half lease, on one connection per round. Rounds are
 * chained with `setTimeout`, so a late round shifts the schedule instead of bursting. An idle
 * subscription (empty book) takes no connection.
 */
export class LeaseKeeper {
  readonly #options: LeaseKeeperOptions;
  readonly #clock: Clock;
  readonly #signals: LeaseKeeperSignals;
  #cancelTimer: (() => void) | undefined;
  #isClosed = false;
  /** Gives back the pool's connection kept for renewals. */
  #releaseRenewalConnection: (() => void) | undefined;

  constructor(options: LeaseKeeperOptions) {
    this.#options = options;
    this.#clock = options.clock ?? systemClock;
    this.#signals = options.signals ?? new LeaseKeeperSignals();
  }

  start(): void {
    this.#releaseRenewalConnection = this.#options.driver.holdForRenewals();
    this.#schedule();
  }

  close(): void {
    this.#isClosed = true;
    this.#cancelTimer?.();
    this.#releaseRenewalConnection?.();
  }

  #schedule(): void {
    if (this.#isClosed) return;
    this.#cancelTimer = this.#clock.setTimer(this.#options.leaseMs / 2, () => {
      void this.#round().finally(() => {
        this.#signals.roundEnded.emit();
        this.#schedule();
      });
    });
  }

  async #round(): Promise<void> {
    const { driver, book } = this.#options;
    if (book.renewable().length === 0) return;
    try {
      // Renewals take the connection kept for them, so handlers' own queries never make them wait.
      await withConnection(driver, (connection) => this.#renewOn(connection), { purpose: 'renewal', ...LEASE_COMMITS });
    } catch (error) {
      this.#options.onError(error);
    }
  }

  async #renewOn(connection: Connection): Promise<void> {
    const { book, extend, leaseMs } = this.#options;
    // "now" is read after the pool lent the connection, so a wait for it never shortens a lease.
    const next = leaseExpiry(this.#clock.now(), leaseMs);
    for (const slot of book.renewable()) {
      // Rows renewed before this one took round trips, in which this row's delivery may have
      // settled: its row is then gone or released by our own ack, which is no lost lease.
      if (!book.isRenewable(slot)) continue;
      const held = slot.token;
      const extension = connection
        .execute(bindStatement(extend, { lockedUntil: next, id: slot.idValue, held }))
        .then(
          (result) => {
            if (result.affectedRows > 0) {
              slot.token = next;
              slot.uncertainToken = undefined;
              this.#options.onRenewed();
            } else {
              slot.isLost = true;
              this.#options.onLost(slot);
            }
          },
          (error: unknown) => {
            slot.uncertainToken = next;
            throw error;
          },
        );
      slot.extension = extension.catch(() => undefined);
      try {
        await extension;
      } finally {
        slot.extension = undefined;
      }
    }
  }
}
