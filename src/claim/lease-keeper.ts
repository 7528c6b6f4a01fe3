import { bindStatement, type Statement } from '../statement.js';
import { withConnection } from '../driver/connection-scope.js';
import type { Connection, Driver } from '../driver/driver.js';
import { leaseExpiry, type LeaseBook, type LeaseSlot } from './lease-book.js';

export interface LeaseKeeperOptions {
  readonly driver: Driver;
  readonly book: LeaseBook;
  readonly extend: Statement;
  readonly leaseMs: number;
  readonly onRenewed: () => void;
  readonly onLost: (slot: LeaseSlot) => void;
  readonly onError: (error: unknown) => void;
}

/**
 * Renews every lease in the book each half lease, on one connection per round. Rounds are
 * chained with `setTimeout`, so a late round shifts the schedule instead of bursting. An idle
 * subscription (empty book) takes no connection.
 */
export class LeaseKeeper {
  readonly #options: LeaseKeeperOptions;
  #timer: NodeJS.Timeout | undefined;
  #isClosed = false;
  /** Gives back the pool's connection kept for renewals. */
  #releaseRenewalConnection: (() => void) | undefined;

  constructor(options: LeaseKeeperOptions) {
    this.#options = options;
  }

  start(): void {
    this.#releaseRenewalConnection = this.#options.driver.holdForRenewals();
    this.#schedule();
  }

  close(): void {
    this.#isClosed = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#releaseRenewalConnection?.();
  }

  #schedule(): void {
    if (this.#isClosed) return;
    this.#timer = setTimeout(() => {
      void this.#round().finally(() => this.#schedule());
    }, this.#options.leaseMs / 2);
    this.#timer.unref();
  }

  async #round(): Promise<void> {
    const { driver, book } = this.#options;
    if (book.renewable().length === 0) return;
    try {
      // Renewals take the connection kept for them, so handlers' own queries never make them wait.
      await withConnection(driver, (connection) => this.#renewOn(connection), { purpose: 'renewal' });
    } catch (error) {
      this.#options.onError(error);
    }
  }

  async #renewOn(connection: Connection): Promise<void> {
    const { book, extend, leaseMs } = this.#options;
    // "now" is read after the pool lent the connection, so a wait for it never shortens a lease.
    const next = leaseExpiry(new Date(), leaseMs);
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
