import type { Connection } from '../driver/driver.js';
import type { DeliveryTransaction } from '../delivery/delivery-transaction.js';
import type { Statement } from '../statement.js';
import { AdvisoryClaims, confirms, holdUntilSettled, type Candidate } from './advisory-claims.js';
import { AdvisorySlots } from './advisory-slots.js';
import type { ClaimedRow, ClaimForm, HeldRow } from './claim-form.js';
import { claimsOneAtATime, type FormContext } from './form-context.js';
import { readClaimedRow } from './row-values.js';

/**
 * Advisory lock form where the database has session locks (Postgres advisory locks, MySQL and
 * MariaDB `GET_LOCK`): a claim selects candidate rows with their keys, locks each key without
 * waiting on a connection of its own, and takes the row (counting the attempt while the row is
 * still claimable). Rows that share a key go one at a time.
 *
 * Each delivery keeps the connection that locked its key, with no transaction open, until it
 * settles (WP-5); the settlement runs there, then the unlock returns the row or lets its
 * successor in. A process that dies ends its sessions, and the server drops their locks: the
 * rows return at once.
 *
 * Transactional mode: after the take, the delivery opens a transaction on the connection it
 * holds and lends it to the handler. An ack settles and commits inside it; anything else rolls
 * it back first. It ends before the unlock.
 */
export class SessionLockForm implements ClaimForm {
  readonly holdsConnection = true;
  readonly claimsOneAtATime: boolean;
  readonly isDoneAtHandover = false;
  readonly #claims: AdvisoryClaims;
  readonly #lock: Statement;
  readonly #unlock: Statement;
  /** `concurrency.global`: the slot each delivery holds beside its row's key. */
  readonly #slots: AdvisorySlots | undefined;
  /** Connections claims in progress took for their further rows (see `connectionsInWork`). */
  #furtherClaimConnections = 0;

  constructor(context: FormContext) {
    this.#claims = new AdvisoryClaims(context);
    const own = this.#claims.service?.sessionLock;
    this.#lock = own?.lock ?? context.dialect.advisory.lock();
    this.#unlock = own?.unlock ?? context.dialect.advisory.unlock();
    const global = context.concurrency?.global;
    this.#slots = global === undefined ? undefined : new AdvisorySlots(context, global);
    this.claimsOneAtATime = claimsOneAtATime(context);
  }

  /** Every statement this form runs, for the start-up prepare check. */
  get statements(): Statement[] {
    return [this.#lock, this.#unlock, ...this.#claims.statementList, ...(this.#slots ? [this.#slots.statement] : [])];
  }

  rowsPerClaim(): number {
    return 1;
  }

  /**
   * Connections the deliveries hold (one per row, so a batch of n holds n), and those a claim in
   * progress took beyond its first for further rows: the claim loop counts only the first.
   */
  connectionsInWork(): number {
    return this.#claims.deliveryConnectionCount + this.#furtherClaimConnections;
  }

  /**
   * The first connection may wait for the pool (the claim loop left room for it) and runs the
   * candidate select. Each further row needs a connection the pool lends without waiting, so a
   * batch shrinks to what the pool can spare rather than wait for its own deliveries.
   */
  async claim(limit: number, now: Date): Promise<HeldRow[]> {
    const claims = this.#claims;
    // Transactional mode is for single deliveries.
    const rowLimit = claims.context.transactional ? 1 : limit;
    const taken: { row: HeldRow; connection: Connection }[] = [];
    let free: Connection | undefined = await claims.acquire();
    let further = 0;
    try {
      // The candidate select leaves out keys the dialect's locks hold, not a lock of the service's
      // own: it reaches past as many rows as this form's deliveries hold keys.
      const reach = claims.service?.sessionLock === undefined ? 0 : claims.deliveryConnectionCount;
      const candidates = await claims.candidates(free, rowLimit + reach, now);
      for (const candidate of candidates) {
        if (taken.length >= rowLimit) break;
        if (free === undefined) {
          free = await this.#acquireIfSpare();
          if (free === undefined) break;
          further += 1;
          this.#furtherClaimConnections += 1;
        }
        let slot: string | undefined;
        if (this.#slots !== undefined) {
          const connection: Connection = free;
          slot = await this.#slots.take(connection, (key) => confirms(connection, this.#lock, key));
          // Every slot is held, here or elsewhere: the limit is reached, and the claim ends.
          if (slot === undefined) break;
        }
        // Another claim or process took the key after the select read it.
        if (!(await confirms(free, this.#lock, candidate.key))) {
          if (slot !== undefined && !(await this.#unlockKey(free, slot))) free = undefined;
          continue;
        }
        const row = await claims.take(free, candidate, now);
        if (row === undefined) {
          // Settled between the select and the lock: the keys go back, with the session if unconfirmed.
          if (!(await this.#unlockKeys(free, candidate.key, slot))) free = undefined;
          continue;
        }
        const claimed = readClaimedRow(claims.context.spec, row, false);
        const transaction = await claims.openTransaction(free, claimed);
        taken.push({ connection: free, row: this.#hold(free, candidate, claimed, transaction, slot) });
        free = undefined;
      }
    } catch (error) {
      // Ending the session drops whatever lock it took; rows already taken go back unhandled.
      if (free !== undefined) claims.end(free, 'destroy');
      this.#furtherClaimConnections -= further;
      await Promise.allSettled(taken.map(({ row }) => row.handBack()));
      throw error;
    }
    this.#furtherClaimConnections -= further;
    if (free !== undefined) claims.end(free, 'release');
    claims.handOver(taken.map(({ connection }) => connection));
    return taken.map(({ row }) => row);
  }

  close(): void {}

  #hold(
    connection: Connection,
    candidate: Candidate,
    claimed: ClaimedRow,
    transaction: DeliveryTransaction | undefined,
    slot: string | undefined,
  ): HeldRow {
    const claims = this.#claims;
    const unlockAndEnd = async () => {
      if (await this.#unlockKeys(connection, candidate.key, slot)) claims.end(connection, 'release');
    };
    return holdUntilSettled(
      claimed,
      transaction,
      async (settlement) => {
        await claims.settleOnHeldConnection(connection, transaction, claimed, settlement);
        await unlockAndEnd();
      },
      async () => {
        if (await claims.rollBackHandlerWrites(connection, transaction)) await unlockAndEnd();
      },
    );
  }

  /**
   * Unlocks `key` on its session; true when confirmed. A session that does not confirm (0, NULL or
   * an error) may still hold the key, so it is destroyed: the server drops its locks.
   */
  async #unlockKey(connection: Connection, key: string): Promise<boolean> {
    // A failed unlock is answered like an unconfirmed one: ending the session is what releases the key.
    const isConfirmed = await confirms(connection, this.#unlock, key).catch(() => false);
    if (!isConfirmed) this.#claims.end(connection, 'destroy');
    return isConfirmed;
  }

  /** The row's key, then its slot's (if it holds one); false once an unlock failed and the session went. */
  async #unlockKeys(connection: Connection, key: string, slot: string | undefined): Promise<boolean> {
    if (!(await this.#unlockKey(connection, key))) return false;
    return slot === undefined || this.#unlockKey(connection, slot);
  }

  /**
   * A further connection for a claim, only when it comes without waiting and leaves one spare
   * (as a parallel claim, WP-3), and within the budget the pool's subscriptions share (WP-2, WP-4).
   */
  async #acquireIfSpare(): Promise<Connection | undefined> {
    const { context } = this.#claims;
    if (!context.hasRoomForConnection() || context.driver.stats().spare < 2) return undefined;
    return this.#claims.acquire();
  }
}
