import type { Connection } from '../driver/driver.js';
import type { DeliveryTransaction } from '../delivery/delivery-transaction.js';
import type { Statement } from '../statement.js';
import { AdvisoryClaims, holdUntilSettled } from './advisory-claims.js';
import { AdvisorySlots } from './advisory-slots.js';
import type { ClaimedRow, ClaimForm, HeldRow } from './claim-form.js';
import { claimsOneAtATime, type FormContext } from './form-context.js';
import { inProcessLocks } from './in-process-lock-registry.js';
import { readClaimedRow } from './row-values.js';

/** Transactional mode: the connection a delivery holds and the transaction lent on it. */
interface HeldTransaction {
  readonly connection: Connection;
  readonly transaction: DeliveryTransaction;
}

/**
 * Advisory lock form where the database has no session locks (SQLite): keys are held in
 * `inProcessLocks`, a claim takes a connection only while its statements run, and so does a
 * settlement; the handle is never held through a handler. The registry holds within one process
 * only. Otherwise as `SessionLockForm`: candidates with their keys, each key taken without
 * waiting, the row taken while still claimable, rows that share a key one at a time.
 *
 * Transactional mode: the delivery keeps the claim's connection through the handler, with its
 * transaction open on it; an ack settles and commits inside it, anything else rolls it back first.
 */
export class InProcessLockForm implements ClaimForm {
  readonly holdsConnection: boolean;
  readonly claimsOneAtATime: boolean;
  readonly isDoneAtHandover = false;
  readonly #claims: AdvisoryClaims;
  /** `concurrency.global`: the slot each delivery holds beside its row's key, in the registry too. */
  readonly #slots: AdvisorySlots | undefined;

  constructor(context: FormContext) {
    this.#claims = new AdvisoryClaims(context);
    const global = context.concurrency?.global;
    this.#slots = global === undefined ? undefined : new AdvisorySlots(context, global);
    this.holdsConnection = context.transactional;
    this.claimsOneAtATime = claimsOneAtATime(context);
  }

  /** Every statement this form runs, for the start-up prepare check. */
  get statements(): Statement[] {
    return [...this.#claims.statementList, ...(this.#slots ? [this.#slots.statement] : [])];
  }

  rowsPerClaim(): number {
    return 1;
  }

  /** Connections transactional deliveries hold, one each. */
  connectionsInWork(): number {
    return this.#claims.deliveryConnectionCount;
  }

  /** One connection for the select and the takes; the registry filters held keys. */
  async claim(limit: number, now: Date): Promise<HeldRow[]> {
    const claims = this.#claims;
    const { driver, spec, transactional } = claims.context;
    // Transactional mode is for single deliveries.
    const rowLimit = transactional ? 1 : limit;
    const database = driver.databaseIdentity ?? driver;
    const taken: HeldRow[] = [];
    const connection = await claims.acquire();
    let held: HeldTransaction | undefined;
    try {
      // The select cannot see the registry: reach past the rows whose keys this process holds.
      const candidates = await claims.candidates(connection, rowLimit + inProcessLocks.heldCount(database), now);
      for (const candidate of candidates) {
        if (taken.length >= rowLimit) break;
        let slot: string | undefined;
        if (this.#slots !== undefined) {
          slot = await this.#slots.take(connection, async (key) => inProcessLocks.tryLock(database, key));
          // Every slot is held by this process's deliveries: the limit is reached, and the claim ends.
          if (slot === undefined) break;
        }
        const keys = slot === undefined ? [candidate.key] : [candidate.key, slot];
        if (!inProcessLocks.tryLock(database, candidate.key)) {
          if (slot !== undefined) inProcessLocks.unlock(database, slot);
          continue;
        }
        let claimed: ClaimedRow | undefined;
        let transaction: DeliveryTransaction | undefined;
        let isHeld = false;
        try {
          const row = await claims.take(connection, candidate, now);
          if (row === undefined) continue;
          claimed = readClaimedRow(spec, row, false);
          transaction = await claims.openTransaction(connection, claimed);
          isHeld = true;
        } finally {
          if (!isHeld) for (const key of keys) inProcessLocks.unlock(database, key);
        }
        held = transaction === undefined ? undefined : { connection, transaction };
        taken.push(this.#hold(database, keys, claimed, held));
      }
    } catch (error) {
      claims.end(connection, 'destroy');
      await Promise.allSettled(taken.map((row) => row.handBack()));
      throw error;
    }
    if (held === undefined) claims.end(connection, 'release');
    else claims.handOver([connection]);
    return taken;
  }

  close(): void {}

  #hold(database: unknown, keys: readonly string[], claimed: ClaimedRow, held: HeldTransaction | undefined): HeldRow {
    const claims = this.#claims;
    const unlock = () => {
      for (const key of keys) inProcessLocks.unlock(database, key);
    };
    if (held === undefined) {
      return holdUntilSettled(
        claimed,
        undefined,
        async (settlement) => {
          try {
            await claims.settleAlone(claimed, settlement);
          } finally {
            unlock();
          }
        },
        async () => unlock(),
      );
    }
    const { connection, transaction } = held;
    return holdUntilSettled(
      claimed,
      transaction,
      async (settlement) => {
        try {
          await claims.settleOnHeldConnection(connection, transaction, claimed, settlement);
          claims.end(connection, 'release');
        } finally {
          unlock();
        }
      },
      async () => {
        if (await claims.rollBackHandlerWrites(connection, transaction)) claims.end(connection, 'release');
        unlock();
      },
    );
  }
}
