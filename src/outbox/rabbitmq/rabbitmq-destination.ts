import { ConnectionError, DeclarationError, DestinationError } from '../../errors.js';
import { MAX_TIMER_MS } from '../../option-checks.js';
import { OUTBOX_RECORD_ID_HEADER, type OutboxDestination, type OutboxRecord, type RefusalCandidate } from '../destination.js';
import type {
  AmqpConfirmChannelLike,
  AmqpConnectionLike,
  AmqpErrorLike,
  AmqplibModuleLike,
  AmqpReturnedMessageLike,
} from './amqplib-like.js';

export type RabbitMqExchangeType = 'direct' | 'topic' | 'fanout' | 'headers';

export interface RabbitMqDestinationOptions {
  /** `amqp://user:password@host:5672/vhost`. */
  readonly url: string;
  /** The exchange records are published to; `''` is the default exchange, which routes by queue name. */
  readonly exchange: string;
  /** A record's routing key computed from its name; default the name itself. */
  readonly routingKeyOf?: (name: string) => string;
  /** Declares the exchange on `open()` with this type; otherwise `open()` checks that it exists. */
  readonly assertExchange?: { readonly type: RabbitMqExchangeType; readonly durable?: boolean };
  /**
   * Fail `send` when RabbitMQ routes a message to no queue (the `mandatory` flag); default true,
   * so records stay in the outbox until a queue is bound. False lets RabbitMQ drop them.
   */
  readonly requireRoute?: boolean;
  /** Put before every record id to form the AMQP `messageId` (one prefix per outbox sharing consumers). */
  readonly messageIdPrefix?: string;
  /** How long `send` waits for the publisher confirms before it fails and drops the connection; default 30,000. */
  readonly confirmTimeoutMs?: number;
  /** How long `open()` waits for the TCP connection; default 10,000. */
  readonly connectTimeoutMs?: number;
  /** More socket options for amqplib's `connect` (TLS, keepalive, …). */
  readonly socketOptions?: Readonly<Record<string, unknown>>;
}

const DEFAULT_CONFIRM_TIMEOUT_MS = 30_000;
const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;
const CONNECTION_NAME = 'tablequeue-outbox';
/** AMQP's limit on a routing key (a short string). */
const MAX_ROUTING_KEY_BYTES = 255;
/** AMQP reply codes of a channel closed because what it names does not exist or may not be used. */
const NOT_FOUND = 404;
const ACCESS_REFUSED = 403;
/** The exchange exists with another type or durability than `assertExchange` declares. */
const PRECONDITION_FAILED = 406;

/** One open connection and its confirm channel; `failure` is set once either closed. */
interface Session {
  readonly connection: AmqpConnectionLike;
  readonly channel: AmqpConfirmChannelLike;
  /** Message ids RabbitMQ returned as unroutable and whose confirm has not yet arrived. */
  readonly returned: Set<string>;
  isOpen: boolean;
  /** Why the channel or connection closed, as the server or socket reported it. */
  closeReason: Error | undefined;
}

/**
 * Publishes outbox records to a RabbitMQ exchange over a confirm channel: each record with its
 * name as routing key, the record id as `messageId` and in the `OUTBOX_RECORD_ID_HEADER` header,
 * persistent. `send` publishes every record, then resolves when RabbitMQ confirmed each one; a
 * nack, an unroutable message (with `requireRoute`), a closed channel or the confirm timeout
 * rejects it. After a failure that closed the channel, `open()` connects again.
 */
