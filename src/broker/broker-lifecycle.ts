import { ClosedError } from '../errors.js';

/** A broker's states: new → starting → running → stopping → stopped. */
export type BrokerState = 'new' | 'starting' | 'running' | 'stopping' | 'stopped';

/**
 * What a call that needs a running broker throws in any other state: before start it says to
 * await `start()`, after stop that the broker is stopped.
 */
export function notRunningError(state: BrokerState, what: string): ClosedError {
  return new ClosedError(
    state === 'new' || state === 'starting' ? `${what}: the broker is not started; await broker.start() first` : `${what}: the broker is stopped`,
  );
}
