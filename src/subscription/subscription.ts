import type { ClaimForm, HeldRow } from '../claim/claim-form.js';
import { contentionOf } from '../claim/contention.js';
import { createClaimForm } from '../claim/create-claim-form.js';
import type { ConcurrencyLimits, FormContext } from '../claim/form-context.js';
import { roundLeaseMs } from '../claim/lease-book.js';
import type { Queue } from '../definition/define-table.js';
import type { DeadLetterTarget, Dialect, TableColumns } from '../dialect/dialect.js';
import type { Driver } from '../driver/driver.js';
import { prepareStatements, schemaErrorOf } from '../driver/prepare-statements.js';
import { DeclarationError, SchemaError } from '../errors.js';
import type { Observability } from '../observability/observability.js';
import type { SubscriptionObserver } from '../observability/subscription-observer.js';
import { bindStatement } from '../statement.js';
import { parseDeadLetterTable, roleColumns, type TableSpec } from '../table/table-spec.js';
import { CancellationWatch, type CancellationRecords } from './cancellation-watch.js';
import { ClaimLoop } from './claim-loop.js';
import { DeliveryRunner, type InvokeHandler } from './delivery-runner.js';
import type { DeliveryUnit, Dispatcher, RunUnit } from './dispatcher.js';
import { KeyLanes } from './key-lanes.js';
import type { LifecycleEventSink } from './lifecycle-events.js';
import { PauseWatch } from './pause-watch.js';
import { poolBudgetFor } from './pool-budget.js';
import { SubscriptionTestHooks } from './subscription-test-hooks.js';
import { transactionalContext } from './transactional-context.js';
import type { BatchHandler, Decoder, Handler, HandlerContext, ResolvedSubscribeOptions } from './subscription-options.js';
import { checkConcurrencyFits, ensureConcurrencyGuards } from './concurrency-limits.js';
import { ensureFifoGuardRow } from '../claim/fifo-guard-rows.js';
import { WorkerSlots } from './worker-slots.js';
import { checkRateFits, RateLimiter, type RateLimitSettings } from './rate-limit.js';
import { DEFAULT_RATE_LIMITS_TABLE, parseRateLimitsTable, type RateLimitsTable } from '../dialect/rate-limit-statements.js';

/**
 * After the stop timeout aborts the handlers' signal, they get this long to return before their
 * rows are handed back without them.
 */
export const STOP_ABANDON_GRACE_MS = 1_000;

/** Why a lease subscription's claims count its queue's rows in work (`Subscription.countsRowsInWork`). */
export type RowsInWorkReason = 'concurrency' | 'fifo';

/** Counters a person can act on, per subscription. */
export interface SubscriptionStats {
  readonly queue: string;
  readonly form: TableSpec['form'];
  readonly workers: number;
  /** `concurrency`: the limits every claim of the queue enforces across brokers; undefined without. */
  readonly concurrency: ConcurrencyLimits | undefined;
  readonly inWork: number;
  readonly waitingRows: number;
  readonly claimsRunning: number;
  readonly connectionsHeld: number;
  readonly maxConnectionsHeld: number;
  readonly maxClaimsRunning: number;
  readonly claims: number;
  readonly emptyClaims: number;
  readonly failedClaims: number;
  readonly handled: number;
  readonly acked: number;
  readonly dropped: number;
  readonly retried: number;
  readonly deadLettered: number;
  readonly decodeFailures: number;
  readonly handlerErrors: number;
  readonly settleErrors: number;
  /** Messages cancelled while in work here (`broker.cancel`), settled as cancelled. */
  readonly cancelled: number;
  readonly leaseRenewals: number;
  readonly leasesLost: number;
  /**
   * Claims and lease settlements that met contention and ran again: a deadlock, a lock wait timeout
   * (claims), or on a Galera cluster a certification failure (claim/contention.ts).
   */
  readonly deadlocksRetried: number;
  /** Messages whose handler ran past its timeout (`timeoutMs`); their signal was aborted. */
  readonly timedOut: number;
  /** Whether an operator paused the queue, as the subscription last read it (`broker.pause`). */
  readonly paused: boolean;
  /** `rate`: at most `limit` claims of the queue per `perMs` across brokers; undefined without. */
  readonly rate: RateLimitSettings | undefined;
  /** Claims that took nothing because the rate had no slot free. */
  readonly rateHeldBack: number;
}

