import { isStorableText } from '../delivery/codec.js';
import { DeclarationError } from '../errors.js';
import { MAX_QUEUE_NAME_CHARACTERS } from '../table/storable-values.js';

/**
 * A queue name is stored in the group column and compared with it on every claim, so it must be
 * text every database keeps unchanged: not empty, no NUL (PostgreSQL refuses it, so every claim
 * would fail), no unpaired surrogate (stored as U+FFFD, so rows would carry another name), and
 * short enough for the column (`MAX_QUEUE_NAME_CHARACTERS`). `what` says which name, for the message.
 */
export function validateQueueName(name: unknown, what: string): string {
  if (typeof name !== 'string' || name.length === 0) {
    throw new DeclarationError(`${what} must be a non-empty string, got ${typeof name === 'string' ? 'an empty one' : String(name)}`);
  }
  if (!isStorableText(name)) {
    throw new DeclarationError(
      `${what} ${JSON.stringify(name)} contains a NUL character or an unpaired surrogate, which the group column cannot store unchanged; use another name`,
    );
  }
  // Characters, not UTF-16 units: an emoji is one character of a VARCHAR and two units here.
  if (name.length > MAX_QUEUE_NAME_CHARACTERS && [...name].length > MAX_QUEUE_NAME_CHARACTERS) {
    throw new DeclarationError(
      `${what} is ${[...name].length} characters long; the group column holds at most ${MAX_QUEUE_NAME_CHARACTERS}, use a shorter name`,
    );
  }
  return name;
}
