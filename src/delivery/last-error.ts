import { toStorableText } from './codec.js';

/**
 * The most characters (code points) of a last error a dead letter records: enough for a message
 * and the start of what it quotes, small beside any headers column.
 */
export const MAX_LAST_ERROR_CHARACTERS = 2_000;

/**
 * A thrown value as an operator reads it: the message, led by the name unless it is a plain
 * `Error`. Errors from worker threads arrive rebuilt with their name; values that are not errors
 * are shown as JSON where they have a JSON form.
 */
export function describeThrown(thrown: unknown): string {
  if (typeof thrown === 'object' && thrown !== null && typeof (thrown as { message?: unknown }).message === 'string') {
    const { name, message } = thrown as { name?: unknown; message: string };
    const isPlainError = typeof name !== 'string' || name === '' || name === 'Error';
    if (isPlainError) return message === '' ? 'Error' : message;
    return message === '' ? name : `${name}: ${message}`;
  }
  if (typeof thrown === 'string') return thrown;
  try {
    return JSON.stringify(thrown) ?? String(thrown);
  } catch {
    return String(thrown);
  }
}

/** A handler that asked for another attempt (`retry` or `retryAfter`) when none was left. */
export function describeRetryRequested(outcome: 'retry' | 'retryAfter', attempt: number, maxAttempts: number): string {
  return `${outcome} requested at attempt ${attempt} of ${maxAttempts}`;
}

/**
 * The text a dead letter stores: whatever a column can hold (NUL and unpaired surrogates become
 * U+FFFD, see `toStorableText`), cut to `MAX_LAST_ERROR_CHARACTERS` between two characters, its
 * last one an ellipsis when cut.
 */
export function boundLastError(text: string): string {
  const storable = toStorableText(text);
  // Fewer code units than the limit means fewer characters: nothing to count.
  if (storable.length <= MAX_LAST_ERROR_CHARACTERS) return storable;
  let end = 0;
  let kept = 0;
  for (let count = 0; count < MAX_LAST_ERROR_CHARACTERS && end < storable.length; count += 1) {
    if (count === MAX_LAST_ERROR_CHARACTERS - 1) kept = end;
    end += storable.codePointAt(end)! > 0xffff ? 2 : 1;
  }
  return end >= storable.length ? storable : `${storable.slice(0, kept)}…`;
}