export interface SubscriptionRuntime {
  readonly driver: Driver;
  readonly dialect: Dialect;
  readonly onError: (error: unknown, detail: Record<string, unknown>) => void;
  readonly onWarning: (message: string) => void;
  readonly createContext: (signal: AbortSignal) => Omit<HandlerContext, 'signal'>;
  /** Starts the worker threads of an `onThreads` subscription (WP-12). */
  readonly openThreads: (request: ThreadRequest) => Promise<ThreadInvoker>;
  /** Metrics and spans: the subscription's series are resolved once, when it opens. */
  readonly observability: Observability;
  /** Cancels every statement still running on the broker's connections (see `Driver.cancelRunning`). */
  readonly cancelStatements: () => Promise<void>;
  /** Where deliveries' lifecycle events go (the broker's `settled`, `timedOut`, …). */
  readonly events: LifecycleEventSink;
  /** Where `broker.cancel` records cancels of messages in work; without it, none reach this broker. */
  readonly cancellations?: CancellationRecords;
  /** Whether an operator paused the queue (the queue controls table); may throw. Without it, never. */
  readonly readPaused?: (queue: Queue<unknown>, refreshedAt: number) => Promise<boolean>;
  /**
   * The broker reads the cancellations of this subscription's rows in work itself, in its one read
   * per poll interval with the pause state (broker/broker-control-read.ts): the subscription then
   * reads records only to tell a lost lease from a cancel.
   */
  readonly readsCancellationsForIt?: boolean;
  /** Where `rate` subscriptions keep their slots (broker option `rateLimitsTable`); default `tablequeue_rate_limits`. */
  readonly rateLimitsTable?: RateLimitsTable;
}

export interface ThreadRequest {
  readonly subscription: string;
  readonly options: NonNullable<ResolvedSubscribeOptions['onThreads']>;
  readonly isBatch: boolean;
  readonly signal: AbortSignal;
}

/** The threads of one subscription: `invoke` runs the handler on thread `slot`. */
export interface ThreadInvoker {
  readonly invoke: InvokeHandler;
  close(): Promise<void>;
}

/** One queue being read: opened (statements checked) at start, then a claim loop and its deliveries. */
export class Subscription {
  readonly queue: Queue<unknown>;
  readonly #handler: Handler<unknown> | BatchHandler<unknown> | undefined;
  readonly #options: ResolvedSubscribeOptions;
  readonly #abort = new AbortController();
  #form: ClaimForm | undefined;
  #loop: ClaimLoop | undefined;
  #runner: DeliveryRunner | undefined;
  #dispatcher: Dispatcher | undefined;
  #threads: ThreadInvoker | undefined;
  #runtime: SubscriptionRuntime | undefined;
  #leaseRenewals = 0;
  #leasesLost = 0;
  /** Lease settlements rolled back by a conflict and run again; counted with the claims' in `deadlocksRetried`. */
  #settlementsRetried = 0;
  #cancellations: CancellationWatch | undefined;
  #pause: PauseWatch | undefined;
  #rate: RateLimiter | undefined;
  /** Dormant unless a test turns its signals on or sets its clock. */
  readonly testHooks = new SubscriptionTestHooks();

  constructor(
    queue: Queue<unknown>,
    handler: Handler<unknown> | BatchHandler<unknown> | undefined,
    options: ResolvedSubscribeOptions,
  ) {
    this.queue = queue;
    this.#handler = handler;
    this.#options = options;
  }

  get name(): string {
    return this.queue.label;
  }

  /** Where rows go when their attempts run out (a group of the table, or a table); undefined without maxAttempts. */
  get deadLetter(): string | undefined {
    return this.#options.deadLetter;
  }

