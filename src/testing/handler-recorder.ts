import { isDeepStrictEqual } from 'node:util';
import type { Queue } from '../definition/define-table.js';
import type { Message } from '../delivery/message.js';
import type { Outcome } from '../delivery/outcome.js';
import type { QueueError } from '../errors.js';
import type { DeadLetteredEvent, SettledEventOutcome } from '../subscription/lifecycle-events.js';
import { assertThat, counted, describeValue, summarized, type ExpectationWaits, type WaitOptions } from './expectation-waits.js';

/** One call of a recorded handler: one message, or a batch's messages. */
export interface RecordedCall<Payload> {
  /** The first (on a single delivery, the only) message. */
  readonly message: Message<Payload>;
  readonly payload: Payload;
  /** Every message of the call: one, or a batch. */
  readonly messages: readonly Message<Payload>[];
  readonly payloads: readonly Payload[];
  /** How many messages the call received. */
  readonly batchSize: number;
  /** What the handler returned (undefined: an ack), once it has; absent while it runs or when it threw. */
  readonly returned?: Outcome | readonly Outcome[] | undefined;
  /** What the handler threw, when it threw. */
  readonly threw?: unknown;
}

/** How one message's delivery ended, as the broker's lifecycle events told it. */
export type RecordedOutcome = SettledEventOutcome | 'cancelled';

export interface RecordedSettlement {
  readonly id: string;
  readonly attempt: number;
  readonly outcome: RecordedOutcome;
  /** What the handler threw, what the decode threw, or the `HandlerTimeoutError`, when the outcome stands for a failure. */
  readonly error?: unknown;
  /** The payload did not decode, so the handler never saw this message: the outcome is `onDecodeFailure`'s. */
  readonly decodeFailed: boolean;
  /** A retry: when the message may be claimed again. */
  readonly nextAttemptAt?: Date;
  /** A dead letter: the group or table it moved to. */
  readonly deadLetter?: DeadLetteredEvent['deadLetter'];
}

/** Which settlements a wait or an assertion counts. */
export interface SettlementFilter {
  readonly outcome?: RecordedOutcome;
  readonly id?: string;
}

/** What the test broker feeds a recorder (not part of the recorder's public face). */
export interface RecorderFeed<Payload> {
  callStarted(messages: readonly Message<Payload>[]): RecordedCallEntry<Payload>;
  settled(settlement: RecordedSettlement): void;
  reportError(error: QueueError, detail: Readonly<Record<string, unknown>>): void;
  timedOut(id: string): void;
  /** Emitted right after the dead letter's `settled`: says where it went. */
  deadLettered(id: string, attempt: number, deadLetter: DeadLetteredEvent['deadLetter']): void;
}

/** A call whose end is filled in when the handler returns or throws. */
export interface RecordedCallEntry<Payload> {
  returned(value: unknown): void;
  threw(error: unknown): void;
  readonly call: RecordedCall<Payload>;
}

/** What the recorder asks the test broker for. */
export interface RecorderHost {
  readonly waits: ExpectationWaits;
  readonly timeoutMs: number;
  /** Starts the broker if it has not started, so that a wait can be met. */
  ensureStarted(): Promise<void>;
  /** Resolves after a claim of the queue that began after this call came back empty with nothing in work. */
  untilIdle(queue: Queue<unknown>, where: string, timeoutMs: number): Promise<void>;
  /** The broker's errors and warnings, for failure messages. */
  describeProblems(): string;
}

/**
 * What `TestBroker.record` returns: the handler's calls and each message's settlement as they
 * happen, waits that resolve on them, and assertions that throw `AssertionError`s.
 */
export class HandlerRecorder<Payload = unknown> {
  readonly queue: Queue<Payload>;
  readonly #host: RecorderHost;
  readonly #calls: RecordedCall<Payload>[] = [];
  readonly #settlements: RecordedSettlement[] = [];
  readonly #errors: QueueError[] = [];
  readonly #decodeFailedIds = new Set<string>();
  readonly #timedOutIds: string[] = [];
  /** For the test broker: where the subscription's handler and events report. */
  readonly feed: RecorderFeed<Payload>;

