/**
 * The error catalogue. Every error tablequeue throws or emits is a `QueueError`; the subclass
 * says what the caller should do, and `code` is a stable string to branch on.
 */

export type ErrorCode =
  | 'DECLARATION'
  | 'SCHEMA'
  | 'UNSUPPORTED'
  | 'SERVER_VERSION'
  | 'DIALECT_VERSION'
  | 'CONNECTION_BUDGET'
  | 'POOL_EXHAUSTED'
  | 'ALREADY_SUBSCRIBED'
  | 'NO_ROUTE'
  | 'LEASE_LOST'
  | 'CANCELLED'
  | 'BATCH_ROLLED_BACK'
  | 'TRANSACTION_ENDED'
  | 'DEDUPE_CONTENDED'
  | 'STATEMENT'
  | 'CONNECTION'
  | 'CLOSED'
  | 'DECODE'
  | 'ENCODE'
  | 'DESTINATION'
  | 'HANDLER'
  | 'HANDLER_TIMEOUT'
  | 'INTERNAL';

export class QueueError extends Error {
  readonly code: ErrorCode;

  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.name = new.target.name;
  }
}

/** Fix the code: a table, subscription or broker declaration is invalid. */
export class DeclarationError extends QueueError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('DECLARATION', message, options);
  }
}

/**
 * Retry the publish, or look for what else writes the key: a keyed publish met a key that changed
 * hands on every one of its rounds, and wrote nothing.
 */
export class DedupeContendedError extends QueueError {
  readonly dedupeKey: string;

  constructor(details: { dedupeKey: string; message: string; cause?: unknown }) {
    super('DEDUPE_CONTENDED', details.message, { cause: details.cause });
    this.dedupeKey = details.dedupeKey;
  }
}

/** Fix the database: a table or column the statements need is missing. */
export class SchemaError extends QueueError {
  readonly table: string;
  readonly statement: string;

  constructor(details: { table: string; statement: string; message: string; cause?: unknown }) {
    super('SCHEMA', details.message, { cause: details.cause });
    this.table = details.table;
    this.statement = details.statement;
  }
}

/** This database cannot do what was asked: pick another form or feature. */
export class UnsupportedError extends QueueError {
  readonly database: string;
  readonly feature: string;

  constructor(details: { database: string; feature: string; message: string }) {
    super('UNSUPPORTED', details.message);
    this.database = details.database;
    this.feature = details.feature;
  }
}

/** The server is older than the floor tablequeue needs. */
export class ServerVersionError extends QueueError {
  readonly found: string;
  readonly required: string;

  constructor(details: { found: string; required: string; message: string }) {
    super('SERVER_VERSION', details.message);
    this.found = details.found;
    this.required = details.required;
  }
}

/**
 * Fix the dialect: a service's own dialect was written for another version of the `Dialect`
 * interface than this tablequeue implements (`DIALECT_INTERFACE_VERSION`).
 */
export class DialectVersionError extends QueueError {
  /** The dialect's `label`. */
  readonly dialect: string;
  /** The `interfaceVersion` it declares, as given. */
  readonly found: unknown;
  readonly required: number;

  constructor(details: { dialect: string; found: unknown; required: number; message: string }) {
    super('DIALECT_VERSION', details.message);
    this.dialect = details.dialect;
    this.found = details.found;
    this.required = details.required;
  }
}

/** The connections asked for exceed what the pool or the database allows. */
export class ConnectionBudgetError extends QueueError {
  constructor(message: string) {
    super('CONNECTION_BUDGET', message);
  }
}

/**
 * No connection of the pool became free in time (`acquireTimeoutMs`): the pool is too small for
 * what holds its connections, or something holds them far longer than it should.
 */
export class PoolExhaustedError extends QueueError {
  constructor(message: string) {
    super('POOL_EXHAUSTED', message);
  }
}

/** A queue already has a subscription on this broker: scale it with `workers` instead. */
export class AlreadySubscribedError extends QueueError {
  constructor(message: string) {
    super('ALREADY_SUBSCRIBED', message);
  }
}

/**
 * No route matches a message name (`publishTo`, `subscribeTo`): fix the name, or declare a route
 * for it with `broker.route(name, queue)`. `closest` holds the declared route names nearest to
 * it (a few at most, nearest first), which the message names too.
 */
export class NoRouteError extends QueueError {
  readonly routeName: string;
  readonly closest: readonly string[];

  constructor(details: { routeName: string; closest: readonly string[]; message: string }) {
    super('NO_ROUTE', details.message);
    this.routeName = details.routeName;
    this.closest = details.closest;
  }
}

/** A lease settlement or renewal found the lease taken by someone else: the row is no longer ours. */
export class LeaseLostError extends QueueError {
  readonly id: string;
  readonly subscription: string;

  constructor(details: { id: string; subscription: string }) {
    super(
      'LEASE_LOST',
      `the lease on row ${details.id} of subscription "${details.subscription}" expired and was taken or settled elsewhere; ` +
        'nothing was changed (raise leaseMs if handlers run this long)',
    );
    this.id = details.id;
    this.subscription = details.subscription;
  }
}

/**
 * A handler ran past its `timeoutMs` (the subscription's, or the message's `tablequeue-timeout-ms`
 * header): the reason `context.signal` aborts with, and the last error a dead letter records when
 * the handler had not returned within the grace after it.
 */
export class HandlerTimeoutError extends QueueError {
  /** The first message of the delivery (its only one unless a batch). */
  readonly id: string;
  readonly subscription: string;
  readonly timeoutMs: number;

