import type { DeadLetterTarget } from '../dialect/dialect.js';
import type { Statement } from '../statement.js';

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

/** What to do with a row once its handler is done, in the terms of the table. */
export type Settlement =
  | { readonly kind: 'finish' }
  | { readonly kind: 'retry' }
  | { readonly kind: 'retryAfter'; readonly at: Date }
  | { readonly kind: 'deadLetter'; readonly target: DeadLetterTarget };

/** A claimed row and the means to settle it, fenced by whatever the form holds. */
export interface HeldRow extends ClaimedRow {
  /** Settles the row; throws `LeaseLostError` or `StatementError` and changes nothing then. */
  settle(settlement: Settlement): Promise<void>;
  /** Returns the row to the queue unhandled and without spending an attempt where the form allows. */
  handBack(): Promise<void>;
}

/** One of the three ways to claim rows: take, hold, settle. */
export interface ClaimForm {
  /** Whether each delivery in work holds a pool connection until it settles (WP-5). */
  readonly holdsConnection: boolean;
  /** Every statement the form runs, for the start-up prepare check. */
  readonly statements: Statement[];
  /** Claims up to `limit` rows, due at `now`. */
  claim(limit: number, now: Date): Promise<HeldRow[]>;
  /** Stops background work (lease renewals); rows still held stay held. */
  close(): void;
}
