import type { HeldRow, Settlement } from '../claim/claim-form.js';
import type { DeadLetterTarget } from '../dialect/dialect.js';
import type { Connection } from '../driver/driver.js';
import { decodeHeaders, decodeJsonPayload } from '../delivery/codec.js';
import type { DeliveryTransaction, HandlerTransaction } from '../delivery/delivery-transaction.js';
import { boundLastError, describeRetryRequested, describeThrown } from '../delivery/last-error.js';
import type { Message } from '../delivery/message.js';
import { timeoutOfHeaders } from '../delivery/message-timeout.js';
import { isOutcome, Outcome, retryDelayProblem } from '../delivery/outcome.js';
import { CancelledError, DeclarationError, DecodeError, HandlerTimeoutError, LeaseLostError } from '../errors.js';
import { backoffDelayMs } from '../internal/backoff.js';
import { TestSignal } from '../internal/test-signal.js';
import type { SettledOutcome } from '../observability/broker-metrics.js';
import type { SubscriptionObserver } from '../observability/subscription-observer.js';
import type { ProcessSpan } from '../observability/tracing.js';
import type { TableSpec } from '../table/table-spec.js';
import type { DeliveryUnit } from './dispatcher.js';
import type {
  DeadLetteredEvent,
  DeliveryEvent,
  LifecycleEventSink,
  RetryingEvent,
  SettledEvent,
  SettledEventOutcome,
} from './lifecycle-events.js';
import {
  isStandardSchema,
  type ResolvedSubscribeOptions,
} from './subscription-options.js';

export interface DeliveryCounters {
  handled: number;
  acked: number;
  dropped: number;
  retried: number;
  deadLettered: number;
  decodeFailures: number;
  handlerErrors: number;
  settleErrors: number;
  /** Messages cancelled while in work (`broker.cancel`), settled as cancelled. */
  cancelled: number;
  /** Messages whose handler ran past its timeout. */
  timedOut: number;
}

/**
 * How long a handler whose timeout passed (its signal aborted) may still take to return before
 * its delivery is settled without it: the smaller of the timeout itself and one second. A
 * handler that honours its signal needs moments to unwind (its own rollback, a stream closed),
 * so what it returns then still counts; one that ignores it holds its row, lock or transaction
 * for at most twice its timeout, and never more than a second past it: the second that
 * `stop()` also gives handlers after aborting them.
 */
export function timeoutGraceMs(timeoutMs: number): number {
  return Math.min(timeoutMs, 1_000);
}

/**
 * Calls the handler for the decoded messages of one unit on worker `slot` and returns what it
 * returned: in process, or on a worker thread. `transaction` is the delivery's transaction in
 * transactional mode, lent to the handler as `context.tx`. `abort` is the delivery's own:
 * aborted at stop (past the stop timeout), at its timeout and when one of the unit's rows is
 * cancelled. Its `signal` is read only when the handler reads `context.signal`: Node makes an
 * AbortController's signal on first read, 3.6 to 3.8 µs of CPU against 0.05 µs for the
 * controller alone (Node 20), and in a profiled PostgreSQL drain of 20,000 messages, whose
 * handlers never looked at it, making it took 183 ms.
 */
export type InvokeHandler = (
  messages: Message<unknown>[],
  slot: number,
  transaction: HandlerTransaction | undefined,
  abort: AbortController,
) => unknown;

export interface DeliveryRunnerOptions {
  readonly spec: TableSpec;
  readonly subscription: string;
  readonly invoke: InvokeHandler;
  /** Batch subscriptions hand the handler an array and accept one outcome or one per message. */
  readonly isBatch: boolean;
  readonly options: ResolvedSubscribeOptions;
  readonly deadLetter: DeadLetterTarget | undefined;
  /** Handler durations, latencies and outcomes; the spans when tracing is on. */
  readonly observer: SubscriptionObserver;
  readonly onError: (error: unknown, detail: { subscription: string; messageId: string; phase: string }) => void;
  readonly onWarning: (message: string) => void;
  /**
   * The form coalesces settlements: a unit is done once its settlements are handed over, so its
   * worker claims again while they wait for their window and statement; `settled()` waits for
   * them and `onSettled` runs after each unit's settlements end (rows they free may be claimable).
   */
  readonly isDoneAtHandover: boolean;
  readonly onSettled: () => void;
  /** Lifecycle events (`broker.on('settled', …)`), built only for names someone listens to. */
  readonly events: LifecycleEventSink;
  /** Cancels the statement running on a delivery's connection (`Driver.cancelRunningOn`), for a handler given up on. */
  readonly cancelRunningOn: (connection: Connection) => Promise<void>;
  /** The subscription's: aborted at stop past the stop timeout; every delivery's signal follows it. */
  readonly stopSignal: AbortSignal;
  /** What the runner asks about messages cancelled while in work. */
  readonly cancellations: DeliveryCancellations;
  /** Signals a test turns on; the runner makes dormant ones without. */
  readonly signals?: DeliveryRunnerSignals;
}

