import { afterEach, beforeAll, beforeEach, describe, expect, it, type TestContext } from 'vitest';
import {
  defineOutbox,
  EncodeError,
  NatsDestination,
  RabbitMqDestination,
  type Broker,
  type OutboxDeclaration,
  type OutboxDestination,
  type OutboxTable,
  type Relay,
} from '../../src/index.js';
import { createDeferred, type Deferred } from '../../src/internal/deferred.js';
import { Collector, countRows, createBroker, placeholder, stopAll, untilRelayed } from '../fixtures.js';
import { spawnRelay } from '../processes/outbox-spawn-relay.js';
import { skipTestWhenMissing } from '../require-live.js';
import type { SuiteContext } from '../run-conformance.js';
import { JetStreamFixture, RabbitMqFixture, type ReceivedMessage } from './outbox-destinations-fixtures.js';
import { TcpProxy } from './outbox-destinations-proxy.js';
import {
  addressOf,
  AMQP_URL_VARIABLE,
  amqpUrl,
  isReachable,
  NATS_URL_VARIABLE,
  natsUrl,
  urlThrough,
} from './outbox-destinations-servers.js';
import { openServiceWriters, type ServicePool, type ServiceTransaction } from './service-pools.js';

type DestinationKind = 'nats' | 'rabbitmq';

const OUTBOX: OutboxDeclaration = {
  table: 'outbox',
  id: 'id',
  name: 'name',
  payload: 'payload',
  headers: 'headers',
  processedAt: 'processed_at',
  lockedUntil: 'locked_until',
};

const SERVERS = {
  nats: { address: addressOf(natsUrl, 4222), variable: NATS_URL_VARIABLE },
  rabbitmq: { address: addressOf(amqpUrl, 5672), variable: AMQP_URL_VARIABLE },
} as const;

/** The shortest backoff after a failed send: the relay rounds it up to whole seconds (it is the records' lease). */
const QUICK_RELAY = { retryBackoff: { initialMs: 1_000, maxMs: 1_000 } };

/** One destination of one test: its server-side view and how the relay reaches it. */
interface Target {
  /** NATS: the prefix of the test stream's subjects. */
  readonly subjectPrefix?: string;
  /** A new destination to the test's stream or exchange, through `proxy` when given. */
  destination(proxy?: TcpProxy): OutboxDestination;
  /** Every message the destination holds so far (a queue's messages accumulate across calls). */
  received(): Promise<ReceivedMessage[]>;
}

/** A destination that reports the record ids of each confirmed send. */
function observed(destination: OutboxDestination, confirmed: Collector<string>): OutboxDestination {
  return {
    description: destination.description,
    open: () => destination.open(),
    close: () => destination.close(),
    async send(records) {
      await destination.send(records);
      for (const record of records) confirmed.push(record.id);
    },
    ...(destination.refusalOf === undefined ? {} : { refusalOf: (record) => destination.refusalOf!(record) }),
  };
}

/** Holds the first send until every relay in `all` has begun one (`started` is this relay's). */
function sendingTogether(destination: OutboxDestination, started: Deferred<void>, all: readonly Deferred<void>[]): OutboxDestination {
  return {
    description: destination.description,
    open: () => destination.open(),
    close: () => destination.close(),
    async send(records) {
      started.resolve();
      await Promise.all(all.map((relay) => relay.promise));
      await destination.send(records);
    },
  };
}