  constructor(details: { id: string; subscription: string; timeoutMs: number }) {
    super(
      'HANDLER_TIMEOUT',
      `the handler of message ${details.id} of subscription "${details.subscription}" ran past its timeout of ${details.timeoutMs} ms; ` +
        'stop work when context.signal aborts, or raise timeoutMs',
    );
    this.id = details.id;
    this.subscription = details.subscription;
    this.timeoutMs = details.timeoutMs;
  }
}

/**
 * The reason a handler's `context.signal` aborts when its message was cancelled
 * (`broker.cancel`, `tablequeue cancel`): stop the work; whatever the handler returns, the
 * message is settled as cancelled and never retried.
 */
export class CancelledError extends QueueError {
  readonly id: string;
  readonly subscription: string;

  constructor(details: { id: string; subscription: string }) {
    super(
      'CANCELLED',
      `message ${details.id} of subscription "${details.subscription}" was cancelled; stop its work, since the message is removed whatever the handler returns`,
    );
    this.id = details.id;
    this.subscription = details.subscription;
  }
}

/**
 * Row lock form: another settlement of the same batch failed, so the batch's one transaction
 * rolled back and this row's settlement never took effect. The row returns to the queue as it
 * was before the claim; nothing needs undoing.
 */
export class BatchRolledBackError extends QueueError {
  readonly id: string;
  readonly subscription: string;

  constructor(details: { id: string; subscription: string; cause: unknown }) {
    super(
      'BATCH_ROLLED_BACK',
      `the settlement of row ${details.id} of subscription "${details.subscription}" was rolled back with its batch, ` +
        'because another settlement of the batch failed (see the cause); the rows return to the queue unchanged',
      { cause: details.cause },
    );
    this.id = details.id;
    this.subscription = details.subscription;
  }
}

/** `context.tx` was used after its delivery's handler returned, when its transaction had ended. */
export class TransactionEndedError extends QueueError {
  readonly id: string;

  constructor(details: { id: string }) {
    super(
      'TRANSACTION_ENDED',
      `context.tx of message ${details.id} was used after its handler returned, when the transaction had ended; ` +
        'await every query on context.tx before the handler returns',
    );
    this.id = details.id;
  }
}

/**
 * A statement failed in the driver, keeping the server's error fields (SQLSTATE or errno), or a
 * dialect could not render it (`database` is then the dialect's label). The statement's
 * parameters never appear in the message.
 */
export class StatementError extends QueueError {
  readonly statement: string;
  readonly database: string;
  /** Postgres SQLSTATE, MySQL SQLSTATE, or the SQLite result code name. */
  readonly sqlState: string | undefined;
  /** MySQL/MariaDB errno. */
  readonly errno: number | undefined;

  constructor(details: {
    statement: string;
    database: string;
    sqlState?: string | undefined;
    errno?: number | undefined;
    cause: unknown;
    /** Replaces the message built from the cause. */
    message?: string | undefined;
  }) {
    const reason = details.cause instanceof Error ? details.cause.message : String(details.cause);
    super('STATEMENT', details.message ?? `statement "${details.statement}" failed on ${details.database}: ${reason}`, {
      cause: details.cause,
    });
    this.statement = details.statement;
    this.database = details.database;
    this.sqlState = details.sqlState;
    this.errno = details.errno;
  }
}

/** The database, or the server of an outbox destination, could not be reached. */
export class ConnectionError extends QueueError {
  readonly host: string;

  constructor(details: { host: string; message: string; cause?: unknown }) {
    super('CONNECTION', details.message, { cause: details.cause });
    this.host = details.host;
  }
}

/** The broker is stopped (or stopping) and takes no more work. */
export class ClosedError extends QueueError {
  constructor(message = 'the broker is stopped; start it again or use another broker') {
    super('CLOSED', message);
  }
}

/** A payload could not be decoded; the subscription's `onDecodeFailure` policy settles the row. */
export class DecodeError extends QueueError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('DECODE', message, options);
  }
}

/** A payload could not be encoded; nothing was written. */
export class EncodeError extends QueueError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('ENCODE', message, options);
  }
}

/**
 * An outbox destination refused records or cannot take them as configured (no stream for the
 * subject, no exchange, a nack, no queue bound): fix the destination; the records stay unsent.
 */
export class DestinationError extends QueueError {
  /** The destination's description: `nats jetstream at …`, `rabbitmq exchange "…" at …`. */
  readonly destination: string;

  constructor(details: { destination: string; message: string; cause?: unknown }) {
    super('DESTINATION', details.message, { cause: details.cause });
    this.destination = details.destination;
  }
}

/**
 * A handler threw or rejected: `cause` is exactly what it threw, which may be any value. The
 * message is the thrown error's own (or the thrown value as text), so the report reads as the
 * handler's; the delivery is retried after the backoff, or dead-lettered at `maxAttempts`.
 */
export class HandlerError extends QueueError {
  /** The subscription's queue, `table/group`. */
  readonly subscription: string;
  /** The message the handler was given, or every message of its batch. */
  readonly messageIds: readonly string[];

  constructor(details: { subscription: string; messageIds: readonly string[]; cause: unknown }) {
    super('HANDLER', messageOf(details.cause), { cause: details.cause });
    this.subscription = details.subscription;
    this.messageIds = Object.freeze([...details.messageIds]);
  }
}

/**
 * An error from outside this catalogue reached a report: a fault in tablequeue or in a library
 * it calls. `cause` is the original, whose message this one keeps; worth reporting as a bug.
 */
export class InternalError extends QueueError {
  constructor(cause: unknown) {
    super('INTERNAL', messageOf(cause), { cause });
  }
}

/** An error's message, or any other thrown value as text. */
function messageOf(value: unknown): string {
  if (value instanceof Error) return value.message;
  if (typeof value === 'string') return value;
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

export function isQueueError(error: unknown, code?: ErrorCode): error is QueueError {
  return error instanceof QueueError && (code === undefined || error.code === code);
}