  /**
   * What makes its lease claims count the queue's rows in work, `group = ? AND locked_until > ?`:
   * a concurrency limit, or FIFO groups; undefined when they count nothing (other forms, no limit).
   */
  get countsRowsInWork(): RowsInWorkReason | undefined {
    const spec = this.queue.table.spec;
    if (spec.lockedUntil === undefined) return undefined;
    if (this.#options.concurrency !== undefined) return 'concurrency';
    return spec.group?.fifo === true ? 'fifo' : undefined;
  }

  /** The payload decoder declared (`decode`): a function, or a Standard Schema validator the AsyncAPI document reads. */
  get decode(): Decoder<unknown> | undefined {
    return this.#options.decode;
  }

  /** The connections this subscription's threads open (WP-13); none without onThreads. */
  threadBudget(): { name: string; threads: number; connections: number }[] {
    const threads = this.#options.onThreads;
    return threads === undefined ? [] : [{ name: this.name, threads: threads.threads, connections: threads.connections }];
  }

  /**
   * Reads the table's columns, renders every statement and prepares each on the server, so a
   * missing table or column fails here with a `SchemaError` naming it.
   */
  async open(runtime: SubscriptionRuntime): Promise<void> {
    const { driver, dialect } = runtime;
    this.#runtime = runtime;
    const spec = this.queue.table.spec;
    dialect.validateTable(spec);
    if (this.#options.isKeyed && spec.partitionKey === undefined) {
      throw new DeclarationError(
        `subscription "${this.name}": keyed lanes need a partitionKey column; declare partitionKey in defineTable`,
      );
    }
    if (this.#options.prefetch > 0 && spec.form !== 'lease') {
      throw new DeclarationError(
        `subscription "${this.name}": prefetch keeps rows claimed ahead under a lease; in the ${spec.form === 'rowLock' ? 'row lock' : 'advisory lock'} form each waiting row would hold a connection, so remove prefetch or declare lockedUntil`,
      );
    }
    await ensureFifoGuardRow(driver, dialect.name, spec, this.queue.group);
    const { concurrency } = this.#options;
    if (concurrency !== undefined) {
      checkConcurrencyFits(concurrency, spec, dialect, this.name);
      await ensureConcurrencyGuards(driver, dialect, spec, concurrency, this.queue.group);
    }
    const { rate } = this.#options;
    if (rate !== undefined) {
      checkRateFits(rate, spec, dialect, this.name);
      const table = runtime.rateLimitsTable ?? parseRateLimitsTable(DEFAULT_RATE_LIMITS_TABLE, dialect.name);
      this.#rate = new RateLimiter({ dialect, table, spec, group: this.queue.group, settings: rate });
      await this.#rate.ensure(driver);
    }
    const columns = await this.#readColumns(runtime);
    const deadLetter = this.#deadLetterTarget(spec);
    const { transactional, workers, batch, isKeyed } = this.#options;
    const budget = poolBudgetFor(driver.poolIdentity, () => driver.stats());
    const context: FormContext = {
      driver,
      dialect,
      spec,
      columns,
      group: this.queue.group,
      deadLetter,
      subscription: this.name,
      transactional,
      keyed: isKeyed,
      hasRoomForConnection: () => budget.held < budget.limit,
      // The lease form takes its slots inside its claim; the others reserve them around it (`aroundClaim`).
      rate: spec.form === 'lease' ? this.#rate : undefined,
      concurrency,
    };
    const leaseMs = roundLeaseMs(this.#options.leaseMs);
    const form = createClaimForm(context, {
      leaseMs,
      settlementWindowMs: this.#options.coalesceSettlements ? this.#options.settlementWindowMs : undefined,
      onRenewed: () => (this.#leaseRenewals += 1),
      onLost: (id) => this.#leaseLost(id),
      onConflictRetried: () => (this.#settlementsRetried += 1),
      onError: (error) => runtime.onError(error, { subscription: this.name, phase: 'lease renewal' }),
      keeper: { clock: this.testHooks.clock, signals: this.testHooks.keeper },
    });
    this.#form = form;
    try {
      const reservations = spec.form !== 'lease' && this.#rate !== undefined ? this.#rate.reservationStatements : [];
      await prepareStatements(runtime.driver, [...form.statements, ...reservations], {
        kind: 'table',
        table: this.queue.table.spec.qualifiedName,
        deadLetterTable: deadLetter?.kind === 'table' ? deadLetter : undefined,
      });
    } catch (error) {
      form.close();
      throw error;
    }
    const rowsPerClaim = batch ?? form.rowsPerClaim(workers);
    const invoke = await this.#openInvoker(runtime);
    const observer = runtime.observability.forSubscription(this.queue, () => this.stats());
    this.#runner = new DeliveryRunner({
      spec,
      subscription: this.name,
      invoke,
      isBatch: batch !== undefined,
      options: this.#options,
      deadLetter,
      observer,
      onError: (error, detail) => runtime.onError(error, detail),
      onWarning: runtime.onWarning,
      isDoneAtHandover: form.isDoneAtHandover,
      onSettled: () => this.#loop?.onWorkerIdle(),
      events: runtime.events,
      cancelRunningOn: (connection) => driver.cancelRunningOn(connection),
      stopSignal: this.#abort.signal,
      cancellations: {
        wasCancelled: async (id) => (await this.#cancellations?.wasCancelled(id)) ?? false,
        settledAsCancelled: (id) => this.#cancellations?.settledAsCancelled(id),
      },
      signals: this.testHooks.runner,
    });
    const runner = this.#runner;
    const records = runtime.cancellations;
    this.#cancellations =
      records === undefined
        ? undefined
        : new CancellationWatch({
            driver,
            records,
            queueTable: spec.qualifiedName,
            pollIntervalMs: this.#options.pollIntervalMs,
            runner,
            onLeaseLost: () => this.#countLeaseLost(),
            onError: (error, phase) => runtime.onError(error, { subscription: this.name, phase }),
          });
    const clock = this.testHooks.clock;
    const run: RunUnit = (unit, slot) => runner.run(unit, slot);
    const onIdle = () => this.#loop?.onWorkerIdle();
    const partitionKey = spec.partitionKey;
    this.#dispatcher =
      isKeyed && partitionKey !== undefined
        ? new KeyLanes({ lanes: workers, run, onIdle, keyOf: (unit: DeliveryUnit) => keyOf(unit, partitionKey) })
        : new WorkerSlots({ workers, run, onIdle });
    const readPaused = runtime.readPaused;
    this.#pause =
      readPaused === undefined
        ? undefined
        : new PauseWatch({
            read: (refreshedAt) => readPaused(this.queue, refreshedAt),
            freshForMs: this.#options.pollIntervalMs,
            onReadFailed: (error) =>
              runtime.onWarning(
                `subscription "${this.name}" cannot read whether its queue is paused (${error instanceof Error ? error.message : String(error)}); it claims as if running until the queue controls table can be read`,
              ),
          });
    this.#loop = new ClaimLoop({
      dispatcher: this.#dispatcher,
      holdsConnection: form.holdsConnection,
      connectionsInWork: form.connectionsInWork?.bind(form),
      isSingleClaim: form.claimsOneAtATime,
      rowsPerClaim,
      isOneInWork: spec.group?.fifo === true,
      prefetchRows: this.#options.prefetch,
      isBatch: batch !== undefined,
      pollIntervalMs: this.#options.pollIntervalMs,
      poolStats: () => driver.stats(),
      budget,
      claim: tracedClaim(observer, (limit) => {
        const now = clock.now();
        const rate = spec.form === 'lease' ? undefined : this.#rate;
        if (rate === undefined) return form.claim(limit, now);
        return rate.aroundClaim(driver, limit, (reserved) => form.claim(reserved, now), {
          releaseError: (error) => runtime.onError(error, { subscription: this.name, phase: 'rate release' }),
          givenBack: () => this.#loop?.rateSlotsGivenBack(),
        });
      }),
      onClaimError: (error) => runtime.onError(error, { subscription: this.name, phase: 'claim' }),
      contentionOf,
      handBack: (row) => this.#handBack(runtime, row),
      signals: this.testHooks.loop,
      pause: this.#pause,
      rate: this.#rate && {
        takeWaitMs: () => this.#rate?.takeWaitMs(clock.now().getTime()),
        takeEmptyWaitCapMs: () => this.#rate?.takeEmptyWaitCapMs(clock.now().getTime()),
      },
    });
    // A chained claim runs inside a settlement's round trip: it has no span of its own to trace.
    if (observer.tracing === undefined) {
      const loop = this.#loop;
      form.chainClaimsThrough?.({ chainClaim: () => loop.chainClaim(), now: () => clock.now() });
    }
  }

