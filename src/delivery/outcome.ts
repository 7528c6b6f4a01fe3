import { DeclarationError } from '../errors.js';
import { isStorableTime } from '../table/storable-values.js';

/** What a handler decides for its message. Returned, never thrown; returning nothing acks. */
export type Outcome =
  | { readonly kind: 'ack' }
  | { readonly kind: 'retry' }
  | { readonly kind: 'retryAfter'; readonly delayMs: number }
  | { readonly kind: 'drop' };

const ACK: Outcome = Object.freeze({ kind: 'ack' });
const RETRY: Outcome = Object.freeze({ kind: 'retry' });
const DROP: Outcome = Object.freeze({ kind: 'drop' });

export const Outcome = Object.freeze({
  /** Done: delete the row, or mark it processed. */
  ack: (): Outcome => ACK,
  /** Back to the queue at once; the next delivery reads one more attempt. */
  retry: (): Outcome => RETRY,
  /**
   * Back to the queue, due again after `delayMs` (needs a retryAfter column; otherwise at once).
   * A delay that ends past year 9999 is refused here, so a handler that asks for one throws and
   * its delivery is retried after the subscription's backoff, like any handler error.
   */
  retryAfter: (delayMs: number): Outcome => {
    const problem = retryDelayProblem(delayMs, Date.now());
    if (problem !== undefined) throw new DeclarationError(`Outcome.retryAfter: ${problem}`);
    return Object.freeze({ kind: 'retryAfter', delayMs });
  },
  /** Finished without success: removed exactly like ack. Not a dead letter. */
  drop: (): Outcome => DROP,
});

const KINDS = new Set(['ack', 'retry', 'retryAfter', 'drop']);

export function isOutcome(value: unknown): value is Outcome {
  return typeof value === 'object' && value !== null && KINDS.has((value as { kind?: unknown }).kind as string);
}

/**
 * What is wrong with a retry delay, or undefined when it is usable: zero or more milliseconds
 * that end, counted from `nowMs`, by the end of year 9999 (the latest instant every database
 * stores and sorts). Also applied to outcomes a handler builds as object literals.
 */
export function retryDelayProblem(delayMs: unknown, nowMs: number): string | undefined {
  if (typeof delayMs !== 'number' || !Number.isFinite(delayMs) || delayMs < 0) {
    return `the delay must be zero or more milliseconds, got ${String(delayMs)}`;
  }
  if (!isStorableTime(nowMs + delayMs)) {
    return `a delay of ${delayMs} ms ends after year 9999, past what every database stores; use a shorter delay`;
  }
  return undefined;
}
