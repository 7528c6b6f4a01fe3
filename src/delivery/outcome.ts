import { DeclarationError } from '../errors.js';

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
  /** Back to the queue, due again after `delayMs` (needs a retryAfter column; otherwise at once). */
  retryAfter: (delayMs: number): Outcome => {
    if (!Number.isFinite(delayMs) || delayMs < 0) {
      throw new DeclarationError(`Outcome.retryAfter needs a delay of zero or more milliseconds, got ${delayMs}`);
    }
    return Object.freeze({ kind: 'retryAfter', delayMs });
  },
  /** Finished without success: removed exactly like ack. Not a dead letter. */
  drop: (): Outcome => DROP,
});

const KINDS = new Set(['ack', 'retry', 'retryAfter', 'drop']);

export function isOutcome(value: unknown): value is Outcome {
  return typeof value === 'object' && value !== null && KINDS.has((value as { kind?: unknown }).kind as string);
}