  constructor(queue: Queue<Payload>, host: RecorderHost) {
    this.queue = queue;
    this.#host = host;
    this.feed = {
      callStarted: (messages) => this.#callStarted(messages),
      settled: (settlement) => {
        const decodeFailed = this.#decodeFailedIds.delete(settlement.id);
        this.#settlements.push(decodeFailed ? { ...settlement, decodeFailed } : settlement);
        host.waits.changed();
      },
      reportError: (error, detail) => {
        this.#errors.push(error);
        // Reported before the settlement is written, so the settlement's event finds it.
        if (detail['phase'] === 'decode' && typeof detail['messageId'] === 'string') this.#decodeFailedIds.add(detail['messageId']);
        host.waits.changed();
      },
      timedOut: (id) => {
        this.#timedOutIds.push(id);
        host.waits.changed();
      },
      deadLettered: (id, attempt, deadLetter) => {
        // In place: a wait for the dead letter already resolved with this settlement.
        const settlement = this.#settlements.findLast((candidate) => candidate.id === id && candidate.attempt === attempt);
        if (settlement !== undefined) (settlement as { deadLetter?: DeadLetteredEvent['deadLetter'] }).deadLetter = deadLetter;
      },
    };
  }

  /** Every call of the handler so far, in the order they began. */
  get calls(): readonly RecordedCall<Payload>[] {
    return this.#calls;
  }

  /** Every message the handler received, calls flattened. */
  get messages(): readonly Message<Payload>[] {
    return this.#calls.flatMap((call) => call.messages);
  }

  /** Every payload the handler received, calls flattened. */
  get payloads(): readonly Payload[] {
    return this.#calls.flatMap((call) => call.payloads);
  }

  /** The number of messages in each call (1 each without `batch`). */
  get batchSizes(): readonly number[] {
    return this.#calls.map((call) => call.batchSize);
  }

  /** Every settlement so far, one per message delivery, in the order they were written. */
  get settlements(): readonly RecordedSettlement[] {
    return this.#settlements;
  }

  /** The settlements' outcomes, in order: 'ack', 'retry', 'retryAfter', 'drop', 'deadLetter' or 'cancelled'. */
  get outcomes(): readonly RecordedOutcome[] {
    return this.#settlements.map((settlement) => settlement.outcome);
  }

  /** The settlements of messages whose payload did not decode. */
  get decodeFailures(): readonly RecordedSettlement[] {
    return this.#settlements.filter((settlement) => settlement.decodeFailed);
  }

  /** The broker's `error` events about this queue: handler throws, decode failures, failed settlements. */
  get errors(): readonly QueueError[] {
    return this.#errors;
  }

  /** Ids of messages whose handler ran past its `timeoutMs`. */
  get timedOut(): readonly string[] {
    return this.#timedOutIds;
  }

  /** Resolves with the calls once the handler was called at least `count` times (default 1). */
  async waitForCalls(count = 1, options: WaitOptions = {}): Promise<readonly RecordedCall<Payload>[]> {
    await this.#host.ensureStarted();
    return this.#host.waits.until(
      'waitForCalls',
      `${counted(count, 'call')} of the handler of "${this.queue.label}"`,
      () => (this.#calls.length >= count ? this.#calls.slice() : undefined),
      () => this.#describe(),
      options.timeoutMs ?? this.#host.timeoutMs,
    );
  }

