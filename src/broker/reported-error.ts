import { DecodeError, DestinationError, HandlerError, InternalError, QueueError } from '../errors.js';

/**
 * The error the broker's `error` event carries: tablequeue's own errors as they are, anything
 * else wrapped by where it came from, with the original as `cause` and its message kept. A
 * handler's throw is a `HandlerError`; a decoder's a `DecodeError`; an outbox destination's a
 * `DestinationError`; anything else an `InternalError`.
 */
export function reportedError(error: unknown, detail: Readonly<Record<string, unknown>>): QueueError {
  if (error instanceof QueueError) return error;
  const { phase, subscription, messageId, destination } = detail;
  if (phase === 'handler' && typeof subscription === 'string') {
    return new HandlerError({ subscription, messageIds: typeof messageId === 'string' ? messageId.split(',') : [], cause: error });
  }
  if (phase === 'decode') return new DecodeError(error instanceof Error ? error.message : String(error), { cause: error });
  if (typeof destination === 'string') {
    return new DestinationError({ destination, message: error instanceof Error ? error.message : String(error), cause: error });
  }
  return new InternalError(error);
}
