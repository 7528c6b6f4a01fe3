import type { Driver } from '../driver/driver.js';
import { ClosedError } from '../errors.js';

/**
 * How long `stop()` waits for the pool to close after every connection it lent was destroyed;
 * a closing pool only ends idle sessions, which takes milliseconds.
 */
export const POOL_CLOSE_TIMEOUT_MS = 5_000;

/**
 * Cancels what still runs on the broker's connections (a relay's statement, a publish, a handler
 * that outlived the stop timeout), then closes the pool within POOL_CLOSE_TIMEOUT_MS: a pool
 * that does not close in time is reported and left behind rather than holding `stop()` forever.
 */
export async function closeBrokerPool(driver: Driver, onError: (error: unknown, detail: Record<string, unknown>) => void): Promise<void> {
  await driver.cancelRunning().catch((error: unknown) => onError(error, { phase: 'stop' }));
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<'timed out'>((resolve) => {
    timer = setTimeout(() => resolve('timed out'), POOL_CLOSE_TIMEOUT_MS);
  });
  try {
    const closed = await Promise.race([driver.close().then(() => 'closed' as const), timedOut]);
    if (closed === 'timed out') {
      const message = `the pool of ${driver.description} did not close within ${POOL_CLOSE_TIMEOUT_MS} ms; stop() went on without it`;
      onError(new ClosedError(message), { phase: 'close' });
    }
  } catch (error) {
    onError(error, { phase: 'close' });
  } finally {
    clearTimeout(timer);
  }
}