  start(): void {
    if (this.#runtime?.readsCancellationsForIt !== true) this.#cancellations?.watch();
    this.#loop?.start();
  }

  /** How often the subscription polls when idle (`pollIntervalMs`). */
  get pollIntervalMs(): number {
    return this.#options.pollIntervalMs;
  }

  /** The ids of the messages in work here whose settlement has not begun. */
  inWorkIds(): string[] {
    return this.#runner?.inWorkIds() ?? [];
  }

  /** The broker read whether this queue is paused, in a read begun at `readStartedAt` (performance.now()). */
  observePaused(isPaused: boolean, readStartedAt: number): void {
    this.#pause?.observe(isPaused, readStartedAt);
  }

  wake(): void {
    this.#loop?.wake();
  }

  /** `broker.cancel` of this broker found the message in work: if it runs here, its handler hears now. */
  cancelInWork(id: string): void {
    this.#runner?.cancel(id);
  }

  /** A pause or resume of this queue was announced: read the state before the next claim. */
  refreshPaused(): void {
    this.#pause?.refresh();
    this.#loop?.wake();
  }

  /**
   * Stops claiming, hands back waiting rows, lets deliveries in work finish for `timeoutMs`,
   * then aborts their signal and waits for them to settle.
   */
  async stop(timeoutMs: number): Promise<void> {
    const loop = this.#loop;
    const dispatcher = this.#dispatcher;
    this.#form?.beginStop?.();
    if (loop && dispatcher) {
      await loop.stop();
      const drained = dispatcher.drain();
      if (!(await settlesWithin(drained, timeoutMs))) {
        this.#abort.abort();
        if (!(await settlesWithin(drained, STOP_ABANDON_GRACE_MS))) {
          // A handler waiting on the database (a query of its own, or its delivery's transaction)
          // would keep its connection, and a row lock's hand back would queue behind the statement:
          // cancel first, then hand the rows back.
          await this.#cancelStatements();
          await this.#runner?.abandonAll();
          // Handlers whose statements were cancelled settle now; their settlements run on
          // connections the broker destroys once every subscription has stopped, so wait for them
          // (bounded: a handler that ignores both the abort and the cancel is left behind).
          await settlesWithin(drained, STOP_ABANDON_GRACE_MS);
        }
      }
    }
    await this.#runner?.settled();
    this.#cancellations?.stop();
    loop?.leaveBudget();
    this.#form?.close();
    await this.#threads?.close();
  }

  async #cancelStatements(): Promise<void> {
    try {
      await this.#runtime?.cancelStatements();
    } catch (error) {
      this.#runtime?.onError(error, { subscription: this.name, phase: 'stop' });
    }
  }

