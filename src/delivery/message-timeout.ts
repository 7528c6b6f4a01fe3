import { MAX_TIMER_MS } from '../option-checks.js';

/**
 * The header that carries a message's own timeout, in milliseconds as decimal text: written by
 * `publish(queue, payload, { timeoutMs })`, read at delivery, where it overrides the
 * subscription's `timeoutMs` for that message.
 */
export const TIMEOUT_HEADER = 'tablequeue-timeout-ms';

/**
 * The timeout a message's headers ask for, or undefined when they name none or a value no timer
 * can keep (written by hand, not by `publish`): the subscription's own timeout applies then.
 */
export function timeoutOfHeaders(headers: Readonly<Record<string, string>>): number | undefined {
  const text = headers[TIMEOUT_HEADER];
  if (text === undefined) return undefined;
  const value = Number(text);
  return text.trim() !== '' && Number.isFinite(value) && value > 0 && value <= MAX_TIMER_MS ? value : undefined;
}