/** The subscription's part of a cancel of a message in work (see subscription/cancellation-watch.ts). */
export interface DeliveryCancellations {
  /**
   * Whether a message whose lease settlement found its row gone was cancelled (the canceller
   * removed the row), rather than its lease lost.
   */
  wasCancelled(id: string): Promise<boolean>;
  /** The message settled as cancelled: its cancellation record can go. */
  settledAsCancelled(id: string): void;
}

/** What the runner tells a test that turned a signal on (internal/test-signal.ts); nothing otherwise. */
export class DeliveryRunnerSignals {
  /** A unit's delivery began on a worker. */
  readonly deliveryStarted = new TestSignal<DeliveryUnit>();
  /** The handler returned or threw (counted in `handled`): the rows it was given. */
  readonly handlerEnded = new TestSignal<readonly HeldRow[]>();
  /** A row's settlement ended, applied or failed (and counted either way): the row's id. */
  readonly settled = new TestSignal<string>();
}

/**
 * What a decode or a handler threw; a dead letter records it as the row's last error. It is
 * reported once the settlements of its rows are decided, so the report says what comes next.
 */
interface Failure {
  readonly thrown: unknown;
  readonly phase: 'decode' | 'handler';
}

/**
 * What the `error` event and the logger learn about a failed delivery, beside the error: the
 * message (ids joined with commas for a batch), and what its settlement does next. On a batch,
 * `nextAttemptAt` is the earliest of the retried messages' and `deadLetteredIds` names those moved.
 */
export interface DeliveryFailureDetail {
  readonly subscription: string;
  readonly messageId: string;
  readonly phase: 'decode' | 'handler';
  /** The attempt that failed, 1 on the first delivery; one message only. */
  readonly attempt?: number;
  readonly maxAttempts?: number;
  /** When the message can be claimed again: its retryAfter time, or the report's time when it returns at once. */
  readonly nextAttemptAt?: Date;
  /** 0 when the message returns at once (the outcome is retry, or the table has no retryAfter column). */
  readonly retryDelayMs?: number;
  /** Where the messages that had no attempt left went. */
  readonly deadLetter?: { readonly group: string } | { readonly table: string };
  readonly deadLetteredIds?: string;
  /** The message was finished without being handled (`onDecodeFailure: 'drop'`). */
  readonly dropped?: true;
}

/** One outcome per message, and what the handler threw when the outcomes stand for a throw. */
interface HandlerResult {
  readonly outcomes: Outcome[];
  readonly failure?: Failure;
}

/** Runs one unit: decode, handler, outcomes, settlements. Never throws. */
export class DeliveryRunner {
  readonly counters: DeliveryCounters = {
    handled: 0,
    acked: 0,
    dropped: 0,
    retried: 0,
    deadLettered: 0,
    decodeFailures: 0,
    handlerErrors: 0,
    settleErrors: 0,
    cancelled: 0,
    timedOut: 0,
  };
  readonly #options: DeliveryRunnerOptions;
  readonly #inFlight = new Set<HeldRow>();
  /** Units whose settlements were handed over and have not ended (coalescing forms). */
  #settlingCount = 0;
  readonly #settledWaiters: (() => void)[] = [];
  readonly #abandoned = new WeakSet<HeldRow>();
  /** Each message in work, until its settlement begins: the abort of its delivery's signal. */
  readonly #deliveryAborts = new Map<string, AbortController>();
  /** Messages cancelled while in work; they settle as cancelled whatever the handler returns. */
  readonly #cancelled = new Set<string>();
  #hasWarnedRetryAfter = false;
  #hasWarnedBatchLength = false;
  readonly #signals: DeliveryRunnerSignals;