  stats(): SubscriptionStats {
    const loop = this.#loop;
    const runner = this.#runner?.counters;
    return {
      queue: this.name,
      form: this.queue.table.spec.form,
      workers: this.#options.workers,
      concurrency: this.#options.concurrency,
      inWork: this.#dispatcher?.inWork ?? 0,
      waitingRows: this.#dispatcher?.waiting ?? 0,
      claimsRunning: loop?.claimsRunning ?? 0,
      connectionsHeld: loop?.connectionsHeld ?? 0,
      maxConnectionsHeld: loop?.counters.maxConnectionsHeld ?? 0,
      maxClaimsRunning: loop?.counters.maxClaimsRunning ?? 0,
      claims: loop?.counters.claims ?? 0,
      emptyClaims: loop?.counters.emptyClaims ?? 0,
      failedClaims: loop?.counters.failedClaims ?? 0,
      handled: runner?.handled ?? 0,
      acked: runner?.acked ?? 0,
      dropped: runner?.dropped ?? 0,
      retried: runner?.retried ?? 0,
      deadLettered: runner?.deadLettered ?? 0,
      decodeFailures: runner?.decodeFailures ?? 0,
      handlerErrors: runner?.handlerErrors ?? 0,
      settleErrors: runner?.settleErrors ?? 0,
      cancelled: runner?.cancelled ?? 0,
      leaseRenewals: this.#leaseRenewals,
      leasesLost: this.#leasesLost,
      deadlocksRetried: (loop?.counters.deadlocksRetried ?? 0) + this.#settlementsRetried,
      timedOut: runner?.timedOut ?? 0,
      paused: this.#pause?.isPausedNow ?? false,
      rate: this.#options.rate,
      rateHeldBack: this.#rate?.heldBack ?? 0,
    };
  }

