import { describe, expect, it } from 'vitest';
import { createDeferred } from '../internal/deferred.js';
import { PauseWatch } from './pause-watch.js';

/** A watch over a state the test sets, on a clock the test moves. */
function watchOf(options: { freshForMs?: number } = {}) {
  const state = { isPaused: false, reads: 0, failing: undefined as Error | undefined, now: 0 };
  const failures: unknown[] = [];
  const watch = new PauseWatch({
    read: () => {
      state.reads += 1;
      return state.failing === undefined ? Promise.resolve(state.isPaused) : Promise.reject(state.failing);
    },
    freshForMs: options.freshForMs ?? 1_000,
    onReadFailed: (error) => failures.push(error),
    now: () => state.now,
  });
  return { watch, state, failures };
}

describe('PauseWatch', () => {
  it('reads once per interval and answers from the last read in between', async () => {
    const { watch, state } = watchOf();
    expect(await watch.isPaused()).toBe(false);
    state.isPaused = true;
    state.now = 999;
    expect(watch.isPaused()).toBe(false);
    expect(watch.msUntilStale()).toBe(1);
    state.now = 1_000;
    expect(await watch.isPaused()).toBe(true);
    expect(watch.isPausedNow).toBe(true);
    expect(state.reads).toBe(2);
  });

  it('reads again after a refresh, and a refresh that overtakes a read leaves the state stale', async () => {
    const { watch, state } = watchOf();
    await watch.isPaused();
    state.isPaused = true;
    watch.refresh();
    expect(watch.msUntilStale()).toBe(0);
    expect(await watch.isPaused()).toBe(true);

    const gate = createDeferred<boolean>();
    const slow = new PauseWatch({ read: () => gate.promise, freshForMs: 1_000, onReadFailed: () => undefined, now: () => 0 });
    const reading = slow.isPaused();
    slow.refresh();
    gate.resolve(true);
    expect(await reading).toBe(true);
    expect(slow.msUntilStale()).toBe(0);
  });

  it("takes the broker's read for every queue as its own, unless a refresh arrived after that read began", async () => {
    const { watch, state } = watchOf();
    state.now = 100;
    watch.observe(true, 100);
    state.now = 1_099;
    expect(watch.isPaused()).toBe(true);
    expect(watch.msUntilStale()).toBe(1);
    expect(state.reads).toBe(0);

    watch.refresh();
    watch.observe(false, 1_050);
    expect(watch.msUntilStale()).toBe(0);
    expect(watch.isPausedNow).toBe(true);
    watch.observe(false, 1_100);
    expect(watch.isPaused()).toBe(false);
    expect(state.reads).toBe(0);
  });

  it('tells its read when the last refresh arrived, so a read shared with other queues can be one that began later', async () => {
    const asked: number[] = [];
    let now = 10;
    const watch = new PauseWatch({
      read: (refreshedAt) => {
        asked.push(refreshedAt);
        return Promise.resolve(false);
      },
      freshForMs: 1_000,
      onReadFailed: () => undefined,
      now: () => now,
    });
    await watch.isPaused();
    now = 20;
    watch.refresh();
    await watch.isPaused();
    expect(asked).toEqual([Number.NEGATIVE_INFINITY, 20]);
  });

  it('shares one read between the claims that ask at once', async () => {
    const { watch, state } = watchOf();
    const answers = await Promise.all([watch.isPaused(), watch.isPaused(), watch.isPaused()]);
    expect(answers).toEqual([false, false, false]);
    expect(state.reads).toBe(1);
  });

  it('counts a failed read as running and reports it once until a read succeeds', async () => {
    const { watch, state, failures } = watchOf();
    state.isPaused = true;
    state.failing = new Error('no such table: tablequeue_queue_controls');
    expect(await watch.isPaused()).toBe(false);
    state.now = 1_000;
    expect(await watch.isPaused()).toBe(false);
    expect(failures).toEqual([state.failing]);
    state.failing = undefined;
    state.now = 2_000;
    expect(await watch.isPaused()).toBe(true);
    state.failing = new Error('gone again');
    state.now = 3_000;
    expect(await watch.isPaused()).toBe(false);
    expect(failures).toHaveLength(2);
  });
});
