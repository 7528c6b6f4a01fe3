/** A delay that doubles with each step, from `initialMs` up to `maxMs`. */
export interface Backoff {
  readonly initialMs: number;
  readonly maxMs: number;
}

/**
 * The delay of step `step` (1 for the first; below 1 counts as 1): `initialMs` doubled for each
 * step after the first, at most `maxMs`. The exponent stops at 30, so a long run of steps stays
 * a finite number that `maxMs` caps.
 */
export function backoffDelayMs(backoff: Backoff, step: number): number {
  return Math.min(backoff.maxMs, backoff.initialMs * 2 ** Math.max(0, Math.min(step - 1, 30)));
}
