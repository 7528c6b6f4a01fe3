import { setImmediate as immediate } from 'node:timers/promises';

/**
 * Resolves after the event loop has turned once: timers, I/O callbacks and signal handlers that
 * were due have run. A chain of promises never lets them run on its own, and with a synchronous
 * driver (better-sqlite3) a whole drain is such a chain.
 */
export function nextEventLoopTurn(): Promise<void> {
  return immediate();
}
