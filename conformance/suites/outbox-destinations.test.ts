import { afterEach, beforeEach, expect, it } from 'vitest';
import { ConnectionError, DestinationError } from '../../src/errors.js';
import { OUTBOX_RECORD_ID_HEADER } from '../../src/outbox/destination.js';
import { NatsDestination } from '../../src/outbox/nats/nats-destination.js';
import { RabbitMqDestination } from '../../src/outbox/rabbitmq/rabbitmq-destination.js';
import { JetStreamFixture, outboxRecords, RabbitMqFixture } from './outbox-destinations-fixtures.js';
import { TcpProxy } from './outbox-destinations-proxy.js';
import {
  addressOf,
  AMQP_URL_VARIABLE,
  amqpUrl,
  describeWithServer,
  NATS_URL_VARIABLE,
  natsUrl,
  urlThrough,
} from './outbox-destinations-servers.js';

const natsAddress = addressOf(natsUrl, 4222);
const amqpAddress = addressOf(amqpUrl, 5672);

/** Destinations and proxies of one test, closed after it. */
const opened: { close(): Promise<void> }[] = [];

afterEach(async () => {
  for (const closable of opened.splice(0).reverse()) await closable.close();
});

function track<T extends { close(): Promise<void> }>(closable: T): T {
  opened.push(closable);
  return closable;
}

await describeWithServer('nats jetstream destination', { address: natsAddress, variable: NATS_URL_VARIABLE }, () => {
  let jetStream: JetStreamFixture;
  beforeEach(async () => {
    jetStream = await JetStreamFixture.open();
  });
  afterEach(async () => {
    await jetStream.cleanup();
  });

  it('stores every record with its payload bytes and headers, the record id as message id', async () => {
    const stream = await jetStream.stream();
    const destination = track(new NatsDestination({ servers: natsUrl, subjectPrefix: stream.subjectPrefix }));
    await destination.open();
    const records = outboxRecords('orders.created', Array.from({ length: 300 }, (_, index) => index + 1), {
      'trace-id': 'abc',
    });
    await destination.send(records);

    const stored = await jetStream.messages(stream.name);
    expect(stored).toHaveLength(300);
    expect(stored.map((message) => message.messageId)).toEqual(records.map((record) => record.id));
    for (const [index, message] of stored.entries()) {
      expect(message.subject).toBe(`${stream.subjectPrefix}orders.created`);
      expect(message.payload.equals(records[index]!.payload)).toBe(true);
      expect(message.headers[OUTBOX_RECORD_ID_HEADER]).toBe(records[index]!.id);
      expect(message.headers['trace-id']).toBe('abc');
    }
  });

  it('takes the subject from subjectOf and prefixes message ids with messageIdPrefix', async () => {
    const stream = await jetStream.stream();
    const destination = track(
      new NatsDestination({
        servers: natsUrl,
        subjectOf: (name) => `${stream.subjectPrefix}${name.toUpperCase()}`,
        messageIdPrefix: 'orders-outbox:',
      }),
    );
    await destination.open();
    await destination.send(outboxRecords('paid', [7]));

    const [message] = await jetStream.messages(stream.name);
    expect(message).toMatchObject({ subject: `${stream.subjectPrefix}PAID`, messageId: 'orders-outbox:7' });
    expect(message!.headers[OUTBOX_RECORD_ID_HEADER]).toBe('7');
  });

  it('confirms a resend of the same records without storing them twice', async () => {
    const stream = await jetStream.stream();
    const destination = track(new NatsDestination({ servers: natsUrl, subjectPrefix: stream.subjectPrefix }));
    await destination.open();
    await destination.send(outboxRecords('orders', [1, 2, 3]));
    await destination.send(outboxRecords('orders', [2, 3, 4]));
    await destination.send(outboxRecords('orders', [1, 2, 3, 4]));

    const stored = await jetStream.messages(stream.name);
    expect(stored.map((message) => message.messageId)).toEqual(['1', '2', '3', '4']);
  });

  it('creates the stream asked for by ensureStream, and leaves an existing one as it is', async () => {
    const stream = await jetStream.stream({ create: false });
    const ensureStream = { name: stream.name, duplicateWindowMs: 30_000 };
    const destination = track(new NatsDestination({ servers: natsUrl, subjectPrefix: stream.subjectPrefix, ensureStream }));
    await destination.open();
    await destination.send(outboxRecords('orders', [1]));
    expect(await jetStream.duplicateWindowMs(stream.name)).toBe(30_000);

    const again = track(
      new NatsDestination({ servers: natsUrl, subjectPrefix: stream.subjectPrefix, ensureStream: { ...ensureStream, duplicateWindowMs: 60_000 } }),
    );
    await again.open();
    await again.send(outboxRecords('orders', [1, 2]));
    expect(await jetStream.duplicateWindowMs(stream.name)).toBe(30_000);
    expect((await jetStream.messages(stream.name)).map((message) => message.messageId)).toEqual(['1', '2']);
  });

  it('rejects a send whose subject no stream takes, naming the subject', async () => {
    const stream = await jetStream.stream({ create: false });
    const destination = track(new NatsDestination({ servers: natsUrl, subjectPrefix: stream.subjectPrefix }));
    await destination.open();
    const send = destination.send(outboxRecords('orders', [1, 2]));
    await expect(send).rejects.toThrowError(DestinationError);
    await expect(send).rejects.toThrowError(`no JetStream stream takes subject "${stream.subjectPrefix}orders"`);
  });

  it('rejects a record whose name makes no subject before publishing any record', async () => {
    const stream = await jetStream.stream();
    const destination = track(new NatsDestination({ servers: natsUrl, subjectPrefix: stream.subjectPrefix }));
    await destination.open();
    const records = [...outboxRecords('orders', [1]), ...outboxRecords('orders..paid', [2])];
    await expect(destination.send(records)).rejects.toThrowError(/maps to subject ".*orders\.\.paid", which is not a subject/);
    expect(await jetStream.messages(stream.name)).toEqual([]);
  });

  it('does not keep a connection that opened after close() was called', async () => {
    const destination = track(new NatsDestination({ servers: natsUrl }));
    const opening = destination.open();
    await destination.close();
    await expect(opening).rejects.toThrowError(/was closed while it opened/);
    await expect(destination.send(outboxRecords('orders', [1]))).rejects.toThrowError(/is not connected/);
  });

  it('rejects open and send while the server is unreachable, and sends everything once it is back', async () => {
    const stream = await jetStream.stream();
    const proxy = track(await TcpProxy.start(natsAddress));
    const destination = track(
      new NatsDestination({ servers: urlThrough(natsUrl, proxy.port), subjectPrefix: stream.subjectPrefix }),
    );
    await destination.open();
    await destination.send(outboxRecords('orders', [1, 2]));

    await proxy.close();
    const lost = destination.send(outboxRecords('orders', [3, 4]));
    await expect(lost).rejects.toThrowError(ConnectionError);
    const refused = destination.open();
    await expect(refused).rejects.toThrowError(ConnectionError);
    await expect(refused).rejects.toThrowError(/cannot reach NATS at 127\.0\.0\.1:\d+/);

    await proxy.reopen();
    await destination.open();
    await destination.send(outboxRecords('orders', [2, 3, 4]));
    expect((await jetStream.messages(stream.name)).map((message) => message.messageId)).toEqual(['1', '2', '3', '4']);
  });
});

