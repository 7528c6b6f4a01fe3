/**
 * The lifecycle events a broker emits about its deliveries (`broker.on('settled', …)`): what each
 * carries, and the sink a subscription reports them to. The broker implements the sink and
 * answers `listens` from its listener count, so a subscription builds no event nobody hears.
 */

/** What every lifecycle event says about the message it concerns. */
export interface DeliveryEvent {
  /** The queue's label: the table's qualified name, then `/group` on a grouped table. */
  readonly queue: string;
  readonly id: string;
  /** The attempt this delivery was, 1 on the first. */
  readonly attempt: number;
  /** Milliseconds from the start of the delivery (before its decode) to the event. */
  readonly durationMs: number;
}

/** How a settlement left the row. */
export type SettledEventOutcome = 'ack' | 'drop' | 'retry' | 'retryAfter' | 'deadLetter';

/** A settlement was written: every outcome, including retries and dead letters. */
export interface SettledEvent extends DeliveryEvent {
  readonly outcome: SettledEventOutcome;
  /** A retry: when the message can be claimed again (now for `retry`, or on a table without a retryAfter column). */
  readonly nextAttemptAt?: Date;
  /** What the handler threw (or the decode, or a `HandlerTimeoutError`) when the outcome stands for a failure. */
  readonly error?: unknown;
}

/** A message goes back to the queue for another attempt (emitted with its `settled`). */
export interface RetryingEvent extends DeliveryEvent {
  readonly nextAttemptAt: Date;
  /** The failure that retries it; none when the handler asked for the retry. */
  readonly error?: unknown;
}

/** A message had no attempt left and moved to its dead letter (emitted with its `settled`). */
export interface DeadLetteredEvent extends DeliveryEvent {
  readonly deadLetter: { readonly group: string } | { readonly table: string };
  readonly error?: unknown;
}

/** The handler ran past its timeout: its signal was aborted just now. */
export interface TimedOutEvent extends DeliveryEvent {
  readonly timeoutMs: number;
}

/** The message's lease was found taken or gone (lease form): another claim may run it. */
export type LeaseLostEvent = DeliveryEvent;

/** The message was cancelled while a handler ran it. */
export type CancelledEvent = DeliveryEvent;

/** Each lifecycle event's name and the arguments its listeners get, as `EventEmitter` types them. */
export interface LifecycleEvents {
  settled: [event: SettledEvent];
  retrying: [event: RetryingEvent];
  deadLettered: [event: DeadLetteredEvent];
  timedOut: [event: TimedOutEvent];
  leaseLost: [event: LeaseLostEvent];
  cancelled: [event: CancelledEvent];
}

export type LifecycleEventName = keyof LifecycleEvents;

/** Where a subscription reports lifecycle events. */
export interface LifecycleEventSink {
  /** Whether anyone listens to `name`: without a listener the event is not built. */
  listens(name: LifecycleEventName): boolean;
  emit<Name extends LifecycleEventName>(name: Name, event: LifecycleEvents[Name][0]): void;
}

