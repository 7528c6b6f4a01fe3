import type { DeliveryTransaction } from '../delivery/delivery-transaction.js';
import type { DeadLetterTarget } from '../dialect/dialect.js';
import type { ParamValues, Statement } from '../statement.js';

/** A row a claim took, as read from the database. */
export interface ClaimedRow {
  readonly row: Record<string, unknown>;
  /** The id as text. */
  readonly id: string;
  /** The id exactly as the driver returned it, bound back unchanged in settlements. */
  readonly idValue: unknown;
  /** The attempt as it stood before this claim: 1 on the first delivery. */
  readonly attempt: number;
}

/**
 * What to do with a row once its handler is done, in the terms of the table. A delayed retry
 * carries the instant on the host clock (`at`) and the delay itself, which a database-clock
 * table adds to the database's now instead.
 */
export type Settlement =
  | {
      readonly kind: 'finish';
      /** Transactional mode: true for an ack, whose handler writes commit with the finish. */
      readonly commitsHandlerWrites?: boolean;
    }
  | { readonly kind: 'retry' }
  | { readonly kind: 'retryAfter'; readonly at: Date; readonly delayMs: number }
  | {
      readonly kind: 'deadLetter';
      readonly target: DeadLetterTarget;
      /** The last failure as storable text, bound as `lastError` into the row's headers where the table has them. */
      readonly lastError: string;
    };

/** Whether a settlement keeps what a transactional handler wrote: only an ack does. */
export function commitsHandlerWrites(settlement: Settlement): boolean {
  return settlement.kind === 'finish' && settlement.commitsHandlerWrites === true;
}

/**
 * The values every settlement statement binds, by parameter name: the row's id, now, the delayed
 * retry's instant (and its delay, for a table on the database clock), the dead-letter group and
 * the last error; `held`, the lease token, for the lease form's fenced settlements.
 */
export function settlementValues(idValue: unknown, settlement: Settlement, held?: Date): ParamValues {
  return {
    id: idValue,
    held,
    now: new Date(),
    retryAfterAt: settlement.kind === 'retryAfter' ? settlement.at : undefined,
    delayMicroseconds: settlement.kind === 'retryAfter' ? Math.round(settlement.delayMs * 1000) : undefined,
    destination: settlement.kind === 'deadLetter' && settlement.target.kind === 'group' ? settlement.target.group : undefined,
    lastError: settlement.kind === 'deadLetter' ? settlement.lastError : undefined,
  };
}

/** A claimed row and the means to settle it, fenced by whatever the form holds. */
export interface HeldRow extends ClaimedRow {
  /**
   * Transactional mode (`FormContext.transactional`): the delivery's transaction, open from the
   * claim until the settlement, lent to the handler as `context.tx`. A settlement that commits
   * the handler's writes (`commitsHandlerWrites`) commits them with it; any other settlement, and
   * a hand back, rolls them back first. Undefined otherwise.
   */
  readonly transaction?: DeliveryTransaction;
  /** Settles the row; throws `LeaseLostError` or `StatementError` and changes nothing then. */
  settle(settlement: Settlement): Promise<void>;
  /** Returns the row to the queue unhandled and without spending an attempt where the form allows. */
  handBack(): Promise<void>;
  /**
   * The handler ran past its timeout: the lease form stops renewing the row's lease, so a
   * handler that is never given up on cannot keep it. Forms without leases have none.
   */
  stopRenewing?(): void;
}

/**
 * One of the three ways to claim rows: take, hold, settle. Each form also says how its claims
 * and deliveries use the pool, which the claim loop and the delivery runner go by.
 */
/**
 * A claim that a settling delivery runs on its own connection, written with its COMMIT in one
 * round trip (the claim loop's `chainClaim`). The loop hears how it ended through exactly one of these.
 */
export interface ChainedClaim {
  /** It took `rows`: offered to the workers, or handed back when stop began (resolves once they are). */
  tookRows(rows: HeldRow[]): Promise<void>;
  tookNothing(): void;
  /** Its statement failed; the settlement before it had committed. */
  failed(error: unknown): void;
  /** It never ran: the settlement before it failed. */
  abandoned(): void;
}

/** Where a form asks for claims to chain after its settlements' commits. */
export interface ChainedClaimSource {
  /** A claim for the worker about to go idle, or undefined when the loop would not start one now. */
  chainClaim(): ChainedClaim | undefined;
  /** What the claim takes as due. */
  now(): Date;
}

export interface ClaimForm {
  /** Whether each delivery in work holds a pool connection until it settles (WP-5). */
  readonly holdsConnection: boolean;
  /** Whether only one claim of the subscription may run at a time (WP-7). */
  readonly claimsOneAtATime: boolean;
  /**
   * Whether a delivery is done once its settlement is handed to the form, which writes it later
   * together with others (the lease form's coalesced settlements), rather than once written.
   */
  readonly isDoneAtHandover: boolean;
  /** The rows one claim takes for `workers` idle workers when the subscription names no batch. */
  rowsPerClaim(workers: number): number;
  /**
   * The connections the form's deliveries and claims in progress hold, where that is not one per
   * delivery in work (the advisory forms: one per row of a batch, and a claim's further rows).
   */
  connectionsInWork?(): number;
  /** Every statement the form runs, for the start-up prepare check. */
  readonly statements: Statement[];
  /** Claims up to `limit` rows, due at `now`. */
  claim(limit: number, now: Date): Promise<HeldRow[]>;
  /**
   * Forms that can run a claim on a settling delivery's connection in the round trip of its
   * COMMIT (the row lock form, one row per claim, where the client pipelines) ask `source` for one.
   */
  chainClaimsThrough?(source: ChainedClaimSource): void;
  /**
   * Stop began: settlements the form holds back to send together (lease form) go now, and
   * later ones are not held back. Forms that settle each row at once have nothing to do.
   */
  beginStop?(): void;
  /** Stops background work (lease renewals); rows still held stay held. */
  close(): void;
}
