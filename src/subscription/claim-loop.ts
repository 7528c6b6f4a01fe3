import type { ChainedClaim, HeldRow } from '../claim/claim-form.js';
import type { Contention } from '../claim/contention.js';
import type { PoolStats } from '../driver/driver.js';
import { abortableSleep } from '../internal/abortable-sleep.js';
import { backoffDelayMs, type Backoff } from '../internal/backoff.js';
import { nextEventLoopTurn } from '../internal/event-loop-turn.js';
import { TestSignal } from '../internal/test-signal.js';
import { WakeSignal } from '../internal/wake-signal.js';
import type { DeliveryUnit, Dispatcher } from './dispatcher.js';
import type { BudgetMember, PoolBudget } from './pool-budget.js';

type ClaimResult = 'took rows' | 'empty' | 'gave way' | 'failed' | 'paused' | 'rate limited';

/** Times one claim is retried after contention before it gives way or its failure is reported. */
export const MAX_CONTENTION_RETRIES = 5;

/**
 * The first retry after contention runs at once; each later one waits a random time up to this
 * window, doubled per retry (up to 2, 4, 8, 16 ms), so claims that met on the same rows do not
 * meet again at once.
 */
export const CONTENTION_RETRY_WINDOW: Backoff = { initialMs: 2, maxMs: 16 };

/** After a claim statement fails, the next claim waits this long (not the poll interval). */
export const FAILED_CLAIM_BACKOFF_MS = 1_000;

/**
 * After claims took rows, the first empty wait is this fraction of the poll interval, doubling
 * at each empty claim until it reaches the interval: rows that other processes publish while a
 * queue is busy are found in a sixteenth of the interval (62 ms at the default 1 s), and an idle
 * queue is back to one claim per interval after four short waits.
 */
export const QUICK_POLL_DIVISOR = 16;
const QUICK_POLL_FLOOR_MS = 5;

/** Whether an operator paused the queue (subscription/pause-watch.ts): asked before every claim. */
export interface PauseGate {
  /** From the last read while it is fresh, else read again. Never rejects. */
  isPaused(): boolean | Promise<boolean>;
  /** How long the last read stays fresh: a paused loop waits this long, unless woken. */
  msUntilStale(): number;
}

export interface ClaimLoopOptions {
  readonly dispatcher: Dispatcher;
  /** Whether each unit in work (or waiting for its worker) holds a pool connection (WP-5). */
  readonly holdsConnection: boolean;
  /**
   * The connections the units in work and waiting hold, for a form whose unit may hold more than
   * one (an advisory batch holds one per row). Without it: one per unit when `holdsConnection`.
   */
  readonly connectionsInWork?: () => number;
  /** Only one claim in flight at a time (WP-7). */
  readonly isSingleClaim: boolean;
  /** Rows one claim asks for. */
  readonly rowsPerClaim: number;
  /**
   * FIFO groups (WP-11): while a row of the queue's group is in work here, no other row of it can
   * be claimed anywhere, so the loop claims only while none is in work or waiting, and again when
   * it finishes. Claims beside it could only come back empty: on PostgreSQL they were one claim
   * transaction of four statements per message for nothing.
   */
  readonly isOneInWork?: boolean;
  /**
   * Rows to keep claimed ahead of the workers (lease form, opt-in). Above 0, one claim runs at a
   * time and asks for what the idle workers and this buffer lack, instead of `rowsPerClaim`.
   */
  readonly prefetchRows: number;
  /** Whether the rows of one claim make one unit (a batch) or one unit each. */
  readonly isBatch: boolean;
  readonly pollIntervalMs: number;
  readonly poolStats: () => PoolStats;
  /** The connections that every subscription on the pool shares (WP-2, WP-4). */
  readonly budget: PoolBudget;
  readonly claim: (limit: number) => Promise<HeldRow[]>;
  readonly onClaimError: (error: unknown) => void;
  /**
   * The contention a failed claim met, if that is all it met (claim/contention.ts): it took
   * nothing and lost nothing, so it is retried and counted instead of reported. A claim whose
   * retries all met a `conflict` gives way unreported, since other claims committed: on a Galera
   * cluster with brokers writing through several nodes that is how claims of one queue meet. One
   * whose retries ran out on a `lock wait timeout` is reported.
   */
  readonly contentionOf: (error: unknown) => Contention | undefined;
  /** Rows claimed after stop began, and rows still waiting at stop, go back through this. */
  readonly handBack: (row: HeldRow) => Promise<void>;
  /** Signals a test turns on; the loop makes dormant ones without. */
  readonly signals?: ClaimLoopSignals;
  /** Without it the queue is never paused. */
  readonly pause?: PauseGate;
  /** Without it no claim is held back by a rate. */
  readonly rate?: RateGate;
}