export class RabbitMqDestination implements OutboxDestination {
  readonly description: string;
  readonly #options: Required<Omit<RabbitMqDestinationOptions, 'assertExchange' | 'routingKeyOf'>> & {
    readonly assertExchange: { readonly type: RabbitMqExchangeType; readonly durable: boolean } | undefined;
  };
  readonly #routingKeyOf: (name: string) => string;
  readonly #host: string;
  #session: Session | undefined;
  #opening: Promise<void> | undefined;
  /** Counts `close()` calls, so a connection that opens after one is closed instead of kept. */
  #closings = 0;

  constructor(options: RabbitMqDestinationOptions) {
    let url: URL;
    try {
      url = new URL(options.url);
    } catch (error) {
      throw new DeclarationError('the rabbitmq destination needs a url like "amqp://user:password@host:5672"', { cause: error });
    }
    if (url.protocol !== 'amqp:' && url.protocol !== 'amqps:') {
      throw new DeclarationError(`the rabbitmq destination's url must start with amqp:// or amqps://, got "${url.protocol}"`);
    }
    if (typeof options.exchange !== 'string') {
      throw new DeclarationError('the rabbitmq destination needs an exchange ("" for the default exchange)');
    }
    if (options.assertExchange !== undefined && options.exchange === '') {
      throw new DeclarationError('the default exchange ("") cannot be declared; name an exchange or leave out assertExchange');
    }
    this.#options = Object.freeze({
      url: options.url,
      exchange: options.exchange,
      assertExchange:
        options.assertExchange === undefined
          ? undefined
          : Object.freeze({ type: options.assertExchange.type, durable: options.assertExchange.durable ?? true }),
      requireRoute: options.requireRoute ?? true,
      messageIdPrefix: options.messageIdPrefix ?? '',
      confirmTimeoutMs: positiveMs('confirmTimeoutMs', options.confirmTimeoutMs ?? DEFAULT_CONFIRM_TIMEOUT_MS),
      connectTimeoutMs: positiveMs('connectTimeoutMs', options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS),
      socketOptions: Object.freeze({ ...options.socketOptions }),
    });
    this.#routingKeyOf = options.routingKeyOf ?? ((name) => name);
    this.#host = url.host;
    this.description = `rabbitmq exchange "${options.exchange}" at ${url.host}`;
  }

  open(): Promise<void> {
    if (this.#session?.isOpen === true) return Promise.resolve();
    this.#opening ??= this.#connect().finally(() => {
      this.#opening = undefined;
    });
    return this.#opening;
  }

  async send(records: readonly OutboxRecord[]): Promise<void> {
    const session = this.#session;
    if (session === undefined || !session.isOpen) {
      throw new ConnectionError({
        host: this.#host,
        message: `${this.description} is not connected; open() it first (the relay opens it again after a failed send)`,
      });
    }
    const routingKeys = records.map((record) => this.#routingKeyFor(record));
    const confirmations: Promise<void>[] = [];
    for (const [index, record] of records.entries()) {
      const messageId = this.#options.messageIdPrefix + record.id;
      let isBufferFull = false;
      const confirmation = new Promise<void>((resolve, reject) => {
        try {
          isBufferFull = !session.channel.publish(
            this.#options.exchange,
            routingKeys[index]!,
            record.payload,
            {
              messageId,
              headers: { ...record.headers, [OUTBOX_RECORD_ID_HEADER]: record.id },
              persistent: true,
              mandatory: this.#options.requireRoute,
            },
            (error) => {
              const wasReturned = session.returned.delete(messageId);
              if (error !== null && error !== undefined) reject(this.#confirmFailure(session, error, record));
              else if (wasReturned) reject(this.#unroutable(record, routingKeys[index]!));
              else resolve();
            },
          );
        } catch (error) {
          reject(this.#confirmFailure(session, error, record));
        }
      });
      // Handled here so a failure while later records wait for `drain` is no unhandled rejection.
      confirmation.catch(() => undefined);
      confirmations.push(confirmation);
      if (isBufferFull) await drainOrClose(session.channel);
    }
    await this.#awaitConfirms(session, confirmations);
  }

  async close(): Promise<void> {
    this.#closings += 1;
    const session = this.#session;
    this.#session = undefined;
    if (session === undefined) return;
    session.isOpen = false;
    await session.connection.close().catch(() => undefined);
  }

  async #connect(): Promise<void> {
    const closingPrevious = this.close();
    const closings = this.#closings;
    await closingPrevious;
    const amqplib = await loadAmqplib();
    let connection: AmqpConnectionLike;
    try {
      connection = await amqplib.connect(this.#options.url, {
        ...this.#options.socketOptions,
        timeout: this.#options.connectTimeoutMs,
        clientProperties: { connection_name: CONNECTION_NAME },
      });
    } catch (error) {
      throw new ConnectionError({
        host: this.#host,
        message: `cannot reach RabbitMQ at ${this.#host} (${reasonOf(error)}); start the server or fix the destination's url`,
        cause: error,
      });
    }
    let session: Session | undefined;
    // An 'error' event without a listener would crash the process; the reason is kept for `send`.
    connection.on('error', (error) => {
      if (session !== undefined) session.closeReason ??= error;
    });
    connection.on('close', () => {
      if (session !== undefined) session.isOpen = false;
    });
    try {
      const channel = await connection.createConfirmChannel();
      session = { connection, channel, returned: new Set(), isOpen: true, closeReason: undefined };
      const opened = session;
      channel.on('error', (error) => {
        opened.closeReason ??= error;
      });
      channel.on('close', () => {
        opened.isOpen = false;
      });
      channel.on('return', (message: AmqpReturnedMessageLike) => {
        const { messageId } = message.properties;
        if (typeof messageId === 'string') opened.returned.add(messageId);
      });
      await this.#prepareExchange(channel);
    } catch (error) {
      await connection.close().catch(() => undefined);
      throw error instanceof DestinationError ? error : this.#openFailure(error);
    }
    if (closings !== this.#closings) {
      await connection.close().catch(() => undefined);
      throw new ConnectionError({ host: this.#host, message: `${this.description} was closed while it opened` });
    }
    this.#session = session;
  }

  async #prepareExchange(channel: AmqpConfirmChannelLike): Promise<void> {
    const { exchange, assertExchange } = this.#options;
    if (exchange === '') return;
    try {
      if (assertExchange === undefined) await channel.checkExchange(exchange);
      else await channel.assertExchange(exchange, assertExchange.type, { durable: assertExchange.durable });
    } catch (error) {
      const code = (error as AmqpErrorLike).code;
      if (code !== NOT_FOUND && code !== ACCESS_REFUSED && code !== PRECONDITION_FAILED) throw error;
      throw new DestinationError({
        destination: this.description,
        message:
          code === NOT_FOUND
            ? `RabbitMQ at ${this.#host} has no exchange "${exchange}"; declare it, or set assertExchange to have open() declare it`
            : `RabbitMQ at ${this.#host} refused exchange "${exchange}" (${reasonOf(error)}); ` +
              'check its type and durability against assertExchange, and the user\'s permissions',
        cause: error,
      });
    }
  }

  async #awaitConfirms(session: Session, confirmations: readonly Promise<void>[]): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), this.#options.confirmTimeoutMs);
    });
    try {
      const settled = Promise.allSettled(confirmations);
      const outcome = await Promise.race([settled, timeout]);
      if (outcome === 'timeout') {
        // Confirms that may still arrive cannot be awaited any longer; a fresh connection starts clean.
        await this.#drop(session);
        throw new ConnectionError({
          host: this.#host,
          message:
            `RabbitMQ at ${this.#host} did not confirm the records within ${this.#options.confirmTimeoutMs} ms; ` +
            'the connection was dropped and the records will be sent again (raise confirmTimeoutMs if the broker is slow)',
        });
      }
      const failure = outcome.find((result) => result.status === 'rejected');
      if (failure === undefined) return;
      if (!session.isOpen) await this.#drop(session);
      throw failure.reason;
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * A record no send could ever publish: its name maps to no routing key AMQP can carry. The
   * relay sends the records before it and names it; a broker relaying here refuses to write it.
   */
  refusalOf(record: RefusalCandidate): string | undefined {
    const routingKey: unknown = this.#routingKeyOf(record.name);
    return isRoutingKey(routingKey) ? undefined : unusableRoutingKey(record.name);
  }

  #routingKeyFor(record: OutboxRecord): string {
    const routingKey: unknown = this.#routingKeyOf(record.name);
    if (!isRoutingKey(routingKey)) {
      throw new DestinationError({ destination: this.description, message: `outbox record ${record.id}: ${unusableRoutingKey(record.name)}` });
    }
    return routingKey;
  }

  #confirmFailure(session: Session, error: unknown, record: OutboxRecord): Error {
    if (error instanceof Error && error.message === 'message nacked') {
      return new DestinationError({
        destination: this.description,
        message:
          `RabbitMQ nacked record ${record.id}: a queue refused it (full with x-overflow reject-publish) or the broker failed to store it; ` +
          'it will be sent again',
        cause: error,
      });
    }
    const reason = session.closeReason ?? error;
    const code = (reason as AmqpErrorLike | undefined)?.code;
    if (code === NOT_FOUND || code === ACCESS_REFUSED) {
      return new DestinationError({
        destination: this.description,
        message: `RabbitMQ closed the channel while sending record ${record.id} (${reasonOf(reason)}); check exchange "${this.#options.exchange}"`,
        cause: reason,
      });
    }
    return new ConnectionError({
      host: this.#host,
      message:
        `lost the channel to RabbitMQ at ${this.#host} before record ${record.id} was confirmed (${reasonOf(reason)}); ` +
        'the records will be sent again',
      cause: reason,
    });
  }

  #unroutable(record: OutboxRecord, routingKey: string): DestinationError {
    return new DestinationError({
      destination: this.description,
      message:
        `RabbitMQ routed record ${record.id} to no queue (exchange "${this.#options.exchange}", routing key "${routingKey}"); ` +
        'bind a queue that takes it, or set requireRoute: false to let RabbitMQ drop such messages',
    });
  }

  #openFailure(error: unknown): Error {
    return new ConnectionError({
      host: this.#host,
      message: `cannot open a confirm channel on RabbitMQ at ${this.#host} (${reasonOf(error)}); the next open() connects again`,
      cause: error,
    });
  }

  async #drop(session: Session): Promise<void> {
    if (this.#session === session) await this.close();
  }
}

