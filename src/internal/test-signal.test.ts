import { describe, expect, it } from 'vitest';
import { ManualClock } from './manual-clock.fixture.js';
import { TestSignal, untilSignalled } from './test-signal.js';

describe('TestSignal', () => {
  it('keeps nothing until a test turns it on', async () => {
    const signal = new TestSignal<number>();
    signal.emit(1);
    expect(signal.pending).toEqual([]);
    signal.turnOn();
    signal.emit(2);
    await expect(signal.next()).resolves.toBe(2);
  });

  it('hands out emissions oldest first, each once, including those before the wait began', async () => {
    const signal = new TestSignal<string>().turnOn();
    signal.emit('a');
    signal.emit('b');
    expect(await signal.next()).toBe('a');
    expect(await signal.next()).toBe('b');
    const third = signal.next();
    signal.emit('c');
    expect(await third).toBe('c');
  });

  it('skips to the first emission that matches, taking the ones before it', async () => {
    const signal = new TestSignal<number>().turnOn();
    signal.emit(1);
    signal.emit(0);
    signal.emit(2);
    expect(await signal.next({ matches: (rows) => rows === 0 })).toBe(0);
    expect(signal.pending).toEqual([2]);
    const empty = signal.next({ matches: (rows) => rows === 0 });
    signal.emit(3);
    signal.emit(0);
    expect(await empty).toBe(0);
    expect(signal.pending).toEqual([]);
  });

  it('after clear waits for an emission still to come, and fails naming what it waited for', async () => {
    const signal = new TestSignal().turnOn();
    signal.emit();
    signal.clear();
    await expect(signal.next({ what: 'a renewal round', timeoutMs: 10 })).rejects.toThrow('waited 10 ms for a renewal round');
  });

  it('untilSignalled checks at once, then after emissions, once their promise callbacks ran', async () => {
    const signal = new TestSignal<number>();
    let count = 0;
    await untilSignalled([signal], () => count === 0, 'nothing');
    const reached = untilSignalled([signal], () => count === 2, 'two');
    count = 1;
    signal.emit(1);
    // The state changes a few promise callbacks after the emission, as a freed worker slot does.
    signal.emit(2);
    void Promise.resolve().then(() => Promise.resolve()).then(() => (count = 2));
    await reached;
    await expect(untilSignalled([signal], () => count === 3, 'three', 10)).rejects.toThrow('waited 10 ms for three');
  });
});

describe('ManualClock', () => {
  it('runs ahead of the host by what the test advanced, firing timers in time order, including ones a callback sets', () => {
    const clock = new ManualClock();
    const fired: string[] = [];
    clock.setTimer(500, () => {
      fired.push('a');
      clock.setTimer(500, () => fired.push('b'));
    });
    const cancel = clock.setTimer(700, () => fired.push('cancelled'));
    cancel();
    const before = Date.now();
    clock.advance(900);
    expect(fired).toEqual(['a']);
    expect(clock.now().getTime()).toBeGreaterThanOrEqual(before + 900);
    // b was set when a fired, at 900 ms ahead: it falls due 500 ms later.
    clock.advance(400);
    expect(fired).toEqual(['a']);
    clock.advance(100);
    expect(fired).toEqual(['a', 'b']);
    expect(clock.timersSet).toBe(0);
  });
});