/** A subscription's rate limit (subscription/rate-limit.ts), as the loop sees it. */
export interface RateGate {
  /**
   * A rate per key, after a claim that took nothing: the longest the empty wait may be, since a
   * key held back may have room again then; undefined when no key is held back.
   */
  takeEmptyWaitCapMs?(): number | undefined;
  /**
   * After a claim that took nothing: milliseconds until the rate lets a claim take a row again,
   * when the rate is what held it back; undefined when the queue was simply empty.
   */
  takeWaitMs(): number | undefined;
}

/** What the loop tells a test that turned a signal on (internal/test-signal.ts); nothing otherwise. */
export class ClaimLoopSignals {
  /** A claim's statement is about to run (again after contention, too). */
  readonly claimStarted = new TestSignal();
  /** A claim took rows, this many, and offered them to the workers. */
  readonly claimTookRows = new TestSignal<number>();
  readonly claimCameBackEmpty = new TestSignal();
  readonly claimFailed = new TestSignal<unknown>();
  /** A claim's retries all met conflicts, and it gave way to the claims that committed (the last conflict). */
  readonly claimGaveWay = new TestSignal<unknown>();
  /** The queue was paused, so no claim ran. */
  readonly pausedNoClaim = new TestSignal();
  /** A claim took nothing because the rate limit had no slot free; the loop waits this many ms. */
  readonly rateLimited = new TestSignal<number>();
  /** After an empty or failed claim the loop waits this many milliseconds, unless woken. */
  readonly waiting = new TestSignal<number>();
  /** Stop handed back the rows that waited for a worker, this many. */
  readonly handedBackAtStop = new TestSignal<number>();
}

export interface ClaimLoopCounters {
  claims: number;
  emptyClaims: number;
  failedClaims: number;
  /** Claims whose retries all met conflicts: they took nothing, unreported. */
  claimsGaveWay: number;
  deadlocksRetried: number;
  maxConnectionsHeld: number;
  maxClaimsRunning: number;
}

/**
 * Decides when to claim. One claim in flight per idle worker (WP-1), never more connections
 * than the pool's size minus one together with every other subscription on the pool (WP-2, WP-4), a parallel claim only with two spare connections (WP-3),
 * one claim at a time after an empty claim until one takes rows again (WP-6), and one claim at a
 * time on single-claim tables (WP-7). Units the dispatcher cannot start yet wait there (WP-9).
 *
 * States: running (claims start as workers free up), waiting (after an empty or failed claim,
 * until the poll interval passes or a wake arrives), stopping (no new claims; rows that arrive
 * go back to the queue).
 */
