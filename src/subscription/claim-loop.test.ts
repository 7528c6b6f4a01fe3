import { describe, expect, it } from 'vitest';
import type { HeldRow } from '../claim/claim-form.js';
import type { PoolStats } from '../driver/driver.js';
import { createDeferred, type Deferred } from '../internal/deferred.js';
import { ClaimLoop, ClaimLoopSignals, FAILED_CLAIM_BACKOFF_MS, MAX_CONTENTION_RETRIES, type PauseGate, type RateGate } from './claim-loop.js';
import { PoolBudget } from './pool-budget.js';
import { WorkerSlots } from './worker-slots.js';

function heldRow(id: string): HeldRow {
  return { id, idValue: id, attempt: 1, row: {}, settle: () => Promise.resolve(), handBack: () => Promise.resolve() };
}

/** A claim function the test answers by hand, one claim at a time. */
class ScriptedClaims {
  readonly pending: Deferred<HeldRow[]>[] = [];
  readonly #arrived: (() => void)[] = [];

  readonly claim = (): Promise<HeldRow[]> => {
    const answer = createDeferred<HeldRow[]>();
    this.pending.push(answer);
    this.#arrived.shift()?.();
    return answer.promise;
  };

  /** Resolves when claim number `count` (1-based) has started. */
  started(count: number): Promise<void> {
    if (this.pending.length >= count) return Promise.resolve();
    return new Promise((resolve) => {
      const check = () => (this.pending.length >= count ? resolve() : this.#arrived.push(check));
      this.#arrived.push(check);
    });
  }
}

/** A pool of ten with every connection spare. */
function quietPool(): PoolStats {
  return { size: 10, held: 0, idle: 10, spare: 10, maxHeld: 0, reservedForRenewals: 0 };
}

/** How the test's deliveries run: by default they never finish, so the workers given rows stay busy. */
interface TestDeliveries {
  readonly run?: () => Promise<void>;
  /** After the loop heard that a worker finished. */
  readonly afterIdle?: () => void;
  readonly isSingleClaim?: boolean;
  readonly budget?: PoolBudget;
}

function createLoop(
  claims: ScriptedClaims,
  workers = 1,
  onClaimError: (error: unknown) => void = () => undefined,
  signals = new ClaimLoopSignals(),
  pause?: PauseGate,
  rate?: RateGate,
  deliveries: TestDeliveries = {},
): ClaimLoop {
  const dispatcher = new WorkerSlots({
    workers,
    run: deliveries.run ?? (() => new Promise(() => undefined)),
    onIdle: () => {
      loop.onWorkerIdle();
      deliveries.afterIdle?.();
    },
  });
  const loop: ClaimLoop = new ClaimLoop({
    dispatcher,
    holdsConnection: false,
    isSingleClaim: deliveries.isSingleClaim ?? false,
    rowsPerClaim: 1,
    prefetchRows: 0,
    isBatch: false,
    pollIntervalMs: 60_000,
    poolStats: quietPool,
    budget: deliveries.budget ?? new PoolBudget(quietPool),
    claim: claims.claim,
    onClaimError,
    contentionOf: (error) => {
      const message = (error as Error).message;
      return message === 'deadlock' ? 'conflict' : message === 'lock wait timeout' ? 'lock wait timeout' : undefined;
    },
    handBack: () => Promise.resolve(),
    signals,
    pause,
    rate,
  });
  return loop;
}

describe('ClaimLoop', () => {
  it('claims nothing while the queue is paused: it waits until the state is due to be read again, or a wake', async () => {
    const claims = new ScriptedClaims();
    const signals = new ClaimLoopSignals();
    let isPaused = true;
    const loop = createLoop(claims, 1, undefined, signals, { isPaused: () => isPaused, msUntilStale: () => 40_000 });
    signals.waiting.turnOn();
    signals.pausedNoClaim.turnOn();
    loop.start();
    await signals.pausedNoClaim.next({ what: 'the claim skipped for the pause' });
    expect(await signals.waiting.next({ what: 'the wait while paused' })).toBe(40_000);
    expect(claims.pending).toHaveLength(0);
    expect(loop.counters.claims).toBe(0);
    isPaused = false;
    loop.wake();
    await claims.started(1);
    expect(loop.counters.claims).toBe(1);
    claims.pending[0]!.resolve([]);
    await loop.stop();
  });

  it('after a claim the rate held back, sleeps until the next slot frees, through wakes, and counts no empty claim', async () => {
    const claims = new ScriptedClaims();
    const signals = new ClaimLoopSignals();
    const waits = [200];
    const loop = createLoop(claims, 1, undefined, signals, undefined, { takeWaitMs: () => waits.shift() });
    signals.waiting.turnOn();
    signals.rateLimited.turnOn();
    loop.start();
    await claims.started(1);
    claims.pending[0]!.resolve([]);
    expect(await signals.rateLimited.next({ what: 'the claim the rate held back' })).toBe(200);
    expect(await signals.waiting.next({ what: 'the wait for the next slot' })).toBe(200);
    // A publish's wake would end an empty wait; it does not end this one.
    loop.wake();
    await new Promise((resolve) => setImmediate(resolve));
    expect(claims.pending).toHaveLength(1);
    await claims.started(2);
    expect(loop.counters.emptyClaims).toBe(0);
    claims.pending[1]!.resolve([heldRow('a')]);
    await loop.stop();
  });

  it('ends the wait for the next slot when the rate limiter gives back slots, not after the window', async () => {
    const claims = new ScriptedClaims();
    const signals = new ClaimLoopSignals();
    const waits = [60_000];
    const loop = createLoop(claims, 1, undefined, signals, undefined, { takeWaitMs: () => waits.shift() });
    signals.waiting.turnOn();
    loop.start();
    await claims.started(1);
    claims.pending[0]!.resolve([]);
    expect(await signals.waiting.next({ what: 'the wait for the next slot' })).toBe(60_000);
    loop.rateSlotsGivenBack();
    await claims.started(2);
    claims.pending[1]!.resolve([heldRow('a')]);
    await loop.stop();
  });

  it('claims again at once when slots were given back while a claim the rate held back ran, not after the window', async () => {
    // Two claims side by side found no slot free while another claim of the subscription held the
    // last one reserved; it gave the slot back unused before the second came back.
    const claims = new ScriptedClaims();
    const signals = new ClaimLoopSignals();
    const waits = [60_000, 60_000];
    const loop = createLoop(claims, 3, undefined, signals, undefined, { takeWaitMs: () => waits.shift() });
    signals.rateLimited.turnOn();
    loop.start();
    await claims.started(1);
    claims.pending[0]!.resolve([heldRow('a')]);
    await claims.started(3);
    claims.pending[1]!.resolve([]);
    loop.rateSlotsGivenBack();
    claims.pending[2]!.resolve([]);
    expect(await signals.rateLimited.next({ what: 'the claim the rate held back' })).toBe(60_000);
    await claims.started(4);
    claims.pending[3]!.resolve([heldRow('b')]);
    await loop.stop();
  });

  it('keeps a wake that arrives while a claim runs: the next claim starts at once, not after 60 s', async () => {
    const claims = new ScriptedClaims();
    const loop = createLoop(claims);
    loop.start();
    await claims.started(1);
    loop.wake();
    claims.pending[0]!.resolve([]);
    await claims.started(2);
    expect(loop.counters.emptyClaims).toBe(1);
    claims.pending[1]!.resolve([]);
    await loop.stop();
  });

  it('claims again at once when a worker finished while a claim ran that came back empty, not after 60 s', async () => {
    // A FIFO group: the claim beside the head in work comes back empty, but the head's ack,
    // committed while it ran, has made the next head claimable.
    const claims = new ScriptedClaims();
    const delivery = createDeferred<void>();
    const idle = createDeferred<void>();
    const signals = new ClaimLoopSignals();
    const loop = createLoop(claims, 2, undefined, signals, undefined, undefined, {
      run: () => delivery.promise,
      afterIdle: () => idle.resolve(),
      isSingleClaim: true,
    });
    signals.waiting.turnOn();
    loop.start();
    await claims.started(1);
    claims.pending[0]!.resolve([heldRow('head')]);
    await claims.started(2);
    delivery.resolve();
    await idle.promise;
    claims.pending[1]!.resolve([]);
    await claims.started(3);
    expect(loop.counters.emptyClaims).toBe(1);
    // With no settlement during it, an empty claim waits as before.
    claims.pending[2]!.resolve([]);
    expect(await signals.waiting.next({ what: 'the wait after an empty claim' })).toBeGreaterThan(0);
    expect(claims.pending).toHaveLength(3);
    await loop.stop();
  });

  it('WP-1: chains a claim for a worker about to finish: its row waits for that worker, and an empty one leaves the loop waiting', async () => {
    const claims = new ScriptedClaims();
    const deliveries: Deferred<void>[] = [];
    const started = [createDeferred<void>(), createDeferred<void>()];
    const idle = [createDeferred<void>(), createDeferred<void>()];
    let idleCount = 0;
    const signals = new ClaimLoopSignals();
    const loop = createLoop(claims, 1, undefined, signals, undefined, undefined, {
      run: () => {
        const delivery = createDeferred<void>();
        deliveries.push(delivery);
        started[deliveries.length - 1]?.resolve();
        return delivery.promise;
      },
      afterIdle: () => idle[idleCount++]?.resolve(),
    });
    signals.waiting.turnOn();
    loop.start();
    await claims.started(1);
    claims.pending[0]!.resolve([heldRow('a')]);
    await started[0]!.promise;

    // The settlement of "a" runs a claim in its round trip; its row waits for the worker.
    const chained = loop.chainClaim()!;
    await chained.tookRows([heldRow('b')]);
    expect(loop.counters.claims).toBe(2);
    expect(loop.chainClaim()).toBeUndefined();
    deliveries[0]!.resolve();
    await idle[0]!.promise;
    await started[1]!.promise;
    expect(claims.pending).toHaveLength(1);

    // The settlement of "b" chains a claim that takes nothing: the queue is empty as of that
    // commit, so the worker going idle does not end the wait.
    const empty = loop.chainClaim()!;
    empty.tookNothing();
    expect(await signals.waiting.next({ what: 'the wait after the chained empty claim' })).toBeGreaterThan(0);
    deliveries[1]!.resolve();
    await idle[1]!.promise;
    await new Promise((resolve) => setImmediate(resolve));
    expect(claims.pending).toHaveLength(1);
    expect(loop.counters.emptyClaims).toBe(1);
    // Probing after the empty claim: no chain until a claim takes rows again (WP-6).
    expect(loop.chainClaim()).toBeUndefined();
    loop.wake();
    await claims.started(2);
    claims.pending[1]!.resolve([]);
    await loop.stop();
    expect(loop.chainClaim()).toBeUndefined();
  });

  it('WP-4: chains no claim while another subscription on the pool waits for a connection', async () => {
    const claims = new ScriptedClaims();
    const budget = new PoolBudget(quietPool);
    const loop = createLoop(claims, 2, undefined, undefined, undefined, undefined, { budget });
    loop.start();
    await claims.started(1);
    claims.pending[0]!.resolve([heldRow('a')]);
    await claims.started(2);
    claims.pending[1]!.resolve([heldRow('b')]);
    expect(loop.chainClaim()).toBeDefined();
    // A subscription on the same pool that finds the budget used up waits in line.
    const waiting = { connectionsHeld: 0, pump: () => undefined };
    budget.join(waiting);
    while (budget.mayTake(waiting)) waiting.connectionsHeld += 1;
    expect(loop.chainClaim()).toBeUndefined();
    await loop.stop();
  });

  it('WP-7: chains no claim on a table that claims one at a time', async () => {
    const claims = new ScriptedClaims();
    const loop = createLoop(claims, 2, undefined, undefined, undefined, undefined, { isSingleClaim: true });
    loop.start();
    await claims.started(1);
    claims.pending[0]!.resolve([heldRow('a')]);
    await claims.started(2);
    expect(loop.chainClaim()).toBeUndefined();
    claims.pending[1]!.resolve([]);
    await loop.stop();
  });

  it('retries a claim that met a deadlock at once, counts it, and reports nothing', async () => {
    const claims = new ScriptedClaims();
    const reported: unknown[] = [];
    const signals = new ClaimLoopSignals();
    const loop = createLoop(claims, 1, (error) => reported.push(error), signals);
    loop.start();
    await claims.started(1);
    claims.pending[0]!.reject(new Error('deadlock'));
    // The retry starts at once, not after FAILED_CLAIM_BACKOFF_MS.
    await claims.started(2);
    expect(loop.counters.deadlocksRetried).toBe(1);
    expect(loop.counters.failedClaims).toBe(0);
    expect(reported).toEqual([]);
    claims.pending[1]!.reject(new Error('not contention'));
    expect(await signals.claimFailed.next()).toMatchObject({ message: 'not contention' });
    expect(await signals.waiting.next()).toBe(FAILED_CLAIM_BACKOFF_MS);
    expect(reported).toHaveLength(1);
    expect(loop.counters.failedClaims).toBe(1);
    await loop.stop();
  });

  it('gives each claim its own contention retries, and reports the claim that runs out of them on lock wait timeouts', async () => {
    const claims = new ScriptedClaims();
    const reported: unknown[] = [];
    const signals = new ClaimLoopSignals();
    const loop = createLoop(claims, 1, (error) => reported.push(error), signals);
    loop.start();
    for (let attempt = 1; attempt <= MAX_CONTENTION_RETRIES + 1; attempt += 1) {
      await claims.started(attempt);
      claims.pending[attempt - 1]!.reject(new Error('lock wait timeout'));
    }
    await signals.claimFailed.next();
    expect(reported).toHaveLength(1);
    expect(loop.counters.deadlocksRetried).toBe(MAX_CONTENTION_RETRIES);
    expect(loop.counters.failedClaims).toBe(1);
    await loop.stop();
  });

  it('a claim whose retries all met conflicts gives way unreported, and the next one starts on a wake', async () => {
    const claims = new ScriptedClaims();
    const reported: unknown[] = [];
    const signals = new ClaimLoopSignals();
    const loop = createLoop(claims, 1, (error) => reported.push(error), signals);
    signals.waiting.turnOn();
    loop.start();
    for (let attempt = 1; attempt <= MAX_CONTENTION_RETRIES + 1; attempt += 1) {
      await claims.started(attempt);
      claims.pending[attempt - 1]!.reject(new Error('deadlock'));
    }
    expect(await signals.claimGaveWay.next()).toMatchObject({ message: 'deadlock' });
    // The wait after an empty claim, which a wake ends; not the failed claim's backoff.
    expect(await signals.waiting.next()).toBe(60_000);
    expect(reported).toEqual([]);
    expect(loop.counters).toMatchObject({ deadlocksRetried: MAX_CONTENTION_RETRIES, claimsGaveWay: 1, failedClaims: 0 });
    loop.wake();
    await claims.started(MAX_CONTENTION_RETRIES + 2);
    claims.pending[MAX_CONTENTION_RETRIES + 1]!.resolve([]);
    await loop.stop();
  });

  it('prefetch: one claim at a time asks for what the workers and the buffer lack', async () => {
    const claims = new ScriptedClaims();
    const limits: number[] = [];
    const signals = new ClaimLoopSignals();
    const dispatcher = new WorkerSlots({ workers: 2, run: () => new Promise(() => undefined), onIdle: () => loop.onWorkerIdle() });
    const loop: ClaimLoop = new ClaimLoop({
      dispatcher,
      holdsConnection: false,
      isSingleClaim: false,
      rowsPerClaim: 1,
      prefetchRows: 3,
      isBatch: false,
      pollIntervalMs: 60_000,
      poolStats: quietPool,
      budget: new PoolBudget(quietPool),
      claim: (limit) => {
        limits.push(limit);
        return claims.claim();
      },
      onClaimError: () => undefined,
      contentionOf: () => undefined,
      handBack: () => Promise.resolve(),
      signals,
    });
    loop.start();
    await claims.started(1);
    claims.pending[0]!.resolve([heldRow('1'), heldRow('2')]);
    // Two rows went to the two workers; the buffer of three is still empty.
    await claims.started(2);
    claims.pending[1]!.resolve([heldRow('3'), heldRow('4'), heldRow('5')]);
    expect(await signals.claimTookRows.next({ matches: (rows) => rows === 3 })).toBe(3);
    expect(dispatcher.waiting).toBe(3);
    expect(limits).toEqual([5, 3]);
    expect(claims.pending).toHaveLength(2);
    await loop.stop();
  });

  it('WP-2: counts the connections the form reports for units in work, one per row of an advisory batch', async () => {
    const claims = new ScriptedClaims();
    let rowsHoldingConnections = 3;
    const poolOfFour = (): PoolStats => ({
      size: 4,
      held: rowsHoldingConnections,
      idle: 0,
      spare: 4 - rowsHoldingConnections,
      maxHeld: 3,
      reservedForRenewals: 0,
    });
    const dispatcher = new WorkerSlots({ workers: 2, run: () => new Promise(() => undefined), onIdle: () => loop.onWorkerIdle() });
    const loop: ClaimLoop = new ClaimLoop({
      dispatcher,
      holdsConnection: true,
      connectionsInWork: () => rowsHoldingConnections,
      isSingleClaim: false,
      rowsPerClaim: 8,
      prefetchRows: 0,
      isBatch: true,
      pollIntervalMs: 60_000,
      poolStats: poolOfFour,
      budget: new PoolBudget(poolOfFour),
      claim: claims.claim,
      onClaimError: () => undefined,
      contentionOf: () => undefined,
      handBack: () => Promise.resolve(),
    });
    loop.start();
    // Budget 3 of 4, all held by the rows of one batch: no claim, though no unit is in work.
    expect(loop.connectionsHeld).toBe(3);
    expect(claims.pending).toHaveLength(0);
    rowsHoldingConnections = 0;
    loop.onWorkerIdle();
    await claims.started(1);
    claims.pending[0]!.resolve([]);
    await loop.stop();
  });

  it('WP-6: after an empty claim only one claim runs until one takes rows again', async () => {
    const claims = new ScriptedClaims();
    const loop = createLoop(claims, 4);
    loop.start();
    await claims.started(1);
    expect(loop.claimsRunning).toBe(1);
    claims.pending[0]!.resolve([heldRow('a')]);
    // Rows again: the loop claims for the three idle workers in parallel.
    await claims.started(4);
    expect(loop.claimsRunning).toBe(3);
    for (const answer of claims.pending.slice(1)) answer.resolve([]);
    await loop.stop();
  });
});
