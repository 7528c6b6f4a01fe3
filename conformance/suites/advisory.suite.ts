import { describe, expect, it } from 'vitest';
import { Outcome, SchemaError, type Broker, type Message, type QueueTable } from '../../src/index.js';
import { LAST_ERROR_HEADER } from '../../src/admin/open-queue-inspector.js';
import { decodeHeaders } from '../../src/delivery/codec.js';
import { createDeferred, type Deferred } from '../../src/internal/deferred.js';
import { Collector, countRows, createBroker, createTable, untilStats } from '../fixtures.js';
import type { SuiteContext } from '../run-conformance.js';
import { advisoryProcessSuite } from './advisory-processes.suite.js';
import { advisoryTable, sessionsHoldingKeys } from './advisory-tables.js';

/** Handlers that park until the test lets them go, so what a delivery holds can be observed. */
class ParkedHandlers {
  readonly started = new Collector<string>();
  readonly finished: string[] = [];
  readonly #releases = new Map<string, Deferred<void>>();

  readonly handler = async (message: Message<unknown>): Promise<void> => {
    const name = String(message.payload);
    const release = createDeferred();
    this.#releases.set(name, release);
    this.started.push(name);
    await release.promise;
    this.finished.push(name);
  };

  release(name: string): void {
    this.#releases.get(name)?.resolve();
  }

