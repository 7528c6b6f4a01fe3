/**
 * The subset of `amqplib` (2.x, promise API) the RabbitMQ destination uses, described
 * structurally so that `amqplib` stays an optional peer dependency and no public type needs its
 * declarations.
 */

export interface AmqpPublishOptionsLike {
  readonly messageId: string;
  readonly headers: Record<string, string>;
  /** Delivery mode 2: queues that are durable keep the message across a broker restart. */
  readonly persistent: boolean;
  /** Return the message (`basic.return`, before its confirm) when no queue takes it. */
  readonly mandatory: boolean;
}

/** A message RabbitMQ returned as unroutable. */
export interface AmqpReturnedMessageLike {
  readonly properties: { readonly messageId?: unknown };
}

export interface AmqpConfirmChannelLike {
  /** `false` when the socket's buffer is full: wait for `drain` before writing more. */
  publish(
    exchange: string,
    routingKey: string,
    content: Buffer,
    options: AmqpPublishOptionsLike,
    onConfirm: (error: unknown) => void,
  ): boolean;
  checkExchange(exchange: string): Promise<unknown>;
  assertExchange(exchange: string, type: string, options: { readonly durable: boolean }): Promise<unknown>;
  close(): Promise<void>;
  on(event: 'return', listener: (message: AmqpReturnedMessageLike) => void): unknown;
  on(event: 'error', listener: (error: Error) => void): unknown;
  on(event: 'close' | 'drain', listener: () => void): unknown;
  removeListener(event: 'close' | 'drain', listener: () => void): unknown;
}

export interface AmqpConnectionLike {
  createConfirmChannel(): Promise<AmqpConfirmChannelLike>;
  close(): Promise<void>;
  on(event: 'error', listener: (error: Error) => void): unknown;
  on(event: 'close', listener: () => void): unknown;
}

export interface AmqpSocketOptionsLike {
  /** Milliseconds to wait for the TCP connection. */
  readonly timeout: number;
  readonly clientProperties: { readonly connection_name: string };
  readonly [option: string]: unknown;
}

export interface AmqplibModuleLike {
  connect(url: string, socketOptions: AmqpSocketOptionsLike): Promise<AmqpConnectionLike>;
}

/** What amqplib's errors carry: the AMQP reply code when the server closed a channel. */
export interface AmqpErrorLike {
  readonly code?: unknown;
  readonly message?: unknown;
}