/** Outbox records written by the service, relayed to NATS JetStream and RabbitMQ by the broker. */
export function outboxDestinationsSuite(context: SuiteContext): void {
  const { stand } = context;
  describe('outbox relay to NATS JetStream and RabbitMQ', () => {
    const reachable = { nats: false, rabbitmq: false };
    const closables: { close(): Promise<void> }[] = [];
    let jetStream: JetStreamFixture | undefined;
    let rabbitMq: RabbitMqFixture | undefined;
    let outbox: OutboxTable;
    let servicePool: ServicePool;

    beforeAll(async () => {
      reachable.nats = await isReachable(SERVERS.nats.address);
      reachable.rabbitmq = await isReachable(SERVERS.rabbitmq.address);
    });
    beforeEach(async () => {
      outbox = defineOutbox(OUTBOX);
      for (const sql of outbox.createTableSql(stand.ddlDialect)) await context.db.exec(sql);
      servicePool = openServiceWriters(stand, context.db)[0]!;
    });
    afterEach(async () => {
      await stopAll(context.brokers);
      for (const closable of closables.splice(0).reverse()) await closable.close();
      await servicePool.end();
      await jetStream?.cleanup();
      await rabbitMq?.cleanup();
      jetStream = undefined;
      rabbitMq = undefined;
    });

    /** The test's stream or exchange; skips the test (or fails it under REQUIRE_LIVE=1) when the server is down. */
    async function targetOf(kind: DestinationKind, test: TestContext): Promise<Target> {
      if (!reachable[kind]) {
        const { address, variable } = SERVERS[kind];
        skipTestWhenMissing(test, `nothing answers at ${address.host}:${address.port}; start the server or set ${variable}`);
      }
      if (kind === 'nats') {
        const fixture = (jetStream = await JetStreamFixture.open());
        const stream = await fixture.stream();
        return {
          subjectPrefix: stream.subjectPrefix,
          destination: (proxy) =>
            new NatsDestination({
              servers: proxy === undefined ? natsUrl : urlThrough(natsUrl, proxy.port),
              subjectPrefix: stream.subjectPrefix,
            }),
          received: () => fixture.messages(stream.name),
        };
      }
      const fixture = (rabbitMq = await RabbitMqFixture.open());
      const { exchange, queue } = await fixture.exchangeWithQueue();
      const received: ReceivedMessage[] = [];
      return {
        destination: (proxy) =>
          new RabbitMqDestination({ url: proxy === undefined ? amqpUrl : urlThrough(amqpUrl, proxy.port), exchange }),
        received: async () => {
          received.push(...(await rabbitMq!.drain(queue)));
          return received;
        },
      };
    }

    async function proxyTo(kind: DestinationKind): Promise<TcpProxy> {
      const proxy = await TcpProxy.start(SERVERS[kind].address);
      closables.push(proxy);
      return proxy;
    }

    /** A started broker relaying the test's outbox to `destination`. */
    async function relayingBroker(destination: OutboxDestination, options: Record<string, unknown> = {}): Promise<{ broker: Broker; relay: Relay }> {
      const broker = createBroker(context.db, context.brokers);
      const relay = broker.relay(outbox, destination, { ...QUICK_RELAY, ...options });
      await broker.start();
      return { broker, relay };
    }

    /** A broker relaying to the target that reported a record it refused: the error, and the records it confirmed. */
    async function relayUntilRefused(target: Target): Promise<{ broker: Broker; confirmed: Collector<string>; refused: Error }> {
      const confirmed = new Collector<string>();
      const errors = new Collector<Error>();
      const { broker } = await relayingBroker(observed(target.destination(), confirmed));
      broker.on('error', (error) => errors.push(error));
      const [refused] = await errors.waitFor(1);
      expect(refused).toBeInstanceOf(EncodeError);
      return { broker, confirmed, refused: refused! };
    }

    /** Writes records in one service transaction, committed or rolled back; their ids. */
    async function write(
      broker: Broker,
      records: readonly { name: string; payload: unknown; headers?: Record<string, string> }[],
      how: 'COMMIT' | 'ROLLBACK' = 'COMMIT',
    ): Promise<string[]> {
      const transaction = await beginWhenFree(servicePool);
      const ids: string[] = [];
      try {
        for (const record of records) {
          ids.push(await broker.outbox(outbox).write(transaction.connection, record.name, record.payload, record.headers));
        }
      } finally {
        await transaction.finish(how);
      }
      return ids;
    }

    function payloadsOf(messages: readonly ReceivedMessage[]): unknown[] {
      return messages.map((message) => JSON.parse(message.payload.toString()) as unknown);
    }

    for (const kind of ['nats', 'rabbitmq'] as const) {
      describe(kind, () => {
        it('sends committed records once, with their headers, and never those of a rolled-back transaction', async (test) => {
          const target = await targetOf(kind, test);
          const confirmed = new Collector<string>();
          const { broker } = await relayingBroker(observed(target.destination(), confirmed));
          await write(broker, [{ name: 'orders.created', payload: { order: 'rolled back' } }], 'ROLLBACK');
          const ids = await write(
            broker,
            ['a', 'b', 'c', 'd', 'e'].map((order) => ({ name: 'orders.created', payload: { order }, headers: { 'trace-id': order } })),
          );
          await confirmed.waitFor(ids.length);
          await broker.stop();

          const received = await target.received();
          expect(payloadsOf(received)).toEqual(['a', 'b', 'c', 'd', 'e'].map((order) => ({ order })));
          expect(received.map((message) => message.messageId)).toEqual(ids);
          expect(received.map((message) => message.headers['tablequeue-outbox-id'])).toEqual(ids);
          expect(received.map((message) => message.headers['trace-id'])).toEqual(['a', 'b', 'c', 'd', 'e']);
          expect(confirmed.items).toEqual(ids);
          expect(await countRows(context.db, 'outbox', 'processed_at IS NULL')).toBe(0);
        });

        it('keeps records while the destination is down and sends every one once it is back', async (test) => {
          const target = await targetOf(kind, test);
          const proxy = await proxyTo(kind);
          const confirmed = new Collector<string>();
          const failedSends = new Collector<unknown>();
          const { broker, relay } = await relayingBroker(observed(target.destination(proxy), confirmed));
          broker.on('error', (error, detail) => {
            if (detail['phase'] === 'send') failedSends.push(error);
          });
          const before = await write(broker, [1, 2, 3].map((n) => ({ name: 'orders', payload: { n } })));
          await confirmed.waitFor(before.length);

          await proxy.close();
          const during = await write(broker, [4, 5, 6].map((n) => ({ name: n % 2 === 0 ? 'orders' : 'refunds', payload: { n } })));
          // Two failed sends of the same records: down for a while, through one backoff at least.
          await failedSends.waitFor(2);
          expect(await countRows(context.db, 'outbox', 'processed_at IS NULL')).toBe(during.length);

          await proxy.reopen();
          await confirmed.waitFor(before.length + during.length);
          // A send whose confirmation the outage cut off counts as failed and goes again, so the
          // confirmations can add up before the last batch is marked: wait for the marks too.
          await untilRelayed([relay], () => relay.stats().relayed >= before.length + during.length, 'every record marked processed');
          await broker.stop();
          const received = await target.received();
          expect(new Set(received.map((message) => message.messageId))).toEqual(new Set([...before, ...during]));
          expect(await countRows(context.db, 'outbox', 'processed_at IS NULL')).toBe(0);
        });
      });
    }

    it("nats: a record over the server's max_payload is refused at the write, and named by a relay that meets one; the records around it go", async (test) => {
      const target = await targetOf('nats', test);
      // Over the server's default max_payload of 1 MiB, under the broker's maxPayloadBytes of 8 MiB.
      const oversized = Buffer.alloc(2 * 1024 * 1024, 0x61);
      // Written by a broker that relays nothing, as another service's process would write it.
      const writer = createBroker(context.db, context.brokers);
      await writer.start();
      const ids = await write(writer, [{ n: 1 }, oversized, { n: 3 }].map((payload) => ({ name: 'orders', payload })));

      const { broker, confirmed, refused } = await relayUntilRefused(target);
      expect(refused.message).toContain(`record ${ids[1]} of "orders" can never be sent there: its payload is ${oversized.byteLength} bytes and its headers `);
      expect(confirmed.items).toEqual([ids[0]]);
      await expect(write(broker, [{ name: 'orders', payload: oversized }])).rejects.toThrow(/which could never take this record of "orders": its payload is \d+ bytes and its headers \d+, over the server's max_payload/);

      await context.db.query(`DELETE FROM outbox WHERE id = ${placeholder(stand, 1)}`, [ids[1]]);
      await confirmed.waitFor(2);
      expect(confirmed.items).toEqual([ids[0], ids[2]]);
    });

    it("nats: max_payload counts a record's headers with its payload, to the byte, at the write and at the relay", async (test) => {
      const target = await targetOf('nats', test);
      // The server's default max_payload, which its connection info reports.
      const maxPayload = 1024 * 1024;
      // The header block the relay sends: NATS/1.0, a line per header, an empty line.
      const headerBytes = (id: string, headers: Record<string, string>) =>
        10 + Object.entries({ ...headers, 'tablequeue-outbox-id': id, 'Nats-Msg-Id': id }).reduce((sum, [name, value]) => sum + name.length + value.length + 4, 0) + 2;
      const writer = createBroker(context.db, context.brokers);
      await writer.start();
      const trace = { traceparent: `00-${'a'.repeat(32)}-${'b'.repeat(16)}-01` };
      const ids = await write(writer, ['fits', 'over', 'after'].map((n) => ({ name: 'orders', payload: { n }, headers: trace })));
      // Sized now that the ids are known: the first exactly at the limit, the second a byte over.
      const resize = (id: string, extra: number) =>
        context.db.query(`UPDATE outbox SET payload = ${placeholder(stand, 1)} WHERE id = ${placeholder(stand, 2)}`, [
          Buffer.alloc(maxPayload - headerBytes(id, trace) + extra, 0x61),
          id,
        ]);
      await resize(ids[0]!, 0);
      await resize(ids[1]!, 1);

      const { broker, confirmed, refused } = await relayUntilRefused(target);
      expect(refused.message).toContain(`record ${ids[1]} of "orders" can never be sent there: its payload is `);
      expect(refused.message).toContain(`over the server's max_payload of ${maxPayload} (which counts both)`);
      // The record at the limit went: the server took what the check let through.
      expect(confirmed.items).toEqual([ids[0]]);
      expect((await target.received()).map((message) => message.messageId)).toEqual([ids[0]]);

      // A write that its headers take over is refused before anything is written.
      const underAlone = Buffer.alloc(maxPayload - 100, 0x61);
      await expect(write(broker, [{ name: 'orders', payload: underAlone, headers: { note: 'n'.repeat(200) } }])).rejects.toThrow(
        /which could never take this record of "orders": its payload is \d+ bytes and its headers \d+, over the server's max_payload/,
      );
      await context.db.query(`DELETE FROM outbox WHERE id = ${placeholder(stand, 1)}`, [ids[1]]);
      await confirmed.waitFor(2);
      expect(confirmed.items).toEqual([ids[0], ids[2]]);
    });

    it('two relays at once never send a record twice while both live', async (test) => {
      const target = await targetOf('rabbitmq', test);
      const confirmed = new Collector<string>();
      const writer = createBroker(context.db, context.brokers);
      await writer.start();
      const names = ['orders', 'refunds', 'invoices', 'shipments'];
      const ids = await write(
        writer,
        Array.from({ length: 200 }, (_, index) => ({ name: names[index % names.length]!, payload: { index } })),
      );
      // Each relay's first send waits until the other relay is sending too, so both are live and
      // at work at once; with 2 names in work each, the 4 names leave room for both.
      const sending = [createDeferred(), createDeferred()];
      const relays = await Promise.all(
        sending.map((started) =>
          relayingBroker(sendingTogether(observed(target.destination(), confirmed), started, sending), { batch: 10, concurrency: 2 }),
        ),
      );
      await confirmed.waitFor(ids.length);
      await Promise.all(relays.map(({ broker }) => broker.stop()));

      const relayed = relays.map(({ relay }) => relay.stats().relayed);
      expect(relayed.every((count) => count > 0)).toBe(true);
      expect(relayed[0]! + relayed[1]!).toBe(ids.length);

      expect([...confirmed.items].sort()).toEqual([...ids].sort());
      const received = await target.received();
      expect(received.map((message) => message.messageId).sort()).toEqual([...ids].sort());
      expect(await countRows(context.db, 'outbox', 'processed_at IS NULL')).toBe(0);
    });

    it('a relay killed with SIGKILL mid-batch loses nothing, and JetStream drops the resends by message id', async (test) => {
      if (!stand.capabilities.supportsProcesses || context.db.url === undefined) {
        console.warn('skipping: another process cannot open this database');
        test.skip();
      }
      const target = await targetOf('nats', test);
      const writer = createBroker(context.db, context.brokers);
      await writer.start();
      const names = ['orders', 'refunds', 'invoices', 'shipments'];
      const ids = await write(
        writer,
        Array.from({ length: 400 }, (_, index) => ({ name: names[index % names.length]!, payload: { index } })),
      );
      const leaseMs = 2_000;
      const child = spawnRelay({
        database: context.db.url!,
        outbox: OUTBOX,
        natsServers: natsUrl,
        subjectPrefix: target.subjectPrefix!,
        batch: 25,
        leaseMs,
        holdAfterSends: 3,
      });
      try {
        await child.confirmedAtLeast(3);
        child.child.kill('SIGKILL');
        await child.exited;
      } finally {
        child.child.kill('SIGKILL');
      }
      const sentByChild = child.confirmedSends.flat();
      // The third confirmed send was held after JetStream's ack: sent, but never marked processed.
      const heldBatch = child.confirmedSends[2]!;
      expect(await countRows(context.db, 'outbox', 'processed_at IS NULL')).toBeGreaterThanOrEqual(heldBatch.length);

      // The child is dead: what it left unmarked, this process's relay marks, once its leases ran out.
      const unmarked = await countRows(context.db, 'outbox', 'processed_at IS NULL');
      const confirmed = new Collector<string>();
      const { broker, relay } = await relayingBroker(observed(target.destination(), confirmed), { batch: 25, leaseMs });
      await untilRelayed([relay], () => relay.stats().relayed === unmarked, `${unmarked} records marked processed`, 30_000);
      await broker.stop();

      const stored = await target.received();
      const storedIds = stored.map((message) => message.messageId);
      expect(new Set(storedIds)).toEqual(new Set(ids));
      expect(storedIds).toHaveLength(ids.length);
      // Every record of the held batch was sent twice and stored once.
      expect(confirmed.items).toEqual(expect.arrayContaining(heldBatch));
      expect(sentByChild.length + confirmed.items.length).toBeGreaterThan(ids.length);
      expect(await countRows(context.db, 'outbox', 'processed_at IS NULL')).toBe(0);
    });
  });
}

/** How long a service transaction waits for a SQLite file's write lock, which the relay takes to mark records. */
const BUSY_GIVE_UP_MS = 10_000;

/**
 * Begins a service transaction. A SQLite file's `BEGIN IMMEDIATE` fails at once while the
 * relay's own handle writes (the service's handle waits for no lock), so it is tried again.
 */
async function beginWhenFree(pool: ServicePool): Promise<ServiceTransaction> {
  const deadline = Date.now() + BUSY_GIVE_UP_MS;
  for (;;) {
    try {
      return await pool.beginTransaction();
    } catch (error) {
      if ((error as { code?: unknown }).code !== 'SQLITE_BUSY' || Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
  }
}
