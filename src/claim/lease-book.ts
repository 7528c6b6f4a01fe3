import type { CommitDurability } from '../driver/pool-gate.js';

/**
 * What the lease form's claims, renewals and settlements commit with. A power loss that rolls one
 * of them back only delivers a message again, as a crash before the ack does: a claim lost hands
 * the row out again, a renewal or a settlement lost leaves the row to come back when its lease
 * runs out. So SQLite syncs them at its next checkpoint rather than at every commit, two per message.
 */
export const LEASE_COMMITS = { commitDurability: 'redeliverable' } as const satisfies { commitDurability: CommitDurability };

/**
 * The token a lease is held by (its expiry), and the one a renewal whose outcome is unknown (its
 * connection broke mid-statement) may have written instead.
 */
export class LeaseTokens {
  token: Date;
  uncertainToken: Date | undefined;

  constructor(token: Date) {
    this.token = token;
  }

  /** The tokens a settlement should try, in order. */
  candidateTokens(): Date[] {
    return this.uncertainToken === undefined ? [this.token] : [this.token, this.uncertainToken];
  }
}

/**
 * The leases a subscription holds, one slot per claimed row. A slot moves through these states:
 *
 *   held ──keeper round──▶ extending ──▶ held (new token) | lost (row gone or taken)
 *     │                        │
 *     └──settlement────────────┴──(waits for the round's statement)──▶ settling ──▶ removed
 *
 * A settlement never races a renewal of the same row: it waits for the renewal's statement to
 * answer and then names the token that is current, and a round never starts one for a slot
 * that began settling (or left the book) while the round renewed the rows before it. So a row
 * a renewal finds without its token was taken by someone else: a lost lease, never our own ack.
 * When a renewal's outcome is unknown (its connection broke mid-statement) the slot keeps both
 * tokens and the settlement tries the new one after the old.
 */
export class LeaseSlot extends LeaseTokens {
  readonly id: string;
  readonly idValue: unknown;
  isLost = false;
  isSettling = false;
  /** The handler ran past its timeout: the lease runs out unless the settlement comes first. */
  isRenewalStopped = false;
  /** The renewal statement in flight for this row, if any. */
  extension: Promise<void> | undefined;

  constructor(id: string, idValue: unknown, token: Date) {
    super(token);
    this.id = id;
    this.idValue = idValue;
  }
}

export class LeaseBook {
  readonly #slots = new Map<string, LeaseSlot>();

  get size(): number {
    return this.#slots.size;
  }

  add(slot: LeaseSlot): void {
    this.#slots.set(slot.id, slot);
  }

  remove(slot: LeaseSlot): void {
    if (this.#slots.get(slot.id) === slot) this.#slots.delete(slot.id);
  }

  /** Slots a renewal round should extend: held, not settling, not lost, not timed out. */
  renewable(): LeaseSlot[] {
    return [...this.#slots.values()].filter((slot) => this.isRenewable(slot));
  }

  /**
   * Whether `slot` may be renewed now: still in the book, not settling, not lost, its handler
   * not past its timeout. A round asks
   * again just before each statement, since its list was read before its first one.
   */
  isRenewable(slot: LeaseSlot): boolean {
    return this.#slots.get(slot.id) === slot && !slot.isSettling && !slot.isLost && !slot.isRenewalStopped;
  }
}

/** Lease expiries are whole seconds so the token read back equals the one written on every column type. */
export function leaseExpiry(now: Date, leaseMs: number): Date {
  return new Date(Math.ceil((now.getTime() + leaseMs) / 1000) * 1000);
}

/** Leases are whole seconds; shorter is rounded up (at least one second). */
export function roundLeaseMs(leaseMs: number): number {
  return Math.max(1000, Math.ceil(leaseMs / 1000) * 1000);
}