  releaseAll(): void {
    for (const release of this.#releases.values()) release.resolve();
  }
}

async function publishNamed(context: SuiteContext, table: QueueTable, items: { name: string; customer?: string }[]): Promise<void> {
  const publisher = createBroker(context.db, context.brokers);
  await publisher.start();
  await publisher.publishMany(
    table.queue('emails'),
    items.map((item) => ({ payload: item.name, partitionKey: item.customer ?? null })),
  );
  await publisher.stop();
}

function subscriptionStats(broker: Broker) {
  return broker.stats().subscriptions[0]!;
}

/** The advisory lock form on every stand: settlements, one row per key at a time, connections, stop. */
export function advisorySuite(context: SuiteContext): void {
  const { stand } = context;
  const hasSessionLocks = stand.capabilities.supportsSessionLocks;
  describe('advisory lock form', () => {
    it('handles and acks: the row is deleted, the first delivery reads attempt 1', async () => {
      const table = advisoryTable();
      await createTable(stand, context.db, table);
      const queue = table.queue<{ n: number }>('emails');
      const broker = createBroker(context.db, context.brokers);
      const seen = new Collector<Message<{ n: number }>>();
      broker.subscribe(queue, (message) => {
        seen.push(message);
        return Outcome.ack();
      });
      await broker.start();
      const id = await broker.publish(queue, { n: 1 }, { headers: { trace: 'abc' } });
      const [message] = await seen.waitFor(1);
      await broker.stop();
      expect(message).toMatchObject({ id, payload: { n: 1 }, attempt: 1, group: 'emails', headers: { trace: 'abc' } });
      expect(await countRows(context.db, 'jobs')).toBe(0);
      expect(subscriptionStats(broker)).toMatchObject({ form: 'advisory', acked: 1 });
    });

    it('acks by marking processed_at, and drop finishes the row like ack', async () => {
      const table = advisoryTable({ mark: true });
      await createTable(stand, context.db, table);
      const queue = table.queue<string>('emails');
      const broker = createBroker(context.db, context.brokers);
      const seen = new Collector<string>();
      broker.subscribe(queue, (message) => {
        seen.push(message.payload);
        return message.payload === 'drop me' ? Outcome.drop() : Outcome.ack();
      });
      await broker.start();
      await broker.publish(queue, 'ack me');
      await broker.publish(queue, 'drop me');
      await seen.waitFor(2);
      await broker.stop();
      expect(await countRows(context.db, 'jobs', 'processed_at IS NOT NULL')).toBe(2);
      expect(subscriptionStats(broker)).toMatchObject({ acked: 1, dropped: 1, handled: 2 });
    });

    it('retry runs no statement: the unlock returns the row, the take counted the attempt', async () => {
      const table = advisoryTable();
      await createTable(stand, context.db, table);
      const queue = table.queue('emails');
      const broker = createBroker(context.db, context.brokers);
      const attempts = new Collector<number>();
      broker.subscribe(queue, (message) => {
        attempts.push(message.attempt);
        return message.attempt < 3 ? Outcome.retry() : Outcome.ack();
      });
      await broker.start();
      await broker.publish(queue, {});
      await attempts.waitFor(3);
      await broker.stop();
      expect(attempts.items).toEqual([1, 2, 3]);
      expect(await countRows(context.db, 'jobs')).toBe(0);
    });

    it('retryAfter delays the row and counts the attempt once', async () => {
      const table = advisoryTable();
      await createTable(stand, context.db, table);
      const queue = table.queue('emails');
      const broker = createBroker(context.db, context.brokers);
      const deliveries = new Collector<{ attempt: number; at: number }>();
      broker.subscribe(queue, (message) => {
        deliveries.push({ attempt: message.attempt, at: Date.now() });
        return message.attempt === 1 ? Outcome.retryAfter(1_000) : Outcome.ack();
      });
      await broker.start();
      await broker.publish(queue, {});
      await deliveries.waitFor(2);
      await broker.stop();
      const [first, second] = deliveries.items;
      expect(second!.attempt).toBe(2);
      // The host clock decides when the row is due; allow the claim's own rounding of 10 ms.
      expect(second!.at - first!.at).toBeGreaterThanOrEqual(990);
    });

    it('moves a row to the dead-letter group at maxAttempts', async () => {
      const table = advisoryTable();
      await createTable(stand, context.db, table);
      const queue = table.queue('emails');
      const broker = createBroker(context.db, context.brokers);
      const attempts = new Collector<number>();
      broker.subscribe(
        queue,
        (message) => {
          attempts.push(message.attempt);
          return Outcome.retry();
        },
        { maxAttempts: 2, deadLetter: 'emails.dead' },
      );
      await broker.start();
      const id = await broker.publish(queue, {});
      await attempts.waitFor(2);
      await broker.stop();
      expect(attempts.items).toEqual([1, 2]);
      const rows = await context.db.query<{ id: unknown; queue: string }>('SELECT id, queue FROM jobs');
      expect(rows.map((row) => [String(row.id), row.queue])).toEqual([[id, 'emails.dead']]);
      expect(subscriptionStats(broker).deadLettered).toBe(1);
    });

    it('moves a row into the dead-letter table at maxAttempts, in one transaction', async () => {
      const table = advisoryTable({ grouped: false });
      await createTable(stand, context.db, table);
      await createTable(stand, context.db, advisoryTable({ grouped: false, name: 'jobs_dead' }));
      const queue = table.queue('jobs');
      const broker = createBroker(context.db, context.brokers);
      const attempts = new Collector<number>();
      broker.subscribe(
        queue,
        (message) => {
          attempts.push(message.attempt);
          return Outcome.retryAfter(10);
        },
        { maxAttempts: 2, deadLetter: 'jobs_dead' },
      );
      await broker.start();
      const id = await broker.publish(queue, { keep: 'me' });
      await attempts.waitFor(2);
      await broker.stop();
      expect(await countRows(context.db, 'jobs')).toBe(0);
      const moved = await context.db.query<Record<string, unknown>>('SELECT * FROM jobs_dead');
      expect(moved.map((row) => String(row['id']))).toEqual([id]);
      expect(Buffer.from(moved[0]!['payload'] as Uint8Array).toString()).toBe('{"keep":"me"}');
      expect(decodeHeaders(moved[0]!['headers'])).toEqual({ [LAST_ERROR_HEADER]: 'retryAfter requested at attempt 2 of 2' });
    });

    it('rows sharing a key go one at a time: the second waits for the first to settle', async () => {
      const table = advisoryTable({ keyedByCustomer: true });
      await createTable(stand, context.db, table);
      await publishNamed(context, table, [
        { name: 'a1', customer: 'a' },
        { name: 'b1', customer: 'b' },
        { name: 'a2', customer: 'a' },
      ]);
      const broker = createBroker(context.db, context.brokers);
      const parked = new ParkedHandlers();
      broker.subscribe(table.queue('emails'), parked.handler, { workers: 4 });
      await broker.start();
      await parked.started.waitFor(2);
      // A claim that came back empty after both started looked at a2 and left it: its key is held.
      await untilStats(broker, table.queue('emails'), (stats) => stats.emptyClaims >= 1 && stats.claimsRunning === 0, 'an empty claim, none running');
      expect(parked.started.items).toEqual(['a1', 'b1']);
      parked.release('a1');
      await parked.started.waitFor(3);
      expect(parked.started.items[2]).toBe('a2');
      expect(parked.finished).toEqual(['a1']);
      parked.releaseAll();
    });

    it('under workers: 4, rows of one key are never both in work', async () => {
      const table = advisoryTable({ keyedByCustomer: true });
      await createTable(stand, context.db, table);
      const customers = ['a', 'b', 'c'];
      await publishNamed(
        context,
        table,
        Array.from({ length: 30 }, (_, index) => ({ name: `r${index}`, customer: customers[index % customers.length]! })),
      );
      const broker = createBroker(context.db, context.brokers);
      const inWork = new Map<string, number>();
      let mostOfOneKey = 0;
      const handled = new Collector<string>();
      broker.subscribe(
        table.queue('emails'),
        async (message) => {
          const key = message.partitionKey!;
          inWork.set(key, (inWork.get(key) ?? 0) + 1);
          mostOfOneKey = Math.max(mostOfOneKey, inWork.get(key)!);
          // Stay in work until a claim that began after this delivery has come back (one claim
          // at a time on a table with a partition key), so that claim saw this key held.
          const claimsBefore = subscriptionStats(broker).claims;
          await untilStats(broker, table.queue('emails'), (stats) => stats.claims > claimsBefore && stats.claimsRunning === 0, 'a later claim to end');
          inWork.set(key, inWork.get(key)! - 1);
          handled.push(message.id);
        },
        { workers: 4 },
      );
      await broker.start();
      await handled.waitFor(30, 60_000);
      await broker.stop();
      expect(new Set(handled.items).size).toBe(30);
      expect(mostOfOneKey).toBe(1);
    });

    it('a batch handler gets up to its size, one row per key', async () => {
      const table = advisoryTable();
      await createTable(stand, context.db, table);
      await publishNamed(context, table, Array.from({ length: 10 }, (_, index) => ({ name: `r${index}` })));
      const broker = createBroker(context.db, context.brokers);
      const batches = new Collector<string[]>();
      broker.subscribe(table.queue<string>('emails'), (messages) => void batches.push(messages.map((m) => m.payload)), {
        batch: 4,
      });
      await broker.start();
      await batches.waitFor(3);
      await broker.stop();
      expect(batches.items.map((batch) => batch.length)).toEqual([4, 4, 2]);
      expect(await countRows(context.db, 'jobs')).toBe(0);
    });

    it('a key over 64 characters works (MySQL and MariaDB lock its SHA-256)', async () => {
      const table = advisoryTable({ advisoryLock: `${'long-key-'.repeat(8)}{id}` });
      await createTable(stand, context.db, table);
      const queue = table.queue('emails');
      const broker = createBroker(context.db, context.brokers);
      const seen = new Collector<string>();
      broker.subscribe(queue, (message) => void seen.push(message.id), { workers: 2 });
      await broker.start();
      await broker.publishMany(queue, [{ payload: 1 }, { payload: 2 }]);
      await seen.waitFor(2);
      await broker.stop();
      expect(await countRows(context.db, 'jobs')).toBe(0);
    });

    it('a key template naming a missing column fails start() with a SchemaError naming it', async () => {
      await createTable(stand, context.db, advisoryTable());
      const declared = advisoryTable({ advisoryLock: 'tenant-{tenant}' });
      const broker = createBroker(context.db, context.brokers);
      broker.subscribe(declared.queue('emails'), () => undefined);
      const failure = await broker.start().then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(failure).toBeInstanceOf(SchemaError);
      expect((failure as Error).message).toContain('"tenant"');
    });

    it('stop() releases every key: rows in work and waiting are claimable at once', async () => {
      const table = advisoryTable();
      await createTable(stand, context.db, table);
      await publishNamed(context, table, [{ name: 'r1' }, { name: 'r2' }, { name: 'r3' }]);
      const broker = createBroker(context.db, context.brokers, { stopTimeoutMs: 100 });
      const parked = new ParkedHandlers();
      broker.subscribe(table.queue('emails'), parked.handler, { workers: 3 });
      await broker.start();
      await parked.started.waitFor(3);
      if (hasSessionLocks) expect(await sessionsHoldingKeys(context)).toBe(3);
      await broker.stop();
      if (hasSessionLocks) expect(await sessionsHoldingKeys(context)).toBe(0);
      parked.releaseAll();
      const next = createBroker(context.db, context.brokers);
      const seen = new Collector<number>();
      next.subscribe(table.queue('emails'), (message) => void seen.push(message.attempt), { workers: 3 });
      await next.start();
      await seen.waitFor(3);
      await next.stop();
      // The take counted the first attempt; the abandoned handlers settled nothing.
      expect(seen.items).toEqual([2, 2, 2]);
    });

    if (hasSessionLocks) {
      it('WP-5, WP-2: each delivery in work holds a connection and its key, up to pool size minus one', async () => {
        const table = advisoryTable();
        await createTable(stand, context.db, table);
        await publishNamed(context, table, Array.from({ length: 6 }, (_, index) => ({ name: `r${index}` })));
        const broker = createBroker(context.db, context.brokers, { pool: { max: 4 } });
        const parked = new ParkedHandlers();
        broker.subscribe(table.queue('emails'), parked.handler, { workers: 6 });
        await broker.start();
        await parked.started.waitFor(3);
        await untilStats(broker, table.queue('emails'), (stats) => stats.claimsRunning === 0, 'no claim running');
        expect(subscriptionStats(broker)).toMatchObject({ inWork: 3, connectionsHeld: 3 });
        expect(subscriptionStats(broker).maxConnectionsHeld).toBeLessThanOrEqual(3);
        // Outside the process: three idle sessions (no transaction open) each hold a key.
        expect(await sessionsHoldingKeys(context)).toBe(3);
        // The last connection serves the handlers' own queries and publishes.
        await expect(broker.publish(table.queue('emails'), 'still room')).resolves.toBeTruthy();
        parked.release('r0');
        await parked.started.waitFor(4);
        parked.releaseAll();
        await broker.stop();
        expect(broker.stats().pool.maxHeld).toBeLessThanOrEqual(4);
      });

      it('a batch larger than the pool shrinks to the connections it can get without waiting', async () => {
        const table = advisoryTable();
        await createTable(stand, context.db, table);
        await publishNamed(context, table, Array.from({ length: 8 }, (_, index) => ({ name: `r${index}` })));
        const broker = createBroker(context.db, context.brokers, { pool: { max: 4 } });
        const batches = new Collector<string[]>();
        const firstBatchMayEnd = createDeferred();
        broker.subscribe(
          table.queue<string>('emails'),
          async (messages) => {
            batches.push(messages.map((message) => message.payload));
            if (batches.items.length === 1) await firstBatchMayEnd.promise;
          },
          { batch: 8, workers: 2 },
        );
        await broker.start();
        await batches.waitFor(1);
        await untilStats(broker, table.queue('emails'), (stats) => stats.claimsRunning === 0, 'no claim running');
        // Budget 3 of 4: one connection per row. The broker's own reads (heartbeat, pause and
        // cancel watches) borrow a connection now and then; a claim that meets one of them takes
        // one row fewer rather than wait, and the second worker may then take the connection left.
        const firstBatch = batches.items[0]!.length;
        expect(firstBatch).toBeGreaterThanOrEqual(2);
        expect(firstBatch).toBeLessThanOrEqual(3);
        const held = subscriptionStats(broker).connectionsHeld;
        expect(held).toBeGreaterThanOrEqual(firstBatch);
        expect(held).toBeLessThanOrEqual(3);
        // A connection the second worker's claim holds has its key only once that claim takes a row.
        const holdingKeys = await sessionsHoldingKeys(context);
        expect(holdingKeys).toBeGreaterThanOrEqual(firstBatch);
        expect(holdingKeys).toBeLessThanOrEqual(held);
        firstBatchMayEnd.resolve();
        await untilStats(broker, table.queue('emails'), (stats) => stats.handled === 8, 'every row handled in a batch');
        await broker.stop();
        expect(batches.items.every((batch) => batch.length <= 3)).toBe(true);
        expect(subscriptionStats(broker).maxConnectionsHeld).toBeLessThanOrEqual(3);
        expect(broker.stats().pool.maxHeld).toBeLessThanOrEqual(4);
        expect(await countRows(context.db, 'jobs')).toBe(0);
      });
    }

    advisoryProcessSuite(context);
  });
}