/** A RabbitMQ destination; see `RabbitMqDestination`. */
export function createRabbitMqDestination(options: RabbitMqDestinationOptions): RabbitMqDestination {
  return new RabbitMqDestination(options);
}

/** Loads the optional `amqplib` package; the error says how to install it. */
export async function loadAmqplib(load: () => Promise<unknown> = () => import('amqplib')): Promise<AmqplibModuleLike> {
  let namespace: unknown;
  try {
    namespace = await load();
  } catch (error) {
    const isMissing = (error as { code?: unknown } | undefined)?.code === 'ERR_MODULE_NOT_FOUND';
    const reason = isMissing ? 'it is not installed: npm install amqplib' : `it failed to load (${reasonOf(error)})`;
    throw new DeclarationError(`the rabbitmq destination needs the "amqplib" package, but ${reason}`, { cause: error });
  }
  const { default: defaultExport } = namespace as { default?: unknown };
  return (defaultExport ?? namespace) as AmqplibModuleLike;
}

/** Resolves when the channel can take more writes, or closed (its pending confirms then fail). */
function drainOrClose(channel: AmqpConfirmChannelLike): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      channel.removeListener('drain', done);
      channel.removeListener('close', done);
      resolve();
    };
    channel.on('drain', done);
    channel.on('close', done);
  });
}

function positiveMs(name: string, value: number): number {
  if (!Number.isInteger(value) || value <= 0 || value > MAX_TIMER_MS) {
    throw new DeclarationError(`${name} must be a whole number of milliseconds from 1 to ${MAX_TIMER_MS}, got ${value}`);
  }
  return value;
}

function reasonOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function isRoutingKey(routingKey: unknown): routingKey is string {
  return typeof routingKey === 'string' && Buffer.byteLength(routingKey) <= MAX_ROUTING_KEY_BYTES;
}

function unusableRoutingKey(name: string): string {
  return `the name "${name}" maps to a routing key that is not a string of at most ${MAX_ROUTING_KEY_BYTES} bytes; shorten the name or change routingKeyOf`;
}
