import { describe, expect, it } from 'vitest';
import { LeaseLostError, Outcome, type Broker, type HandlerTransaction, type QueueTable } from '../../src/index.js';
import { createDeferred } from '../../src/internal/deferred.js';
import {
  Collector,
  countRows,
  createBroker,
  createTable,
  formsOf,
  jobsTable,
  placeholder,
  untilStats,
} from '../fixtures.js';
import type { SuiteContext } from '../run-conformance.js';
import { advisoryTable } from './advisory-tables.js';
import { isolationAndClockSuite } from './isolation-and-clock.js';

/**
 * Transactional handlers (`transactional: true`) in every form the stand runs: what the handler
 * writes through `context.tx` commits with an ack and with nothing else. Then isolation levels,
 * SQLite begin modes and the database clock (isolation-and-clock.ts).
 */
export function transactionalSuite(context: SuiteContext): void {
  const { stand } = context;

  /** The handler's own table: each row is one write a handler made through `context.tx`. */
  async function createEffects(): Promise<void> {
    await context.db.exec('CREATE TABLE effects (note VARCHAR(200) NOT NULL)');
  }

  async function writeEffect(tx: HandlerTransaction | undefined, note: string): Promise<void> {
    if (tx === undefined) throw new Error('a transactional handler gets context.tx');
    await tx.query(`INSERT INTO effects (note) VALUES (${placeholder(stand, 1)})`, [note]);
  }

  async function effects(): Promise<string[]> {
    const rows = await context.db.query<{ note: string }>('SELECT note FROM effects ORDER BY note');
    return rows.map((row) => row.note);
  }

  for (const form of [...formsOf(stand), 'advisory'] as const) {
    /** The usual queue table, declared for the form under test. */
    const jobsOfForm = (): QueueTable => (form === 'advisory' ? advisoryTable() : jobsTable({ form }));

    describe(`${form} transactional handlers`, () => {
      it('a handler that writes and then retries leaves no row, and the message comes back; an ack commits both', async () => {
        const table = jobsOfForm();
        await createTable(stand, context.db, table);
        await createEffects();
        const queue = table.queue('emails');
        const broker = createBroker(context.db, context.brokers);
        const attempts = new Collector<number>();
        broker.subscribe(
          queue,
          async (message, { tx }) => {
            await writeEffect(tx, `attempt ${message.attempt}`);
            attempts.push(message.attempt);
            return message.attempt === 1 ? Outcome.retry() : Outcome.ack();
          },
          { transactional: true },
        );
        await broker.start();
        await broker.publish(queue, {});
        await attempts.waitFor(2);
        await broker.stop();
        expect(attempts.items).toEqual([1, 2]);
        expect(await effects()).toEqual(['attempt 2']);
        expect(await countRows(context.db, 'jobs')).toBe(0);
      });

      it('a handler that throws commits nothing, and its retry is delayed as usual', async () => {
        const table = jobsOfForm();
        await createTable(stand, context.db, table);
        await createEffects();
        const queue = table.queue('emails');
        const broker = createBroker(context.db, context.brokers);
        const errors = new Collector<unknown>();
        broker.on('error', (error) => errors.push(error));
        const attempts = new Collector<number>();
        broker.subscribe(
          queue,
          async (message, { tx }) => {
            attempts.push(message.attempt);
            if (message.attempt > 1) return;
            await writeEffect(tx, 'before the throw');
            throw new Error('the handler failed after its write');
          },
          { transactional: true, retryBackoff: { initialMs: 10 } },
        );
        await broker.start();
        await broker.publish(queue, {});
        await attempts.waitFor(2);
        await broker.stop();
        expect((errors.items[0] as Error).message).toBe('the handler failed after its write');
        expect(await effects()).toEqual([]);
        expect(await countRows(context.db, 'jobs')).toBe(0);
      });

      it('drop and dead letter finish or move the row and roll the handler writes back', async () => {
        const table = jobsOfForm();
        await createTable(stand, context.db, table);
        await createEffects();
        const dropped = table.queue('dropped');
        const failing = table.queue('failing');
        const broker = createBroker(context.db, context.brokers);
        const seen = new Collector<string>();
        broker.subscribe(
          dropped,
          async (message, { tx }) => {
            await writeEffect(tx, 'before drop');
            seen.push(`dropped ${message.id}`);
            return Outcome.drop();
          },
          { transactional: true },
        );
        broker.subscribe(
          failing,
          async (message, { tx }) => {
            await writeEffect(tx, 'before dead letter');
            seen.push(`failed ${message.id}`);
            return Outcome.retry();
          },
          { transactional: true, maxAttempts: 1, deadLetter: 'dead' },
        );
        await broker.start();
        await broker.publish(dropped, {});
        const failedId = await broker.publish(failing, {});
        await seen.waitFor(2);
        await broker.stop();
        expect(await effects()).toEqual([]);
        const rows = await context.db.query<{ id: unknown; queue: string }>('SELECT id, queue FROM jobs');
        expect(rows.map((row) => [String(row.id), row.queue])).toEqual([[failedId, 'dead']]);
        expect(broker.stats().subscriptions.map((stats) => [stats.dropped, stats.deadLettered])).toEqual([
          [1, 0],
          [0, 1],
        ]);
      });

      it('a publish with tx: context.tx commits only with the ack', async () => {
        const table = jobsOfForm();
        await createTable(stand, context.db, table);
        const orders = table.queue('orders');
        const receipts = table.queue<{ order: string; attempt: number }>('receipts');
        const broker = createBroker(context.db, context.brokers);
        const attempts = new Collector<number>();
        broker.subscribe(
          orders,
          async (message, handlerContext) => {
            await handlerContext.publish(receipts, { order: message.id, attempt: message.attempt }, { tx: handlerContext.tx });
            attempts.push(message.attempt);
            return message.attempt === 1 ? Outcome.retry() : Outcome.ack();
          },
          { transactional: true },
        );
        const received = new Collector<{ order: string; attempt: number }>();
        broker.subscribe(receipts, (message) => {
          received.push(message.payload);
        });
        await broker.start();
        const orderId = await broker.publish(orders, {});
        await received.waitFor(1);
        await broker.stop();
        expect(attempts.items).toEqual([1, 2]);
        expect(received.items).toEqual([{ order: orderId, attempt: 2 }]);
        expect(await countRows(context.db, 'jobs')).toBe(0);
      });

      it('every delivery gets a transaction of its own with several workers', async () => {
        const table = jobsOfForm();
        await createTable(stand, context.db, table);
        await createEffects();
        const queue = table.queue<{ n: number }>('emails');
        const broker = createBroker(context.db, context.brokers);
        const handled = new Collector<number>();
        broker.subscribe(
          queue,
          async (message, { tx }) => {
            await writeEffect(tx, `row ${message.payload.n}`);
            handled.push(message.payload.n);
            return message.payload.n % 2 === 0 ? Outcome.ack() : Outcome.drop();
          },
          { transactional: true, workers: 3 },
        );
        await broker.start();
        await broker.publishMany(queue, [1, 2, 3, 4, 5, 6].map((n) => ({ payload: { n } })));
        await handled.waitFor(6);
        await broker.stop();
        expect(await effects()).toEqual(['row 2', 'row 4', 'row 6']);
        expect(await countRows(context.db, 'jobs')).toBe(0);
      });
    });
  }

  for (const form of formsOf(stand)) {
    describe(`${form} batch settlements`, () => {
      const rule =
        form === 'rowLock'
          ? 'one failing ack rolls the whole batch back: the acks whose statement failed get its error, the others BatchRolledBackError'
          : 'one failing ack fails its row only: every row settles on its own';
      it(rule, async () => {
        const table = jobsTable({ form });
        await createTable(stand, context.db, table);
        await context.db.exec('CREATE TABLE refs (job_id BIGINT NOT NULL, FOREIGN KEY (job_id) REFERENCES jobs (id))');
        const queue = table.queue<{ n: number }>('emails');
        // The rows and the reference that blocks the second one's delete exist before any claim.
        const publisher = createBroker(context.db, context.brokers);
        await publisher.start();
        await publisher.publishMany(queue, [1, 2, 3].map((n) => ({ payload: { n } })));
        const rows = await context.db.query<{ id: unknown }>('SELECT id FROM jobs ORDER BY id');
        const blocked = String(rows[1]!.id);
        await context.db.query(`INSERT INTO refs (job_id) VALUES (${placeholder(stand, 1)})`, [rows[1]!.id]);
        const broker = createBroker(context.db, context.brokers);
        const errors = new Collector<unknown>();
        broker.on('error', (error) => errors.push(error));
        const calls = new Collector<number[]>();
        const secondCall = createDeferred();
        broker.subscribe(
          queue,
          async (messages) => {
            calls.push(messages.map((message) => message.payload.n));
            if (calls.items.length > 1) await secondCall.promise;
          },
          { batch: 3 },
        );
        await broker.start();
        await calls.waitFor(1);
        await errors.waitFor(form === 'rowLock' ? 3 : 1);
        const codes = errors.items.map((error) => (error as { code?: unknown }).code);
        if (form === 'rowLock') {
          // The batch's acks share one statement, so each of them gets its error.
          expect(codes).toEqual(['STATEMENT', 'STATEMENT', 'STATEMENT']);
          expect(new Set(errors.items).size).toBe(1);
          // The rolled-back rows return at once: the next claim takes all three again.
          await calls.waitFor(2);
          expect(await countRows(context.db, 'jobs')).toBe(3);
          await context.db.exec('DELETE FROM refs');
          secondCall.resolve();
          await untilStats(broker, queue, (stats) => stats.acked === 3, 'the second batch acked');
          expect(await countRows(context.db, 'jobs')).toBe(0);
        } else {
          expect(codes).toEqual(['STATEMENT']);
          await untilStats(broker, queue, (stats) => stats.acked === 2, 'the other rows acked');
          const left = await context.db.query<{ id: unknown }>('SELECT id FROM jobs');
          expect(left.map((row) => String(row.id))).toEqual([blocked]);
          secondCall.resolve();
        }
        await broker.stop();
      });
    });
  }

  // The delivery's transaction holds a single writer's write lock through the handler, so no
  // other connection can take the row meanwhile: the lease cannot be lost there.
  describe.skipIf(stand.capabilities.hasSingleWriter)('lease transactional handlers', () => {
    it('an ack after the lease was lost rolls the handler writes back and reports LeaseLostError', async () => {
      const table = jobsTable({ form: 'lease' });
      await createTable(stand, context.db, table);
      await createEffects();
      const queue = table.queue('emails');
      const first = createBroker(context.db, context.brokers, { leaseMs: 30_000 });
      const firstWrote = createDeferred();
      const releaseFirst = createDeferred();
      const errors = new Collector<unknown>();
      first.on('error', (error) => errors.push(error));
      first.subscribe(
        queue,
        async (_message, { tx }) => {
          await writeEffect(tx, 'written while the lease ran out');
          firstWrote.resolve();
          await releaseFirst.promise;
          return Outcome.ack();
        },
        { transactional: true },
      );
      await first.start();
      await first.publish(queue, {});
      await firstWrote.promise;

      // The lease runs out while the handler works, and a second broker (whose longer lease
      // makes a different token) takes the row, as in the lease suite.
      await context.db.exec("UPDATE jobs SET locked_until = '2000-01-01 00:00:00'");
      const second: Broker = createBroker(context.db, context.brokers, { leaseMs: 60_000 });
      const secondAttempts = new Collector<number>();
      const releaseSecond = createDeferred();
      second.subscribe(queue, async (message) => {
        secondAttempts.push(message.attempt);
        await releaseSecond.promise;
      });
      await second.start();
      await secondAttempts.waitFor(1);

      releaseFirst.resolve();
      await errors.waitFor(1);
      expect(errors.items[0]).toBeInstanceOf(LeaseLostError);
      expect(await effects()).toEqual([]);
      expect(first.stats().subscriptions[0]!.leasesLost).toBe(1);

      releaseSecond.resolve();
      await second.stop();
      expect(await countRows(context.db, 'jobs')).toBe(0);
    });
  });

  isolationAndClockSuite(context);
}