await describeWithServer('rabbitmq destination', { address: amqpAddress, variable: AMQP_URL_VARIABLE }, () => {
  let rabbitMq: RabbitMqFixture;
  beforeEach(async () => {
    rabbitMq = await RabbitMqFixture.open();
  });
  afterEach(async () => {
    await rabbitMq.cleanup();
  });

  it('publishes confirmed, persistent messages with the record id as messageId and header', async () => {
    const { exchange, queue } = await rabbitMq.exchangeWithQueue();
    const destination = track(new RabbitMqDestination({ url: amqpUrl, exchange }));
    await destination.open();
    const records = outboxRecords('orders.created', Array.from({ length: 300 }, (_, index) => index + 1), {
      'trace-id': 'abc',
    });
    await destination.send(records);

    const received = await rabbitMq.drain(queue);
    expect(received.map((message) => message.messageId)).toEqual(records.map((record) => record.id));
    for (const [index, message] of received.entries()) {
      expect(message.subject).toBe('orders.created');
      expect(message.deliveryMode).toBe(2);
      expect(message.payload.equals(records[index]!.payload)).toBe(true);
      expect(message.headers).toEqual({ 'trace-id': 'abc', [OUTBOX_RECORD_ID_HEADER]: records[index]!.id });
    }
  });

  it('rejects a send that RabbitMQ nacks', async () => {
    const { exchange, queue } = await rabbitMq.exchangeWithQueue({
      queueArguments: { 'x-max-length': 1, 'x-overflow': 'reject-publish' },
    });
    const destination = track(new RabbitMqDestination({ url: amqpUrl, exchange }));
    await destination.open();
    const send = destination.send(outboxRecords('orders', [1, 2]));
    await expect(send).rejects.toThrowError(DestinationError);
    await expect(send).rejects.toThrowError('RabbitMQ nacked record 2');

    expect((await rabbitMq.drain(queue)).map((message) => message.messageId)).toEqual(['1']);
    await destination.send(outboxRecords('orders', [2]));
    expect((await rabbitMq.drain(queue)).map((message) => message.messageId)).toEqual(['2']);
  });

  it('rejects a send that no queue takes, unless requireRoute is false', async () => {
    const { exchange, queue } = await rabbitMq.exchangeWithQueue({ bindingKey: 'orders' });
    const destination = track(new RabbitMqDestination({ url: amqpUrl, exchange }));
    await destination.open();
    const send = destination.send([...outboxRecords('orders', [1]), ...outboxRecords('refunds', [2])]);
    await expect(send).rejects.toThrowError(DestinationError);
    await expect(send).rejects.toThrowError('RabbitMQ routed record 2 to no queue');

    const dropping = track(new RabbitMqDestination({ url: amqpUrl, exchange, requireRoute: false }));
    await dropping.open();
    await dropping.send(outboxRecords('refunds', [3]));
    expect((await rabbitMq.drain(queue)).map((message) => message.messageId)).toEqual(['1']);
  });

  it('refuses to open on an exchange that does not exist, and declares it with assertExchange', async () => {
    const exchange = rabbitMq.exchangeName();
    const destination = track(new RabbitMqDestination({ url: amqpUrl, exchange }));
    const open = destination.open();
    await expect(open).rejects.toThrowError(DestinationError);
    await expect(open).rejects.toThrowError(`RabbitMQ at ${amqpAddress.host}:${amqpAddress.port} has no exchange "${exchange}"`);

    const declaring = track(
      new RabbitMqDestination({ url: amqpUrl, exchange, assertExchange: { type: 'fanout', durable: false }, requireRoute: false }),
    );
    await declaring.open();
    await declaring.send(outboxRecords('orders', [1]));
  });

  it('rejects a send when the server closes the channel, and opens a new one on open()', async () => {
    const { exchange, queue } = await rabbitMq.exchangeWithQueue();
    const destination = track(new RabbitMqDestination({ url: amqpUrl, exchange }));
    await destination.open();
    await rabbitMq.deleteExchange(exchange);
    const send = destination.send(outboxRecords('orders', [1]));
    await expect(send).rejects.toThrowError(DestinationError);
    await expect(send).rejects.toThrowError(/closed the channel while sending record 1 .*no exchange/);

    await rabbitMq.declareExchange(exchange);
    await rabbitMq.bind(queue, exchange);
    await destination.open();
    await destination.send(outboxRecords('orders', [1]));
    expect((await rabbitMq.drain(queue)).map((message) => message.messageId)).toEqual(['1']);
  });

  it('does not keep a connection that opened after close() was called', async () => {
    const { exchange } = await rabbitMq.exchangeWithQueue();
    const destination = track(new RabbitMqDestination({ url: amqpUrl, exchange }));
    const opening = destination.open();
    await destination.close();
    await expect(opening).rejects.toThrowError(/was closed while it opened/);
    await expect(destination.send(outboxRecords('orders', [1]))).rejects.toThrowError(/is not connected/);
  });

  it('rejects open and send while the server is unreachable, and sends everything once it is back', async () => {
    const { exchange, queue } = await rabbitMq.exchangeWithQueue();
    const proxy = track(await TcpProxy.start(amqpAddress));
    const destination = track(new RabbitMqDestination({ url: urlThrough(amqpUrl, proxy.port), exchange }));
    await destination.open();
    await destination.send(outboxRecords('orders', [1, 2]));

    await proxy.close();
    await expect(destination.send(outboxRecords('orders', [3, 4]))).rejects.toThrowError(ConnectionError);
    const refused = destination.open();
    await expect(refused).rejects.toThrowError(ConnectionError);
    await expect(refused).rejects.toThrowError(/cannot reach RabbitMQ at 127\.0\.0\.1:\d+/);

    await proxy.reopen();
    await destination.open();
    await destination.send(outboxRecords('orders', [3, 4]));
    expect((await rabbitMq.drain(queue)).map((message) => message.messageId)).toEqual(['1', '2', '3', '4']);
  });
});
