import { DeclarationError } from './errors.js';

/**
 * The longest delay Node's timers keep: `setTimeout` with more fires after 1 ms instead (with a
 * TimeoutOverflowWarning), so a poll interval of 2^31 ms would poll a thousand times a second.
 * Every millisecond option is refused above it (about 24.8 days).
 */
export const MAX_TIMER_MS = 2_147_483_647;

/**
 * The longest lease. A lease never limits how long a handler runs (it is renewed every half
 * lease); its length is only how long a crashed process's rows stay unclaimable, and how long a
 * live process may go without renewing (a blocked event loop, a database that does not answer)
 * before its rows go to another. An hour covers a synchronous handler blocking its event loop for
 * half an hour or a database outage of as long, while a crash still frees its rows the same hour;
 * a longer lease is a typo or a lease used as a timeout.
 */
export const MAX_LEASE_MS = 3_600_000;

/** `value` as a whole number from 1 to `max`, or a `DeclarationError` saying where and what came instead. */
export function positiveInteger(value: unknown, name: string, where: string, max = Number.MAX_SAFE_INTEGER): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > max) {
    const range = max === Number.MAX_SAFE_INTEGER ? 'of at least 1' : `from 1 to ${max}`;
    throw new DeclarationError(`${where}: ${name} must be a whole number ${range}, got ${String(value)}`);
  }
  return value;
}

/**
 * `value` as a number of milliseconds above 0 and at most `max` (Node's longest timer unless
 * smaller), or a `DeclarationError` saying where and what came instead.
 */
export function positiveMilliseconds(value: unknown, name: string, where: string, max = MAX_TIMER_MS): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0 || value > max) {
    throw new DeclarationError(`${where}: ${name} must be a number of milliseconds above 0 and at most ${max}, got ${String(value)}`);
  }
  return value;
}

/** `value` as a number of milliseconds from 0 to Node's longest timer, or a `DeclarationError`. */
export function millisecondsFromZero(value: unknown, name: string, where: string): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0 || value > MAX_TIMER_MS) {
    throw new DeclarationError(`${where}: ${name} must be a number of milliseconds from 0 to ${MAX_TIMER_MS}, got ${String(value)}`);
  }
  return value;
}