  async #openInvoker(runtime: SubscriptionRuntime): Promise<InvokeHandler> {
    const isBatch = this.#options.batch !== undefined;
    const threads = this.#options.onThreads;
    if (threads !== undefined) {
      this.#threads = await runtime.openThreads({ subscription: this.name, options: threads, isBatch, signal: this.#abort.signal });
      return this.#threads.invoke;
    }
    const handler = this.#handler!;
    const context: HandlerContext = { ...runtime.createContext(this.#abort.signal), signal: this.#abort.signal };
    const transactionalOptions = {
      subscription: this.name,
      database: runtime.dialect.name,
      isPoolOneConnection: runtime.driver.stats().size <= 1,
    };
    // Each delivery's context carries its own signal (stop, its timeout, or a cancel of its
    // message), made when the handler first reads it (see InvokeHandler).
    const withSignal = (abort: AbortController): HandlerContext => ({
      ...context,
      get signal() {
        return abort.signal;
      },
    });
    // Not async: the runner awaits what the handler returns and catches what it throws, so a
    // wrapper promise per delivery would only add an allocation and a microtask.
    return isBatch
      ? (messages, _slot, _tx, abort) => (handler as BatchHandler<unknown>)(messages, withSignal(abort))
      : (messages, _slot, tx, abort) =>
          (handler as Handler<unknown>)(
            messages[0]!,
            tx === undefined ? withSignal(abort) : transactionalContext(withSignal(abort), tx, transactionalOptions),
          );
  }

  async #readColumns(runtime: SubscriptionRuntime): Promise<TableColumns> {
    const spec = this.queue.table.spec;
    const probe = runtime.dialect.schema.probeColumns(spec);
    let columns: readonly string[];
    try {
      columns = (await runtime.driver.execute(bindStatement(probe, {}))).columns;
    } catch (error) {
      throw schemaErrorOf({ kind: 'table', table: spec.qualifiedName }, probe, error);
    }
    const missing = roleColumns(spec).filter((column) => !columns.includes(column));
    if (missing.length > 0) {
      throw new SchemaError({
        table: spec.qualifiedName,
        statement: probe.name,
        message: `table "${spec.qualifiedName}" has no column ${missing.map((c) => `"${c}"`).join(', ')}; the declaration names ${missing.length === 1 ? 'it' : 'them'} as a role (found: ${columns.join(', ')})`,
      });
    }
    return columns;
  }

  #deadLetterTarget(spec: TableSpec): DeadLetterTarget | undefined {
    const destination = this.#options.deadLetter;
    if (destination === undefined) return undefined;
    if (spec.group !== undefined) return { kind: 'group', group: destination };
    return { kind: 'table', ...parseDeadLetterTable(destination, `subscription "${this.name}"`) };
  }


  /** A renewal or settlement found the lease gone: a cancel, or a lease lost (counted). */
  #leaseLost(id: string): void {
    if (this.#cancellations === undefined) this.#countLeaseLost();
    else this.#cancellations.leaseLost(id);
  }

  #countLeaseLost(): void {
    this.#leasesLost += 1;
  }

  async #handBack(runtime: SubscriptionRuntime, row: HeldRow): Promise<void> {
    try {
      await row.handBack();
    } catch (error) {
      runtime.onError(error, { subscription: this.name, messageId: row.id, phase: 'hand back' });
    }
  }
}

/** The claim inside a span when tracing is on; the claim itself otherwise. */
function tracedClaim(observer: SubscriptionObserver, claim: (limit: number) => Promise<HeldRow[]>): (limit: number) => Promise<HeldRow[]> {
  const tracing = observer.tracing;
  return tracing === undefined ? claim : (limit) => tracing.claim(() => claim(limit));
}

/** Whether `promise` settles within `ms`. */
async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  try {
    return await Promise.race([promise.then(() => true), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

function keyOf(unit: DeliveryUnit, column: string): string | null {
  const value = unit[0]?.row[column];
  return value === null || value === undefined ? null : String(value);
}
