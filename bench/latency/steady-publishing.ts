import { setTimeout as sleep } from 'node:timers/promises';

/** What every latency message carries: its place in the run and when it was published. */
export interface LatencyPayload {
  readonly index: number;
  /** Wall-clock milliseconds from `wallClockMs()` just before the publish began. */
  readonly publishedAt: number;
}

/**
 * Milliseconds on a clock that processes on one machine share, with the sub-millisecond
 * resolution of `performance.now()` (`Date.now()` has whole milliseconds only).
 */
export function wallClockMs(): number {
  return performance.timeOrigin + performance.now();
}

/**
 * Publishes `messages` messages one at a time, the next one due `intervalMs` after the previous
 * one was due: a slow publish delays the next one but does not shift the schedule. Each publish is
 * awaited, so at most one is in flight. Stops early when `signal` aborts.
 */
export async function publishAtSteadyRate(
  publish: (payload: LatencyPayload) => Promise<unknown>,
  options: { messages: number; intervalMs: number; signal: AbortSignal },
): Promise<void> {
  const startedAt = performance.now();
  for (let index = 0; index < options.messages && !options.signal.aborted; index += 1) {
    const untilDue = startedAt + index * options.intervalMs - performance.now();
    if (untilDue > 0) await sleep(untilDue);
    await publish({ index, publishedAt: wallClockMs() });
  }
}