export class ClaimLoop {
  readonly counters: ClaimLoopCounters = {
    claims: 0,
    emptyClaims: 0,
    failedClaims: 0,
    claimsGaveWay: 0,
    deadlocksRetried: 0,
    maxConnectionsHeld: 0,
    maxClaimsRunning: 0,
  };
  readonly #options: ClaimLoopOptions;
  readonly #wake = new WakeSignal();
  /**
   * Slots the rate limiter gave back (row lock and advisory forms reserve them before a claim and
   * give back what it did not take): a claim held back meanwhile read them as used, so its wait
   * for the next free slot ends.
   */
  readonly #rateSlotsGivenBack = new WakeSignal();
  readonly #stop = new AbortController();
  readonly #claimsInFlight = new Set<Promise<unknown>>();
  /**
   * Claims whose statements are running. A claim stops counting the moment its rows are handed
   * on, so a row-lock connection is never counted twice (once as a claim, once as a delivery).
   */
  #claimsRunning = 0;
  #isProbing = true;
  #isWaiting = false;
  #isBackingOff = false;
  /**
   * A worker finished while a claim ran: that claim may have read the table before the
   * settlement committed (a key, a slot or a row lock still held), so if it comes back empty the
   * next claim runs at once instead of after the quick poll.
   */
  #settledDuringClaim = false;
  /** How long the last claim held back by the rate waits. */
  #rateWaitMs = 0;
  /** Empty waits since a claim last took rows, which shortens them; undefined before any took rows. */
  #emptyWaits: number | undefined;
  #isStopping = false;
  /**
   * Workers whose own settlement ran a chained claim that took nothing: that claim read the
   * table after the settlement committed, so the worker going idle does not end the empty wait.
   */
  #idleSeenByChainedClaim = 0;
  /** This loop as its pool's budget sees it. */
  readonly #member: BudgetMember;
  readonly #signals: ClaimLoopSignals;

