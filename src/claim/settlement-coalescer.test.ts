import { describe, expect, it } from 'vitest';
import { createDeferred } from '../internal/deferred.js';
import { SettlementCoalescer } from './settlement-coalescer.js';

/** A coalescer whose flushes are recorded, and awaited through `flushed`. */
function recordingCoalescer(options: { windowMs: number; maxSize: number }) {
  const flushes: { key: string; items: number[] }[] = [];
  let waiter: { count: number; resolve: () => void } | undefined;
  const coalescer = new SettlementCoalescer<number>({
    ...options,
    flush: async (key, items) => {
      flushes.push({ key, items });
      if (waiter !== undefined && flushes.length >= waiter.count) waiter.resolve();
    },
  });
  const flushed = (count: number) => {
    if (flushes.length >= count) return Promise.resolve();
    const done = createDeferred();
    waiter = { count, resolve: () => done.resolve() };
    return done.promise;
  };
  return { coalescer, flushes, flushed };
}

describe('SettlementCoalescer', () => {
  it('gathers the items of one kind that arrive within the window into one flush', async () => {
    const { coalescer, flushes, flushed } = recordingCoalescer({ windowMs: 50, maxSize: 100 });
    coalescer.add('finish', 1);
    await new Promise((resolve) => setImmediate(resolve));
    coalescer.add('finish', 2);
    coalescer.add('release', 3);
    expect(flushes).toEqual([]);
    expect(coalescer.pendingCount).toBe(3);
    await flushed(2);
    expect(flushes).toEqual([
      { key: 'finish', items: [1, 2] },
      { key: 'release', items: [3] },
    ]);
    expect(coalescer.pendingCount).toBe(0);
  });

  it('opens a new window for items that arrive after one flushed', async () => {
    const { coalescer, flushes, flushed } = recordingCoalescer({ windowMs: 1, maxSize: 100 });
    coalescer.add('finish', 1);
    await flushed(1);
    coalescer.add('finish', 2);
    await flushed(2);
    expect(flushes.map((flush) => flush.items)).toEqual([[1], [2]]);
  });

  it('flushes a full window at once, without waiting for its timer', () => {
    const { coalescer, flushes } = recordingCoalescer({ windowMs: 60_000, maxSize: 3 });
    coalescer.add('finish', 1);
    coalescer.add('finish', 2);
    expect(flushes).toEqual([]);
    coalescer.add('finish', 3);
    expect(flushes).toEqual([{ key: 'finish', items: [1, 2, 3] }]);
    coalescer.add('finish', 4);
    expect(coalescer.pendingCount).toBe(1);
    return coalescer.flushNow();
  });

  it('with a window of 0 gathers what arrives in the same event-loop turn', async () => {
    const { coalescer, flushes, flushed } = recordingCoalescer({ windowMs: 0, maxSize: 100 });
    for (const item of [1, 2, 3]) coalescer.add('finish', item);
    await flushed(1);
    expect(flushes).toEqual([{ key: 'finish', items: [1, 2, 3] }]);
  });

  it('flushNow sends every open window and waits for the flushes in flight', async () => {
    const release = createDeferred();
    const finished: number[][] = [];
    const coalescer = new SettlementCoalescer<number>({
      windowMs: 60_000,
      maxSize: 100,
      flush: async (_key, items) => {
        await release.promise;
        finished.push(items);
      },
    });
    coalescer.add('finish', 1);
    coalescer.add('retryAfter', 2);
    const flushing = coalescer.flushNow();
    expect(coalescer.pendingCount).toBe(0);
    expect(coalescer.flushingCount).toBe(2);
    release.resolve();
    await flushing;
    expect(finished).toEqual([[1], [2]]);
    expect(coalescer.flushingCount).toBe(0);
  });

  it('after a stop no item waits a whole window again', async () => {
    const { coalescer, flushes, flushed } = recordingCoalescer({ windowMs: 60_000, maxSize: 100 });
    await coalescer.flushNow({ thenImmediately: true });
    coalescer.add('finish', 1);
    coalescer.add('finish', 2);
    await flushed(1);
    expect(flushes).toEqual([{ key: 'finish', items: [1, 2] }]);
  });

  it('keeps going after a flush that rejects', async () => {
    let calls = 0;
    const coalescer = new SettlementCoalescer<number>({
      windowMs: 0,
      maxSize: 1,
      flush: async () => {
        calls += 1;
        throw new Error('answered nothing');
      },
    });
    coalescer.add('finish', 1);
    coalescer.add('finish', 2);
    await coalescer.flushNow();
    expect(calls).toBe(2);
  });

  it('refuses a negative window and an empty size', () => {
    const flush = async () => undefined;
    expect(() => new SettlementCoalescer({ windowMs: -1, maxSize: 1, flush })).toThrow(TypeError);
    expect(() => new SettlementCoalescer({ windowMs: 1, maxSize: 0, flush })).toThrow(TypeError);
  });
});
