import { describe, expect, it } from 'vitest';
import { WakeSignal } from './wake-signal.js';

describe('WakeSignal', () => {
  it('keeps a wake that arrives while nobody waits', async () => {
    const signal = new WakeSignal();
    signal.wake();
    await expect(signal.wait(60_000)).resolves.toBe(true);
  });

  it('ends a wait in progress when woken', async () => {
    const signal = new WakeSignal();
    const waiting = signal.wait(60_000);
    signal.wake();
    await expect(waiting).resolves.toBe(true);
  });

  it('times out without a wake and consumes a kept wake only once', async () => {
    const signal = new WakeSignal();
    signal.wake();
    await signal.wait(60_000);
    await expect(signal.wait(1)).resolves.toBe(false);
  });

  it('cancel ends the wait as a timeout', async () => {
    const signal = new WakeSignal();
    const waiting = signal.wait(60_000);
    signal.cancel();
    await expect(waiting).resolves.toBe(false);
  });
});