  constructor(options: ClaimLoopOptions) {
    this.#options = options;
    this.#signals = options.signals ?? new ClaimLoopSignals();
    const connectionsHeld = () => this.connectionsHeld;
    this.#member = {
      get connectionsHeld() {
        return connectionsHeld();
      },
      pump: () => this.#pump(),
    };
  }

  get claimsRunning(): number {
    return this.#claimsRunning;
  }

  /** Connections this subscription holds now: claims running plus units that hold one. */
  get connectionsHeld(): number {
    const { dispatcher, holdsConnection, connectionsInWork } = this.#options;
    const units = holdsConnection ? dispatcher.inWork + dispatcher.waiting : 0;
    return this.#claimsRunning + (connectionsInWork?.() ?? units);
  }

  start(): void {
    this.#options.budget.join(this.#member);
    this.#pump();
  }

  /** After stop and the last delivery: what this loop held goes back to the pool's other subscriptions. */
  leaveBudget(): void {
    this.#options.budget.leave(this.#member);
  }

  /** A publish or a notification: the next wait returns at once, even if it has not begun. */
  wake(): void {
    this.#wake.wake();
  }

  /**
   * The rate limiter gave back slots a claim reserved and did not take. A claim held back by the
   * rate while they were reserved waited for the window to pass: a whole minute under a rate per
   * minute, with rows waiting and slots free.
   */
  rateSlotsGivenBack(): void {
    this.#rateSlotsGivenBack.wake();
  }

  /**
   * A worker finished its unit: claim for it. A settlement can make rows claimable (the next head
   * of a FIFO group, a row behind a released lock), so it also ends an empty wait early, and a
   * claim running meanwhile that comes back empty is followed by another at once. Measured on a
   * FIFO group of PostgreSQL, before such a loop stopped claiming beside its row in work
   * (`isOneInWork`): waiting out the quick poll after such a claim held the drain to 155 msg/s.
   */
  onWorkerIdle(): void {
    if (this.#idleSeenByChainedClaim > 0) this.#idleSeenByChainedClaim -= 1;
    else if (this.#isWaiting && !this.#isBackingOff) this.#wake.wake();
    else if (this.#claimsRunning > 0) this.#settledDuringClaim = true;
    this.#options.budget.released();
    this.#pump();
  }

  /**
   * Stops claiming, waits for claims in flight, and hands back every row that waits for a
   * worker. Units in work go on; the dispatcher's `drain()` waits for them.
   */
  async stop(): Promise<void> {
    this.#isStopping = true;
    this.#stop.abort();
    this.#wake.cancel();
    this.#rateSlotsGivenBack.cancel();
    while (this.#claimsInFlight.size > 0) await Promise.allSettled([...this.#claimsInFlight]);
    const waiting = this.#options.dispatcher.takeWaiting().flat();
    await Promise.allSettled(waiting.map((row) => this.#options.handBack(row)));
    this.#signals.handedBackAtStop.emit(waiting.length);
  }

  /**
   * A claim for the worker whose delivery is about to commit its settlement, run on that
   * delivery's connection right after the COMMIT, in the same round trip: a message of the row
   * lock form is then one round trip, not two (its settlement and COMMIT, then BEGIN and claim).
   * Undefined when the loop would not start that claim now, or claims another way: while it
   * probes after an empty claim (WP-6), claims one at a time (WP-7), claims many rows at a time,
   * prefetches, keeps one row of a FIFO group in work, has a rate, is paused, waits or stops, or
   * when a unit already waits for a worker (WP-9), or another subscription on the pool waits for a
   * connection, which this one would otherwise keep (WP-4). The claim holds no connection of its
   * own: it runs on the one the delivery holds, so it is not counted as a claim running.
   */
  chainClaim(): ChainedClaim | undefined {
    const { dispatcher, isSingleClaim, prefetchRows, isBatch, rowsPerClaim, pause, rate, budget } = this.#options;
    const isPlain = !isSingleClaim && prefetchRows === 0 && !isBatch && rowsPerClaim === 1 && this.#options.isOneInWork !== true && rate === undefined;
    if (!isPlain || this.#isStopping || this.#isWaiting || this.#isProbing || dispatcher.waiting > 0) return undefined;
    if (budget.hasOthersWaiting(this.#member)) return undefined;
    if (pause !== undefined && pause.isPaused() !== false) return undefined;
    this.#signals.claimStarted.emit();
    return {
      tookRows: async (rows) => {
        this.counters.claims += 1;
        if (this.#isStopping) {
          await Promise.allSettled(rows.map((row) => this.#options.handBack(row)));
          return;
        }
        // Offered while the delivery that ran the claim is still in work: the unit waits for that
        // worker, which takes it as soon as its settlement returns.
        this.#tookRows(rows);
      },
      tookNothing: () => {
        this.counters.claims += 1;
        this.counters.emptyClaims += 1;
        this.#isProbing = true;
        this.#idleSeenByChainedClaim += 1;
        this.#signals.claimCameBackEmpty.emit();
        this.#waitIfNoClaimRuns('empty');
      },
      failed: (error) => {
        this.counters.claims += 1;
        this.#isProbing = true;
        if (this.#options.contentionOf(error) !== undefined) {
          this.counters.claimsGaveWay += 1;
          this.#signals.claimGaveWay.emit(error);
          return;
        }
        this.counters.failedClaims += 1;
        this.#options.onClaimError(error);
        this.#signals.claimFailed.emit(error);
        this.#waitIfNoClaimRuns('failed');
      },
      abandoned: () => undefined,
    };
  }

  /** After a chained claim, as after the last claim in flight: the wait, unless another claim runs and decides. */
  #waitIfNoClaimRuns(result: 'empty' | 'failed'): void {
    if (this.#claimsRunning === 0 && !this.#isWaiting && !this.#isStopping) void this.#waitThenPump(result);
  }

  #pump(): void {
    if (this.#isStopping || this.#isWaiting) {
      this.#options.budget.withdraw(this.#member);
      return;
    }
    while (this.#canStartClaim()) this.#startClaim();
  }

  /** Rows the workers and the prefetch buffer lack: what a prefetching claim asks for. */
  #rowsLacking(): number {
    const { dispatcher, prefetchRows } = this.#options;
    return dispatcher.capacity + prefetchRows - dispatcher.inWork - dispatcher.waiting;
  }

  /**
   * With prefetch, a claim waits until the buffer is half empty, so each claim takes many rows,
   * unless a worker is idle with nothing waiting for it.
   */
  #prefetchWanted(): number {
    const { dispatcher, prefetchRows } = this.#options;
    const lacking = this.#rowsLacking();
    const isWorkerStarving = dispatcher.waiting === 0 && dispatcher.inWork < dispatcher.capacity;
    return isWorkerStarving || lacking >= Math.ceil(prefetchRows / 2) ? lacking : 0;
  }

  #canStartClaim(): boolean {
    const { dispatcher, isSingleClaim, poolStats, prefetchRows } = this.#options;
    const running = this.#claimsRunning;
    const held = dispatcher.inWork + dispatcher.waiting;
    const idle = this.#options.isOneInWork === true && held > 0 ? 0 : prefetchRows > 0 ? this.#prefetchWanted() : dispatcher.capacity - held;
    const wanted = this.#isProbing || isSingleClaim || prefetchRows > 0 ? Math.min(idle, 1) : idle;
    if (running >= wanted || (running > 0 && poolStats().spare < 2)) {
      this.#options.budget.withdraw(this.#member);
      return false;
    }
    return this.#options.budget.mayTake(this.#member);
  }

  #startClaim(): void {
    // Slots given back before this claim reads them are the claim's to find; only those given
    // back while it runs may end its wait.
    this.#rateSlotsGivenBack.cancel();
    this.#claimsRunning += 1;
    this.counters.maxClaimsRunning = Math.max(this.counters.maxClaimsRunning, this.#claimsRunning);
    const claim = this.#runClaim();
    this.#claimsInFlight.add(claim);
    this.#noteConnections();
    void claim.then((result) => {
      this.#claimsInFlight.delete(claim);
      // An empty or failed claim gave its connection back; one that took rows handed it to a
      // delivery that holds it, or (lease) gave it back too.
      this.#options.budget.released();
      // Claims side by side (gathered into one statement on Postgres) end in the same turn, and
      // each then sees none running: only the first begins the wait. A second wait would end the
      // first at once (one wake signal), and the two would take turns claiming without pause:
      // thousands of empty claims a second after every drain.
      const isEmptyAfterSettlement = result === 'empty' && this.#settledDuringClaim;
      if (this.#claimsRunning === 0) this.#settledDuringClaim = false;
      if (result !== 'took rows' && !isEmptyAfterSettlement && this.#claimsRunning === 0 && !this.#isStopping && !this.#isWaiting) {
        void this.#waitThenPump(result);
      } else {
        this.#pump();
      }
    });
  }

  async #runClaim(): Promise<ClaimResult> {
    const { claim, rowsPerClaim } = this.#options;
    let rows: HeldRow[];
    // Every claim waits for a turn of the event loop first. On SQLite every statement answers
    // synchronously, so without it a drain of 20,000 rows ran as one chain of promises: no timer,
    // lease renewal, HTTP request or SIGTERM handler ran until the queue was empty, and a row
    // retried at once was claimed again before `stop()` could begin. Elsewhere the statements'
    // I/O turns the loop anyway and the wait costs one check phase.
    await nextEventLoopTurn();
    if (this.#isStopping) {
      this.#claimsRunning -= 1;
      return 'empty';
    }
    // The pause check holds the claim's place in the budget, so its read never takes a connection
    // that a claim could not; while fresh it is a field read.
    const pause = this.#options.pause;
    if (pause !== undefined && (await pause.isPaused())) {
      this.#claimsRunning -= 1;
      this.#isProbing = true;
      this.#signals.pausedNoClaim.emit();
      return 'paused';
    }
    // Contention is counted per claim: parallel claims that all time out behind one lock each get
    // their own retries (eight claims sharing five retries reported 67 of 553 timeouts as failures).
    for (let contentionRetries = 0; ; contentionRetries += 1) {
      try {
        this.counters.claims += 1;
        this.#signals.claimStarted.emit();
        rows = await claim(this.#options.prefetchRows > 0 ? Math.max(1, this.#rowsLacking()) : rowsPerClaim);
        break;
      } catch (error) {
        const contention = this.#options.contentionOf(error);
        if (contention !== undefined && contentionRetries < MAX_CONTENTION_RETRIES && !this.#isStopping) {
          this.counters.deadlocksRetried += 1;
          if (contentionRetries > 0) {
            await abortableSleep(Math.random() * backoffDelayMs(CONTENTION_RETRY_WINDOW, contentionRetries), this.#stop.signal);
            if (this.#isStopping) {
              this.#claimsRunning -= 1;
              return 'empty';
            }
          }
          continue;
        }
        this.#claimsRunning -= 1;
        this.#isProbing = true;
        if (contention === 'conflict') {
          // Drains of 300 rows by a broker on each of three Galera nodes (every claim after the
          // same first rows, one commit winning each round) ran some broker out of its retries in
          // 7 of 8 runs, with a 10 ms handler too; reporting that would report the drain working.
          this.counters.claimsGaveWay += 1;
          this.#signals.claimGaveWay.emit(error);
          return 'gave way';
        }
        this.counters.failedClaims += 1;
        this.#options.onClaimError(error);
        this.#signals.claimFailed.emit(error);
        return 'failed';
      }
    }
    this.#claimsRunning -= 1;
    if (this.#isStopping) {
      await Promise.allSettled(rows.map((row) => this.#options.handBack(row)));
      return 'took rows';
    }
    if (rows.length === 0) {
      const rateWaitMs = this.#options.rate?.takeWaitMs();
      if (rateWaitMs !== undefined) {
        this.#rateWaitMs = rateWaitMs;
        this.#isProbing = true;
        this.#signals.rateLimited.emit(rateWaitMs);
        return 'rate limited';
      }
      this.counters.emptyClaims += 1;
      this.#isProbing = true;
      this.#signals.claimCameBackEmpty.emit();
      return 'empty';
    }
    this.#tookRows(rows);
    this.#noteConnections();
    return 'took rows';
  }

  #tookRows(rows: HeldRow[]): void {
    this.#isProbing = false;
    this.#emptyWaits = 0;
    const units: DeliveryUnit[] = this.#options.isBatch ? [rows] : rows.map((row) => [row]);
    for (const unit of units) this.#options.dispatcher.offer(unit);
    this.#signals.claimTookRows.emit(rows.length);
  }

  /**
   * After the last claim in flight came back empty, the next claim waits for the poll interval
   * (shorter while the queue was recently busy) or a wake; after a failed claim it waits
   * FAILED_CLAIM_BACKOFF_MS whatever wakes arrive; while the queue is paused, until the pause
   * state is due to be read again or a wake (a notified resume among them); after a claim the
   * rate held back, until its next slot frees or slots reserved meanwhile are given back, whatever
   * wakes arrive: each publish would wake a claim that can only find the slots used again.
   */
  async #waitThenPump(result: Exclude<ClaimResult, 'took rows'>): Promise<void> {
    this.#isWaiting = true;
    this.#isBackingOff = result === 'failed' || result === 'rate limited';
    try {
      if (result === 'failed') {
        this.#signals.waiting.emit(FAILED_CLAIM_BACKOFF_MS);
        await abortableSleep(FAILED_CLAIM_BACKOFF_MS, this.#stop.signal);
      } else if (result === 'rate limited') {
        this.#signals.waiting.emit(this.#rateWaitMs);
        await this.#rateSlotsGivenBack.wait(this.#rateWaitMs);
      } else if (result === 'paused') {
        const waitMs = this.#options.pause?.msUntilStale() ?? this.#options.pollIntervalMs;
        this.#signals.waiting.emit(waitMs);
        await this.#wake.wait(waitMs);
      } else {
        const capMs = this.#options.rate?.takeEmptyWaitCapMs?.();
        const waitMs = capMs === undefined ? this.#emptyWaitMs() : Math.min(capMs, this.#emptyWaitMs());
        this.#signals.waiting.emit(waitMs);
        await this.#wake.wait(waitMs);
      }
    } finally {
      this.#isWaiting = false;
      this.#isBackingOff = false;
    }
    this.#pump();
  }

  /** The poll interval, or after claims took rows the quick poll, doubling with each empty wait up to the interval. */
  #emptyWaitMs(): number {
    const { pollIntervalMs } = this.#options;
    if (this.#emptyWaits === undefined) return pollIntervalMs;
    this.#emptyWaits += 1;
    const quickPollMs = Math.max(QUICK_POLL_FLOOR_MS, pollIntervalMs / QUICK_POLL_DIVISOR);
    return backoffDelayMs({ initialMs: quickPollMs, maxMs: pollIntervalMs }, this.#emptyWaits);
  }

  #noteConnections(): void {
    this.counters.maxConnectionsHeld = Math.max(this.counters.maxConnectionsHeld, this.connectionsHeld);
  }
}