  /**
   * Resolves with the matching settlements once at least `count` (default 1) were written: of
   * any outcome, or of `outcome`, or of the message `id`.
   */
  async waitForSettled(options: SettlementFilter & WaitOptions & { readonly count?: number } = {}): Promise<readonly RecordedSettlement[]> {
    await this.#host.ensureStarted();
    const count = options.count ?? 1;
    return this.#host.waits.until(
      'waitForSettled',
      `${counted(count, 'settlement')}${describeFilter(options)} of "${this.queue.label}"`,
      () => {
        const matching = this.#matching(options);
        return matching.length >= count ? matching : undefined;
      },
      () => this.#describe(),
      options.timeoutMs ?? this.#host.timeoutMs,
    );
  }

  /** Resolves with the settlements of messages that did not decode, once there are `count` (default 1). */
  async waitForDecodeFailures(count = 1, options: WaitOptions = {}): Promise<readonly RecordedSettlement[]> {
    await this.#host.ensureStarted();
    return this.#host.waits.until(
      'waitForDecodeFailures',
      `${counted(count, 'decode failure')} of "${this.queue.label}"`,
      () => {
        const failures = this.decodeFailures;
        return failures.length >= count ? failures : undefined;
      },
      () => this.#describe(),
      options.timeoutMs ?? this.#host.timeoutMs,
    );
  }

  /**
   * Resolves once a claim of this queue that began after the call found nothing due while
   * nothing was in work: everything published before has been handled and settled (a retry due
   * later stays for later). To assert that something did not happen, without a sleep.
   */
  async waitForIdle(options: WaitOptions = {}): Promise<void> {
    await this.#host.ensureStarted();
    await this.#host.untilIdle(this.queue as Queue<unknown>, 'waitForIdle', options.timeoutMs ?? this.#host.timeoutMs);
  }

  /** Throws unless the handler was called exactly `count` times. */
  assertCalledTimes(count: number): void {
    assertThat(
      this.#calls.length === count,
      `expected the handler of "${this.queue.label}" to be called ${counted(count, 'time')}; saw ${this.#describe()}`,
      this.#calls.length,
      count,
      'assertCalledTimes',
    );
  }

  /** Throws unless some message the handler received carried a payload deeply equal to `payload`. */
  assertCalledWith(payload: Payload): void {
    const payloads = this.payloads;
    assertThat(
      payloads.some((received) => isDeepStrictEqual(received, payload)),
      `expected the handler of "${this.queue.label}" to receive ${describeValue(payload)}; it received ${payloads.length === 0 ? 'nothing' : summarized(payloads, describeValue, () => 'payloads')}`,
      payloads,
      [payload],
      'assertCalledWith',
    );
  }

  /** Throws unless exactly `count` (default 1) settlements match `outcome` (and `id`, when given). */
  assertSettled(outcome: RecordedOutcome, options: { readonly count?: number; readonly id?: string } = {}): void {
    const count = options.count ?? 1;
    const matching = this.#matching({ outcome, id: options.id });
    assertThat(
      matching.length === count,
      `expected ${counted(count, 'settlement')}${describeFilter({ outcome, id: options.id })} of "${this.queue.label}"; saw ${this.#describe()}`,
      this.outcomes,
      outcome,
      'assertSettled',
    );
  }

  #callStarted(messages: readonly Message<Payload>[]): RecordedCallEntry<Payload> {
    const first = messages[0]!;
    const call: { -readonly [Key in keyof RecordedCall<Payload>]: RecordedCall<Payload>[Key] } = {
      message: first,
      payload: first.payload,
      messages,
      payloads: messages.map((message) => message.payload),
      batchSize: messages.length,
    };
    this.#calls.push(call);
    this.#host.waits.changed();
    return {
      call,
      returned: (value) => {
        call.returned = value as Outcome | Outcome[] | undefined;
      },
      threw: (error) => {
        call.threw = error;
      },
    };
  }

  #matching(filter: SettlementFilter): RecordedSettlement[] {
    return this.#settlements.filter(
      (settlement) => (filter.outcome === undefined || settlement.outcome === filter.outcome) && (filter.id === undefined || settlement.id === filter.id),
    );
  }

  /** What was recorded, for failure messages: calls, settlements one by one, then the broker's problems. */
  #describe(): string {
    const settlements =
      this.#settlements.length === 0
        ? 'no settlement'
        : `${counted(this.#settlements.length, 'settlement')} (${summarized(this.#settlements, describeSettlement, (settlement) => settlement.outcome)})`;
    return `${counted(this.#calls.length, 'call')} and ${settlements}${this.#host.describeProblems()}`;
  }
}

function describeFilter(filter: SettlementFilter): string {
  const parts = [filter.outcome === undefined ? undefined : `as ${filter.outcome}`, filter.id === undefined ? undefined : `of message ${filter.id}`];
  const text = parts.filter((part) => part !== undefined).join(' ');
  return text === '' ? '' : ` ${text}`;
}

function describeSettlement(settlement: RecordedSettlement): string {
  const error = settlement.error === undefined ? '' : `: ${settlement.error instanceof Error ? settlement.error.message : String(settlement.error)}`;
  return `message ${settlement.id} attempt ${settlement.attempt} ${settlement.decodeFailed ? 'not decoded, ' : ''}${settlement.outcome}${error}`;
}