  constructor(options: DeliveryRunnerOptions) {
    this.#options = options;
    this.#signals = options.signals ?? new DeliveryRunnerSignals();
    options.stopSignal.addEventListener('abort', this.#abortAllAtStop, { once: true });
  }

  /**
   * The stop reaches each delivery in work through its own controller, so a delivery's signal is
   * that controller's. Combining the two per delivery with `AbortSignal.any` cost 27 to 31 µs of
   * CPU per delivery against 8 to 13 µs for the controller alone (Node 20, 200,000 deliveries
   * under one stop signal, garbage collection included); a PostgreSQL drain of 20,000 messages
   * (lease defaults, 16 workers) went from 98, 126 and 125 µs of CPU per message to 100, 93 and 110.
   */
  readonly #abortAllAtStop = (): void => {
    const reason: unknown = this.#options.stopSignal.reason;
    for (const abort of this.#deliveryAborts.values()) abort.abort(reason);
  };

  /** The messages in work whose settlement has not begun. */
  inWorkIds(): string[] {
    return [...this.#deliveryAborts.keys()];
  }

  /**
   * A message in work was cancelled: its delivery's signal aborts with a `CancelledError`, and
   * it settles as cancelled whatever the handler returns. False when no delivery here has it in
   * work, or its settlement already began.
   */
  cancel(id: string): boolean {
    const abort = this.#deliveryAborts.get(id);
    if (abort === undefined) return false;
    this.#cancelled.add(id);
    abort.abort(new CancelledError({ id, subscription: this.#options.subscription }));
    return true;
  }

  /** Whether `id` was cancelled while in work here and its settlement as cancelled has not ended. */
  isCancelled(id: string): boolean {
    return this.#cancelled.has(id);
  }

  async run(unit: DeliveryUnit, slot: number): Promise<void> {
    const abort = new AbortController();
    const startedAt = performance.now();
    for (const row of unit) {
      this.#inFlight.add(row);
      this.#deliveryAborts.set(row.id, abort);
    }
    if (this.#options.stopSignal.aborted) abort.abort(this.#options.stopSignal.reason);
    this.#signals.deliveryStarted.emit(unit);
    let handedOver: { readonly settlements: Promise<void> };
    try {
      handedOver = await this.#run(unit, slot, abort, startedAt);
      if (!this.#options.isDoneAtHandover) await handedOver.settlements;
    } finally {
      for (const row of unit) {
        this.#inFlight.delete(row);
        if (this.#deliveryAborts.get(row.id) === abort) this.#deliveryAborts.delete(row.id);
      }
    }
    if (this.#options.isDoneAtHandover) {
      // Waiting here for the window and the statement idles the worker for about 2 ms per
      // message: on Postgres with 16 workers, six drains of 20,000 gave a median of 10,400 msg/s
      // waiting and 11,500 msg/s without the wait.
      this.#settlingCount += 1;
      void handedOver.settlements.then(this.#onHandedOverSettled);
    }
  }

  /** Resolves when every settlement handed over so far has ended. */
  async settled(): Promise<void> {
    while (this.#settlingCount > 0) await new Promise<void>((resolve) => this.#settledWaiters.push(resolve));
  }

  readonly #onHandedOverSettled = (): void => {
    this.#settlingCount -= 1;
    try {
      this.#options.onSettled();
    } finally {
      if (this.#settlingCount === 0) for (const resolve of this.#settledWaiters.splice(0)) resolve();
    }
  };

  /**
   * Hands back the rows of deliveries whose handlers did not finish in time: the row returns to
   * the queue now, and whatever the handler returns later is ignored.
   */
  async abandonAll(): Promise<void> {
    const rows = [...this.#inFlight];
    this.#inFlight.clear();
    await Promise.allSettled(
      rows.map(async (row) => {
        this.#abandoned.add(row);
        try {
          await row.handBack();
        } catch (error) {
          this.#options.onError(error, { subscription: this.#options.subscription, messageId: row.id, phase: 'hand back' });
        }
      }),
    );
  }

  /**
   * Reports `cancelled` for `row`, whose delivery started at `startedAt` (`performance.now()`,
   * as `#settleAll` has it): for a cancel of a message in work, once it settled as cancelled.
   * Nothing is built when nobody listens.
   */
  reportCancelled(row: HeldRow, startedAt: number): void {
    if (this.#options.events.listens('cancelled')) this.#options.events.emit('cancelled', this.#eventOf(row, startedAt));
  }

  #eventOf(row: HeldRow, startedAt: number): DeliveryEvent {
    return { queue: this.#options.subscription, id: row.id, attempt: row.attempt, durationMs: performance.now() - startedAt };
  }

  /**
   * Decodes, calls the handler and starts the settlements; `settlements` is their end, which
   * never rejects. `abort` is the delivery's own: a cancel or its timeout aborts it.
   */
  async #run(
    unit: DeliveryUnit,
    slot: number,
    abort: AbortController,
    startedAt: number,
  ): Promise<{ readonly settlements: Promise<void> }> {
    // Arrays of their own only when a row fails to decode: most units are one row that decodes.
    let rows: readonly HeldRow[] = unit;
    const messages: Message<unknown>[] = [];
    let decodeFailures: Promise<void>[] | undefined;
    for (const row of unit) {
      try {
        const message = this.#decode(row);
        messages.push(message instanceof Promise ? await message : message);
      } catch (error) {
        this.counters.decodeFailures += 1;
        rows = rows.filter((kept) => kept !== row);
        (decodeFailures ??= []).push(this.#settleAll([row], [this.#decodeFailureOutcome()], { thrown: error, phase: 'decode' }, undefined, startedAt));
      }
    }
    let settlements: Promise<void> | undefined;
    if (messages.length > 0) {
      const span = this.#options.observer.tracing?.startProcess(messages);
      const transaction = rows.length === 1 ? rows[0]!.transaction : undefined;
      const timeoutMs = this.#timeoutOf(messages);
      const { outcomes, failure } =
        timeoutMs === undefined
          ? await this.#callHandler(messages, slot, transaction, abort, span)
          : await this.#callWithTimeout({ rows, messages, slot, transaction, span }, abort, timeoutMs, startedAt);
      this.counters.handled += messages.length;
      this.#signals.handlerEnded.emit(rows);
      settlements = this.#settleAll(rows, outcomes, failure, span, startedAt);
    }
    // Every row either decoded, and is settled with the handler's outcome, or failed to.
    if (decodeFailures === undefined) return { settlements: settlements! };
    if (settlements !== undefined) decodeFailures.push(settlements);
    return { settlements: Promise.all(decodeFailures).then(() => undefined) };
  }

  /**
   * One outcome per message; a throw retries them all after the backoff of the first attempt,
   * and is kept as the failure a dead letter records. The handler's loan of the delivery's
   * transaction ends when it returns or throws.
   */
  async #callHandler(
    messages: Message<unknown>[],
    slot: number,
    transaction: DeliveryTransaction | undefined,
    abort: AbortController,
    span: ProcessSpan | undefined,
  ): Promise<HandlerResult> {
    const { subscription, isBatch, invoke, observer } = this.#options;
    let returned: unknown;
    const startedAt = observer.handlerStarting(messages);
    try {
      returned = await (span === undefined ? invoke(messages, slot, transaction, abort) : span.run(() => invoke(messages, slot, transaction, abort)));
    } catch (error) {
      span?.fail(error);
      if (!(abort.signal.reason instanceof CancelledError)) this.counters.handlerErrors += 1;
      return { outcomes: this.#backoffOutcomes(messages), failure: { thrown: error, phase: 'handler' } };
    } finally {
      observer.handlerEnded(startedAt);
      span?.end();
      transaction?.endLoan();
    }
    if (!isBatch || !Array.isArray(returned)) {
      const outcome = isOutcome(returned) ? returned : Outcome.ack();
      return this.#withUsableDelays(messages, messages.length === 1 ? [outcome] : messages.map(() => outcome));
    }
    if (returned.length !== messages.length && !this.#hasWarnedBatchLength) {
      this.#hasWarnedBatchLength = true;
      this.#options.onWarning(
        `subscription "${subscription}": a batch handler returned ${returned.length} outcomes for ${messages.length} messages; messages without an outcome are retried`,
      );
    }
    const outcomes = messages.map((_, index): Outcome => {
      if (index >= returned.length) return { kind: 'retry' };
      const outcome: unknown = returned[index];
      return isOutcome(outcome) ? outcome : Outcome.ack();
    });
    return this.#withUsableDelays(messages, outcomes);
  }

  /**
   * The unit's timeout: each message's own (`TIMEOUT_HEADER`) or else the subscription's, the
   * smallest of them for a batch; undefined when none applies. Handlers on worker threads have
   * no signal of their own to abort, so they run without one.
   */
  #timeoutOf(messages: readonly Message<unknown>[]): number | undefined {
    const { options, spec } = this.#options;
    if (options.onThreads !== undefined) return undefined;
    if (spec.headers === undefined) return options.timeoutMs;
    let unitMs: number | undefined;
    for (const message of messages) {
      const ms = timeoutOfHeaders(message.headers) ?? options.timeoutMs;
      if (ms !== undefined && (unitMs === undefined || ms < unitMs)) unitMs = ms;
    }
    return unitMs;
  }

  /**
   * Calls the handler; when `timeoutMs` passes, the delivery's signal aborts with a
   * `HandlerTimeoutError` and leases stop being renewed. A handler that returns within the grace
   * after it has its outcome settled as usual. One that has not is given up on: its messages
   * fail with the timeout error by the retry rules, a statement it still runs in the delivery's
   * transaction is cancelled, its worker goes on to other rows, and what it returns later is
   * ignored. A delivery cancelled before its timeout is given up on the same way, but it was
   * not timed out: it is neither counted nor reported so, and settles as cancelled.
   */
  async #callWithTimeout(
    call: {
      readonly rows: readonly HeldRow[];
      readonly messages: Message<unknown>[];
      readonly slot: number;
      readonly transaction: DeliveryTransaction | undefined;
      readonly span: ProcessSpan | undefined;
    },
    abort: AbortController,
    timeoutMs: number,
    startedAt: number,
  ): Promise<HandlerResult> {
    const { rows, messages, transaction } = call;
    let giveUp: (error: HandlerTimeoutError) => void = () => undefined;
    const givenUp = new Promise<HandlerTimeoutError>((resolve) => (giveUp = resolve));
    let graceTimer: NodeJS.Timeout | undefined;
    const timer = setTimeout(() => {
      const error = new HandlerTimeoutError({ id: rows[0]!.id, subscription: this.#options.subscription, timeoutMs });
      if (!abort.signal.aborted) {
        abort.abort(error);
        this.#timedOut(rows, timeoutMs, startedAt);
      }
      graceTimer = setTimeout(() => giveUp(error), timeoutGraceMs(timeoutMs));
    }, timeoutMs);
    const handled = this.#callHandler(messages, call.slot, transaction, abort, call.span);
    try {
      const ended = await Promise.race([handled, givenUp]);
      if (!(ended instanceof HandlerTimeoutError)) return ended;
      await this.#interrupt(transaction, rows);
      return { outcomes: this.#backoffOutcomes(messages), failure: { thrown: ended, phase: 'handler' } };
    } finally {
      clearTimeout(timer);
      clearTimeout(graceTimer);
    }
  }

  /** A handler given up on may still run a statement in its delivery's transaction: it is cancelled. */
  async #interrupt(transaction: DeliveryTransaction | undefined, rows: readonly HeldRow[]): Promise<void> {
    try {
      await transaction?.interrupt(this.#options.cancelRunningOn);
    } catch (error) {
      this.#options.onError(error, { subscription: this.#options.subscription, messageId: rows[0]!.id, phase: 'timeout' });
    }
  }

  /** The timeout passed: counted, leases left to run out, `timedOut` reported. */
  #timedOut(rows: readonly HeldRow[], timeoutMs: number, startedAt: number): void {
    this.counters.timedOut += rows.length;
    for (const row of rows) row.stopRenewing?.();
    const { events } = this.#options;
    if (!events.listens('timedOut')) return;
    const queue = this.#options.subscription;
    const durationMs = performance.now() - startedAt;
    for (const { id, attempt } of rows) events.emit('timedOut', { queue, id, attempt, durationMs, timeoutMs });
  }

  /**
   * `Outcome.retryAfter` refuses a delay no database stores, so the handler throws; an outcome
   * the handler built as an object literal gets the same treatment here: it counts as a handler
   * error, reported, and the messages are retried after the backoff.
   */
  #withUsableDelays(messages: Message<unknown>[], outcomes: Outcome[]): HandlerResult {
    const nowMs = Date.now();
    for (const outcome of outcomes) {
      const problem = outcome.kind === 'retryAfter' ? retryDelayProblem(outcome.delayMs, nowMs) : undefined;
      if (problem === undefined) continue;
      const error = new DeclarationError(`subscription "${this.#options.subscription}": the handler returned a retryAfter outcome, but ${problem}`);
      this.counters.handlerErrors += 1;
      return { outcomes: this.#backoffOutcomes(messages), failure: { thrown: error, phase: 'handler' } };
    }
    return { outcomes };
  }

  /** After a handler error: each message retried after the backoff of its attempt. */
  #backoffOutcomes(messages: Message<unknown>[]): Outcome[] {
    return messages.map((message): Outcome => ({ kind: 'retryAfter', delayMs: this.#backoffMs(message.attempt) }));
  }

  /** Synchronous unless a decoder or schema of the subscription's is asynchronous. */
  #decode(row: HeldRow): Message<unknown> | Promise<Message<unknown>> {
    const { spec, options } = this.#options;
    const values = row.row;
    const raw = spec.payload === undefined ? undefined : toBuffer(values[spec.payload]);
    if (raw === undefined) return this.#messageOf(row, values, undefined);
    const decode = options.decode;
    if (decode === undefined) return this.#messageOf(row, decodeJsonPayload(raw), raw);
    if (isStandardSchema(decode)) return validate(decode, decodeJsonPayload(raw)).then((payload) => this.#messageOf(row, payload, raw));
    return Promise.resolve(decode(raw, values)).then((payload) => this.#messageOf(row, payload, raw));
  }

  #messageOf(row: HeldRow, payload: unknown, raw: Buffer | undefined): Message<unknown> {
    const { spec } = this.#options;
    const values = row.row;
    const keyValue = spec.partitionKey === undefined ? null : values[spec.partitionKey];
    return {
      id: row.id,
      payload,
      raw,
      attempt: row.attempt,
      partitionKey: keyValue === null || keyValue === undefined ? null : String(keyValue),
      headers: spec.headers === undefined ? {} : readHeaders(values[spec.headers]),
      group: spec.group === undefined ? undefined : String(values[spec.group.column]),
      row: values,
    };
  }

  #decodeFailureOutcome(): Outcome {
    const policy = this.#options.options.onDecodeFailure;
    if (policy === 'drop') return { kind: 'drop' };
    if (policy === 'retry') return { kind: 'retry' };
    return { kind: 'retryAfter', delayMs: policy.retryAfterMs };
  }

  /** Exponential from `initialMs`, capped, with up to a quarter of jitter so retries spread. */
  #backoffMs(attempt: number): number {
    const base = backoffDelayMs(this.#options.options.retryBackoff, attempt);
    return Math.round(base * (0.75 + Math.random() * 0.25));
  }

  /**
   * Decides each row's settlement and starts it; the promise ends when every one has ended. After
   * a failure the settlements are decided first and the failure is reported with them, so the
   * report can say when each message comes back or where it went; when nothing failed, no report
   * is built.
   */
  #settleAll(
    rows: readonly HeldRow[],
    outcomes: readonly Outcome[],
    failure: Failure | undefined,
    span: ProcessSpan | undefined,
    startedAt: number,
  ): Promise<void> {
    if (rows.length === 1 && failure === undefined && !this.#cancelled.has(rows[0]!.id)) {
      const row = rows[0]!;
      const outcome = outcomes[0]!;
      return this.#settle(row, outcome, this.#settlementFor(row, outcome, undefined), span, undefined, startedAt);
    }
    const into: Promise<void>[] = [];
    if (this.#cancelled.size > 0 && rows.some((row) => this.#cancelled.has(row.id))) {
      // A cancelled message settles as cancelled whatever the handler returned or threw (most
      // throw the signal's reason), so neither counts nor reports as a failure of its own.
      const kept = rows.flatMap((row, index) => (this.#cancelled.has(row.id) ? [] : [{ row, outcome: outcomes[index]! }]));
      for (const row of rows) if (this.#cancelled.has(row.id)) into.push(this.#settleCancelled(row, span, startedAt));
      rows = kept.map((entry) => entry.row);
      outcomes = kept.map((entry) => entry.outcome);
    }
    const decided = rows.map((row, index) => this.#settlementFor(row, outcomes[index]!, failure));
    if (failure !== undefined && rows.length > 0) this.#reportFailure(failure, rows, decided);
    rows.forEach((row, index) => into.push(this.#settle(row, outcomes[index]!, decided[index]!, span, failure, startedAt)));
    return Promise.all(into).then(() => undefined);
  }

  #reportFailure(failure: Failure, rows: readonly HeldRow[], decided: readonly Settlement[]): void {
    const { subscription, onError, options } = this.#options;
    const nowMs = Date.now();
    let next: { at: Date; delayMs: number } | undefined;
    let deadLetter: DeadLetterTarget | undefined;
    const deadLetteredIds: string[] = [];
    let isDropped = false;
    decided.forEach((settlement, index) => {
      const row = rows[index]!;
      // A row handed back at stop comes back at once, whatever was decided for it.
      if (this.#abandoned.has(row)) return;
      if (settlement.kind === 'deadLetter') {
        deadLetter = settlement.target;
        deadLetteredIds.push(row.id);
      } else if (settlement.kind === 'finish') {
        isDropped = true;
      } else {
        const candidate = settlement.kind === 'retryAfter' ? { at: settlement.at, delayMs: settlement.delayMs } : { at: new Date(nowMs), delayMs: 0 };
        if (next === undefined || candidate.at < next.at) next = candidate;
      }
    });
    const detail: { -readonly [Key in keyof DeliveryFailureDetail]: DeliveryFailureDetail[Key] } = {
      subscription,
      messageId: rows.map((row) => row.id).join(','),
      phase: failure.phase,
    };
    if (rows.length === 1) detail.attempt = rows[0]!.attempt;
    if (options.maxAttempts !== undefined) detail.maxAttempts = options.maxAttempts;
    if (next !== undefined) {
      detail.nextAttemptAt = next.at;
      detail.retryDelayMs = next.delayMs;
    }
    if (deadLetter !== undefined) {
      detail.deadLetter = deadLetterDestination(deadLetter);
      if (rows.length > 1) detail.deadLetteredIds = deadLetteredIds.join(',');
    }
    if (isDropped) detail.dropped = true;
    onError(failure.thrown, detail);
  }

  /**
   * Removes a cancelled message: finished (deleted, or marked processed) without the handler's
   * writes. A lease row is already gone (the canceller removed it), so its fenced finish finds
   * nothing, which is the cancel taking effect rather than a lost lease.
   */
  async #settleCancelled(row: HeldRow, span: ProcessSpan | undefined, startedAt: number): Promise<void> {
    this.#deliveryAborts.delete(row.id);
    if (this.#abandoned.has(row)) return;
    this.#inFlight.delete(row);
    const { observer } = this.#options;
    const settlement: Settlement = { kind: 'finish' };
    try {
      const tracing = observer.tracing;
      await (tracing === undefined ? row.settle(settlement) : tracing.settle(span, row.id, 'cancelled', () => row.settle(settlement)));
    } catch (error) {
      if (!(error instanceof LeaseLostError)) {
        observer.settled('failed');
        this.counters.settleErrors += 1;
        this.#options.onError(error, { subscription: this.#options.subscription, messageId: row.id, phase: 'settle' });
        this.#signals.settled.emit(row.id);
        return;
      }
    } finally {
      this.#cancelled.delete(row.id);
    }
    this.#countCancelled(row, startedAt);
  }

  #countCancelled(row: HeldRow, startedAt: number): void {
    this.counters.cancelled += 1;
    this.#options.observer.settled('cancelled');
    this.#options.cancellations.settledAsCancelled(row.id);
    this.reportCancelled(row, startedAt);
    this.#signals.settled.emit(row.id);
  }

  async #settle(
    row: HeldRow,
    outcome: Outcome,
    settlement: Settlement,
    span: ProcessSpan | undefined,
    failure: Failure | undefined,
    startedAt: number,
  ): Promise<void> {
    this.#deliveryAborts.delete(row.id);
    if (this.#abandoned.has(row)) return;
    // The settlement owns the row from here: a stop that gives up on handlers hands back only
    // rows no settlement has begun for (a handler whose query stop cancelled settles at once).
    this.#inFlight.delete(row);
    const { observer } = this.#options;
    const settled = settledOutcome(settlement, outcome);
    try {
      const tracing = observer.tracing;
      await (tracing === undefined ? row.settle(settlement) : tracing.settle(span, row.id, settled, () => row.settle(settlement)));
      this.#count(settlement, outcome);
      observer.settled(settled);
      this.#emitSettled(row, settled as SettledEventOutcome, settlement, failure, startedAt);
      this.#signals.settled.emit(row.id);
    } catch (error) {
      // The canceller removed the row while the handler ran and before this broker heard of it.
      if (error instanceof LeaseLostError && (await this.#options.cancellations.wasCancelled(row.id))) {
        this.#countCancelled(row, startedAt);
        return;
      }
      observer.settled(error instanceof LeaseLostError ? 'leaseLost' : 'failed');
      if (error instanceof LeaseLostError && this.#options.events.listens('leaseLost')) {
        this.#options.events.emit('leaseLost', this.#eventOf(row, startedAt));
      }
      this.counters.settleErrors += 1;
      this.#options.onError(error, { subscription: this.#options.subscription, messageId: row.id, phase: 'settle' });
      this.#signals.settled.emit(row.id);
    }
  }

  /** `settled`, and `retrying` or `deadLettered` as the settlement was, to whoever listens. */
  #emitSettled(row: HeldRow, outcome: SettledEventOutcome, settlement: Settlement, failure: Failure | undefined, startedAt: number): void {
    const { events } = this.#options;
    const kindEvent = settlement.kind === 'deadLetter' ? 'deadLettered' : settlement.kind === 'finish' ? undefined : 'retrying';
    const wantsSettled = events.listens('settled');
    const wantsKind = kindEvent !== undefined && events.listens(kindEvent);
    if (!wantsSettled && !wantsKind) return;
    // Each event is built as one literal with its fields set after: spreading a shared part into
    // it cost 30 times as much (bench/events: 1.8 µs against 63 ns of CPU per event).
    const queue = this.#options.subscription;
    const { id, attempt } = row;
    const durationMs = performance.now() - startedAt;
    const nextAttemptAt = settlement.kind === 'retryAfter' ? settlement.at : settlement.kind === 'retry' ? new Date() : undefined;
    if (wantsSettled) {
      const event: Mutable<SettledEvent> = { queue, id, attempt, durationMs, outcome };
      if (nextAttemptAt !== undefined) event.nextAttemptAt = nextAttemptAt;
      if (failure !== undefined) event.error = failure.thrown;
      events.emit('settled', event);
    }
    if (!wantsKind) return;
    if (settlement.kind === 'deadLetter') {
      const event: Mutable<DeadLetteredEvent> = { queue, id, attempt, durationMs, deadLetter: deadLetterDestination(settlement.target) };
      if (failure !== undefined) event.error = failure.thrown;
      events.emit('deadLettered', event);
    } else if (nextAttemptAt !== undefined) {
      const event: Mutable<RetryingEvent> = { queue, id, attempt, durationMs, nextAttemptAt };
      if (failure !== undefined) event.error = failure.thrown;
      events.emit('retrying', event);
    }
  }

  #settlementFor(row: HeldRow, outcome: Outcome, failure: Failure | undefined): Settlement {
    if (outcome.kind === 'ack') return FINISH_ACKED;
    if (outcome.kind === 'drop') return FINISH_DROPPED;
    const { maxAttempts } = this.#options.options;
    const target = this.#options.deadLetter;
    if (maxAttempts !== undefined && target !== undefined && row.attempt >= maxAttempts) {
      if (failure !== undefined) return { kind: 'deadLetter', target, lastError: boundLastError(describeThrown(failure.thrown)) };
      const requested = describeRetryRequested(outcome.kind, row.attempt, maxAttempts);
      // A failure reports its move with the error; a retry the handler asked for has no error to report.
      this.#options.onWarning(
        `subscription "${this.#options.subscription}": message ${row.id} had no attempt left (${requested}) and moved to ${describeDestination(target)}`,
      );
      return { kind: 'deadLetter', target, lastError: boundLastError(requested) };
    }
    if (outcome.kind === 'retry') return { kind: 'retry' };
    if (this.#options.spec.retryAfter === undefined) {
      if (!this.#hasWarnedRetryAfter) {
        this.#hasWarnedRetryAfter = true;
        this.#options.onWarning(
          `subscription "${this.#options.subscription}": table "${this.#options.spec.qualifiedName}" has no retryAfter column, so delayed retries go back to the queue at once; add the column to delay them`,
        );
      }
      return { kind: 'retry' };
    }
    return { kind: 'retryAfter', at: new Date(Date.now() + outcome.delayMs), delayMs: outcome.delayMs };
  }

  #count(settlement: Settlement, outcome: Outcome): void {
    if (settlement.kind === 'deadLetter') this.counters.deadLettered += 1;
    else if (outcome.kind === 'ack') this.counters.acked += 1;
    else if (outcome.kind === 'drop') this.counters.dropped += 1;
    else this.counters.retried += 1;
  }
}

function deadLetterDestination(target: DeadLetterTarget): { readonly group: string } | { readonly table: string } {
  if (target.kind === 'group') return { group: target.group };
  return { table: target.schema === undefined ? target.name : `${target.schema}.${target.name}` };
}

/** `dead-letter group "failed"` or `dead-letter table "jobs_dead"`. */
export function describeDestination(target: DeadLetterTarget): string {
  const destination = deadLetterDestination(target);
  return 'group' in destination ? `dead-letter group "${destination.group}"` : `dead-letter table "${destination.table}"`;
}

/** An ack's and a drop's settlements, shared rather than built for each delivery. */
const FINISH_ACKED: Settlement = Object.freeze({ kind: 'finish', commitsHandlerWrites: true });
const FINISH_DROPPED: Settlement = Object.freeze({ kind: 'finish', commitsHandlerWrites: false });

function settledOutcome(settlement: Settlement, outcome: Outcome): SettledOutcome {
  if (settlement.kind === 'finish') return outcome.kind === 'drop' ? 'drop' : 'ack';
  return settlement.kind;
}

function toBuffer(value: unknown): Buffer {
  if (Buffer.isBuffer(value)) return value;
  if (value instanceof Uint8Array) return Buffer.from(value.buffer, value.byteOffset, value.byteLength);
  if (typeof value === 'string') return Buffer.from(value, 'utf8');
  // A column of the database's JSON type, which the driver hands over parsed (pg for json, mysql2
  // for MySQL's JSON): its JSON again. Refused as "not bytes", every such message was dropped.
  if (typeof value === 'object' && value !== null) return Buffer.from(JSON.stringify(value), 'utf8');
  throw new DecodeError(`payload column holds ${value === null ? 'NULL' : typeof value}, not bytes`);
}

function readHeaders(value: unknown): Record<string, string> {
  try {
    return decodeHeaders(value);
  } catch (error) {
    throw error instanceof DecodeError ? error : new DecodeError('headers column is not valid JSON', { cause: error });
  }
}

async function validate(
  schema: Extract<ResolvedSubscribeOptions['decode'], { '~standard': unknown }>,
  value: unknown,
): Promise<unknown> {
  const result = await schema['~standard'].validate(value);
  if (result.issues) {
    const detail = result.issues.map((issue) => issue.message).join('; ');
    throw new DecodeError(`payload does not match its schema: ${detail}`);
  }
  return result.value;
}

type Mutable<Event> = { -readonly [Key in keyof Event]: Event[Key] };
