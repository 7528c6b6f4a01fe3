/**
 * Where lease times come from: the host's clock, or in a test one that moves only when the test
 * moves it, so a test of leases that outlive their handlers advances time instead of sleeping.
 */
export interface Clock {
  now(): Date;
  /** Calls `callback` once `ms` have passed on this clock, without keeping the process alive; the result cancels it. */
  setTimer(ms: number, callback: () => void): () => void;
}

export const systemClock: Clock = {
  now: () => new Date(),
  setTimer(ms, callback) {
    const timer = setTimeout(callback, ms);
    timer.unref();
    return () => clearTimeout(timer);
  },
};
