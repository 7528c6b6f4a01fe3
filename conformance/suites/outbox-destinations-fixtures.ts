import amqplib from 'amqplib';
import { connect as connectNats, nanos, type JetStreamManager, type NatsConnection } from 'nats';
import { OUTBOX_RECORD_ID_HEADER, type OutboxRecord } from '../../src/outbox/destination.js';
import { amqpUrl, natsUrl, uniqueName } from './outbox-destinations-servers.js';

/** A message as a stream stored it or a queue handed it over. */
export interface ReceivedMessage {
  readonly subject: string;
  readonly payload: Buffer;
  readonly headers: Record<string, string>;
  /** JetStream's `Nats-Msg-Id`, or the AMQP `messageId`. */
  readonly messageId: string | undefined;
  /** AMQP delivery mode (2 = persistent); undefined on NATS. */
  readonly deliveryMode?: number | undefined;
}

export function outboxRecords(name: string, ids: readonly (number | string)[], headers: Record<string, string> = {}): OutboxRecord[] {
  return ids.map((id) => ({
    id: String(id),
    name,
    payload: Buffer.from(JSON.stringify({ id, bytes: [0, 255, 10] })),
    headers: { ...headers, [OUTBOX_RECORD_ID_HEADER]: String(id) },
  }));
}

/** Streams of one test on the shared NATS server, deleted by `cleanup`. */
export class JetStreamFixture {
  readonly #connection: NatsConnection;
  readonly #manager: JetStreamManager;
  readonly #streams: string[] = [];

  private constructor(connection: NatsConnection, manager: JetStreamManager) {
    this.#connection = connection;
    this.#manager = manager;
  }

  static async open(): Promise<JetStreamFixture> {
    const connection = await connectNats({ servers: natsUrl, name: 'tablequeue-outbox-test' });
    return new JetStreamFixture(connection, await connection.jetstreamManager());
  }

  /** A stream name and subject prefix (the name and a dot) no other test uses; created unless `create` is false. */
  async stream(options: { create?: boolean; duplicateWindowMs?: number } = {}): Promise<{ name: string; subjectPrefix: string }> {
    const name = uniqueName('stream');
    const subjectPrefix = `${name}.`;
    this.#streams.push(name);
    if (options.create !== false) {
      await this.#manager.streams.add({
        name,
        subjects: [`${subjectPrefix}>`],
        duplicate_window: nanos(options.duplicateWindowMs ?? 120_000),
      });
    }
    return { name, subjectPrefix };
  }

  async duplicateWindowMs(stream: string): Promise<number> {
    const info = await this.#manager.streams.info(stream);
    return info.config.duplicate_window / 1_000_000;
  }

  /** Every message the stream stored, in stream order. */
  async messages(stream: string): Promise<ReceivedMessage[]> {
    const { state } = await this.#manager.streams.info(stream);
    const messages: ReceivedMessage[] = [];
    for (let seq = state.first_seq; state.messages > 0 && seq <= state.last_seq; seq += 1) {
      const message = await this.#manager.streams.getMessage(stream, { seq });
      const headers: Record<string, string> = {};
      for (const key of message.header.keys()) headers[key] = message.header.get(key);
      messages.push({
        subject: message.subject,
        payload: Buffer.from(message.data),
        headers,
        messageId: message.header.get('Nats-Msg-Id') || undefined,
      });
    }
    return messages;
  }

  async cleanup(): Promise<void> {
    for (const stream of this.#streams.splice(0)) await this.#manager.streams.delete(stream).catch(() => undefined);
    await this.#connection.close();
  }
}

/** Exchanges and queues of one test on the shared RabbitMQ server, deleted by `cleanup`. */
export class RabbitMqFixture {
  readonly #connection: amqplib.ChannelModel;
  readonly #channel: amqplib.Channel;
  readonly #exchanges: string[] = [];
  readonly #queues: string[] = [];

  private constructor(connection: amqplib.ChannelModel, channel: amqplib.Channel) {
    this.#connection = connection;
    this.#channel = channel;
  }

  static async open(): Promise<RabbitMqFixture> {
    const connection = await amqplib.connect(amqpUrl);
    connection.on('error', () => undefined);
    const channel = await connection.createChannel();
    channel.on('error', () => undefined);
    return new RabbitMqFixture(connection, channel);
  }

  /** A name for an exchange this test declares (or leaves missing), deleted afterwards. */
  exchangeName(): string {
    const name = uniqueName('exchange');
    this.#exchanges.push(name);
    return name;
  }

  /** A topic exchange with one queue bound to `bindingKey` (every routing key by default). */
  async exchangeWithQueue(
    options: { bindingKey?: string; queueArguments?: Record<string, unknown> } = {},
  ): Promise<{ exchange: string; queue: string }> {
    const exchange = this.exchangeName();
    const queue = uniqueName('queue');
    this.#queues.push(queue);
    await this.#channel.assertExchange(exchange, 'topic', { durable: false });
    await this.#channel.assertQueue(queue, { durable: false, arguments: options.queueArguments });
    await this.#channel.bindQueue(queue, exchange, options.bindingKey ?? '#');
    return { exchange, queue };
  }

  async deleteExchange(exchange: string): Promise<void> {
    await this.#channel.deleteExchange(exchange);
  }

  async declareExchange(exchange: string): Promise<void> {
    await this.#channel.assertExchange(exchange, 'topic', { durable: false });
  }

  async bind(queue: string, exchange: string): Promise<void> {
    await this.#channel.bindQueue(queue, exchange, '#');
  }

  /** Takes every message the queue holds now. */
  async drain(queue: string): Promise<ReceivedMessage[]> {
    const messages: ReceivedMessage[] = [];
    for (;;) {
      const message = await this.#channel.get(queue, { noAck: true });
      if (message === false) return messages;
      const headers: Record<string, string> = {};
      for (const [key, value] of Object.entries(message.properties.headers ?? {})) headers[key] = String(value);
      messages.push({
        subject: message.fields.routingKey,
        payload: message.content,
        headers,
        messageId: message.properties.messageId as string | undefined,
        deliveryMode: message.properties.deliveryMode as number | undefined,
      });
    }
  }

  async cleanup(): Promise<void> {
    for (const queue of this.#queues.splice(0)) await this.#channel.deleteQueue(queue).catch(() => undefined);
    for (const exchange of this.#exchanges.splice(0)) await this.#channel.deleteExchange(exchange).catch(() => undefined);
    await this.#connection.close().catch(() => undefined);
  }
}
