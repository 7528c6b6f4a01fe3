import { describe, expect, it } from 'vitest';
import { defineTable, HandlerError, Outcome, QueueError, SchemaError, type Message } from '../../src/index.js';
import { Collector, countRows, createBroker, createTable, formsOf, jobsDeclaration, jobsTable } from '../fixtures.js';
import type { SuiteContext } from '../run-conformance.js';

/** Publish, handle and settle: every outcome of the handler, in every form the stand runs. */
export function settleSuite(context: SuiteContext): void {
  const { stand } = context;
  for (const form of formsOf(stand)) {
    describe(`${form} settlements`, () => {
      it('acks by deleting the row', async () => {
        const table = jobsTable({ form });
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
        expect(message!.id).toBe(id);
        expect(message!.payload).toEqual({ n: 1 });
        expect(message!.attempt).toBe(1);
        expect(message!.group).toBe('emails');
        expect(message!.headers).toEqual({ trace: 'abc' });
        expect(message!.raw?.toString('utf8')).toBe('{"n":1}');
        await broker.stop();
        expect(await countRows(context.db, 'jobs')).toBe(0);
      });

      it('reads a payload column of the JSON type as the JSON it holds (PostgreSQL json, MySQL/MariaDB JSON)', async (test) => {
        if (stand.kind === 'sqlite') test.skip();
        const table = jobsTable({ form });
        await createTable(stand, context.db, table);
        await context.db.exec(
          stand.kind === 'postgres' ? 'ALTER TABLE jobs ALTER COLUMN payload TYPE json USING convert_from(payload, \'UTF8\')::json' : 'ALTER TABLE jobs MODIFY payload JSON NOT NULL',
        );
        const queue = table.queue<{ n: number; to: string[] }>('emails');
        const broker = createBroker(context.db, context.brokers);
        const seen = new Collector<Message<{ n: number; to: string[] }>>();
        broker.subscribe(queue, (message) => {
          seen.push(message);
        });
        await broker.start();
        await broker.publishMany(queue, [1, 2, 3].map((n) => ({ payload: { n, to: [`a${n}@example.com`] } })));
        const messages = await seen.waitFor(3);
        await broker.stop();
        expect(messages.map((message) => message.payload).sort((a, b) => a.n - b.n)).toEqual([1, 2, 3].map((n) => ({ n, to: [`a${n}@example.com`] })));
        expect(broker.stats().subscriptions[0]!.decodeFailures).toBe(0);
        expect(await countRows(context.db, 'jobs')).toBe(0);
      });

      it('refuses a publish into a jsonb payload column not declared json with a SchemaError that names the declaration, writing nothing', async (test) => {
        if (stand.kind !== 'postgres') test.skip();
        const table = jobsTable({ form });
        await createTable(stand, context.db, table);
        await context.db.exec("ALTER TABLE jobs ALTER COLUMN payload TYPE jsonb USING convert_from(payload, 'UTF8')::jsonb");
        const queue = table.queue<{ n: number }>('emails');
        const broker = createBroker(context.db, context.brokers);
        await broker.start();
        for (const publish of [() => broker.publish(queue, { n: 1 }), () => broker.publishMany(queue, [{ payload: { n: 2 } }, { payload: { n: 3 } }])]) {
          const error: unknown = await publish().catch((failure: unknown) => failure);
          expect(error).toBeInstanceOf(SchemaError);
          expect((error as Error).message).toBe(
            'table "jobs": payload column "payload" is jsonb, which takes JSON text, not the bytes tablequeue writes by default; declare payload: { column: \'payload\', json: true } in defineTable',
          );
        }
        expect(await countRows(context.db, 'jobs')).toBe(0);
      });

      it('keeps payloads as JSON in a payload column declared { column, json: true } (jsonb, JSON, TEXT from createTableSql)', async () => {
        const table = defineTable({ ...jobsDeclaration({ form }), payload: { column: 'payload', json: true } });
        await createTable(stand, context.db, table);
        const queue = table.queue<{ n: number; note: string }>('emails');
        const broker = createBroker(context.db, context.brokers);
        const seen = new Collector<Message<{ n: number; note: string }>>();
        broker.subscribe(queue, (message) => {
          seen.push(message);
        });
        await broker.start();
        await broker.publish(queue, { n: 1, note: 'Ω "quoted" \\ back' });
        await broker.publishMany(queue, [2, 3].map((n) => ({ payload: { n, note: `n${n}` } })));
        await expect(broker.publish(queue, Buffer.from('not json') as never)).rejects.toThrow(/payload column holds JSON/);
        const messages = await seen.waitFor(3);
        await broker.stop();
        const first = messages.find((message) => message.payload.n === 1)!;
        expect(first.payload).toEqual({ n: 1, note: 'Ω "quoted" \\ back' });
        expect(JSON.parse(first.raw!.toString('utf8'))).toEqual(first.payload);
        expect(messages.map((message) => message.payload.n).sort()).toEqual([1, 2, 3]);
        expect(broker.stats().subscriptions[0]!.decodeFailures).toBe(0);
        expect(await countRows(context.db, 'jobs')).toBe(0);
      });

      it('acks by marking processed_at when the table has the column, and claims the row no more', async () => {
        const table = jobsTable({ form, mark: true });
        await createTable(stand, context.db, table);
        const queue = table.queue('emails');
        const broker = createBroker(context.db, context.brokers);
        const seen = new Collector<string>();
        broker.subscribe(queue, (message) => {
          seen.push(message.id);
        });
        await broker.start();
        await broker.publish(queue, 'first');
        await seen.waitFor(1);
        await broker.publish(queue, 'second');
        await seen.waitFor(2);
        await broker.stop();
        expect(await countRows(context.db, 'jobs', 'processed_at IS NOT NULL')).toBe(2);
        expect(new Set(seen.items).size).toBe(2);
      });

      it('drop finishes the row like ack', async () => {
        const table = jobsTable({ form });
        await createTable(stand, context.db, table);
        const queue = table.queue('emails');
        const broker = createBroker(context.db, context.brokers);
        const seen = new Collector<number>();
        broker.subscribe(queue, (message) => {
          seen.push(message.attempt);
          return Outcome.drop();
        });
        await broker.start();
        await broker.publish(queue, {});
        await seen.waitFor(1);
        await broker.stop();
        expect(await countRows(context.db, 'jobs')).toBe(0);
        expect(broker.stats().subscriptions[0]!.dropped).toBe(1);
      });

      it('retry returns the row at once and counts the attempt', async () => {
        const table = jobsTable({ form });
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

      it('retryAfter keeps the row in the table until it is due', async () => {
        const table = jobsTable({ form });
        await createTable(stand, context.db, table);
        const queue = table.queue('emails');
        const broker = createBroker(context.db, context.brokers);
        const deliveries = new Collector<{ attempt: number; at: number }>();
        broker.subscribe(queue, (message) => {
          deliveries.push({ attempt: message.attempt, at: Date.now() });
          return message.attempt === 1 ? Outcome.retryAfter(1_500) : Outcome.ack();
        });
        await broker.start();
        await broker.publish(queue, {});
        await deliveries.waitFor(1);
        await deliveries.waitFor(2);
        await broker.stop();
        const [first, second] = deliveries.items;
        expect(second!.attempt).toBe(2);
        // The host clock decides when the row is due; allow the claim's own rounding of 10 ms.
        expect(second!.at - first!.at).toBeGreaterThanOrEqual(1_490);
      });

      it('a publish with delayMs is not delivered before it is due', async () => {
        const table = jobsTable({ form });
        await createTable(stand, context.db, table);
        const queue = table.queue('emails');
        const broker = createBroker(context.db, context.brokers);
        const seen = new Collector<number>();
        broker.subscribe(queue, () => {
          seen.push(Date.now());
        });
        await broker.start();
        const publishedAt = Date.now();
        await broker.publish(queue, {}, { delayMs: 1_000 });
        await seen.waitFor(1);
        await broker.stop();
        expect(seen.items[0]! - publishedAt).toBeGreaterThanOrEqual(990);
      });

      it('a thrown error retries with a growing backoff and reaches the error event', async () => {
        const table = jobsTable({ form });
        await createTable(stand, context.db, table);
        const queue = table.queue('emails');
        const broker = createBroker(context.db, context.brokers);
        const errors = new Collector<unknown>();
        broker.on('error', (error) => errors.push(error));
        const deliveries = new Collector<number>();
        broker.subscribe(
          queue,
          (message) => {
            deliveries.push(Date.now());
            if (message.attempt < 3) throw new Error(`boom ${message.attempt}`);
          },
          { retryBackoff: { initialMs: 200 } },
        );
        await broker.start();
        await broker.publish(queue, {});
        await deliveries.waitFor(3);
        await broker.stop();
        const [first, second, third] = deliveries.items;
        // Backoff 200 ms then 400 ms, each with up to a quarter of jitter taken off.
        expect(second! - first!).toBeGreaterThanOrEqual(140);
        expect(third! - second!).toBeGreaterThanOrEqual(290);
        expect(errors.items.map((error) => (error as Error).message)).toEqual(['boom 1', 'boom 2']);
        // A QueueError like every report, holding exactly what the handler threw.
        for (const error of errors.items) {
          expect(error).toBeInstanceOf(HandlerError);
          expect(error).toMatchObject({ code: 'HANDLER', subscription: 'jobs/emails', messageIds: [expect.any(String)] });
          expect((error as HandlerError).cause).toBeInstanceOf(Error);
          expect((error as HandlerError).cause).not.toBeInstanceOf(QueueError);
        }
        expect(await countRows(context.db, 'jobs')).toBe(0);
      });

      it('serves higher priority (smaller number) first', async () => {
        const table = jobsTable({ form });
        await createTable(stand, context.db, table);
        const queue = table.queue<string>('emails');
        const publisher = createBroker(context.db, context.brokers);
        await publisher.start();
        await publisher.publish(queue, 'low', { priority: 5 });
        await publisher.publish(queue, 'high', { priority: 1 });
        await publisher.publish(queue, 'middle', { priority: 3 });
        const broker = createBroker(context.db, context.brokers);
        const seen = new Collector<string>();
        broker.subscribe(queue, (message) => {
          seen.push(message.payload);
        });
        await broker.start();
        await seen.waitFor(3);
        expect(seen.items).toEqual(['high', 'middle', 'low']);
      });

      it('publishMany writes every row and each is handled once', async () => {
        const table = jobsTable({ form });
        await createTable(stand, context.db, table);
        const queue = table.queue<number>('emails');
        const broker = createBroker(context.db, context.brokers);
        const seen = new Collector<number>();
        broker.subscribe(queue, (message) => {
          seen.push(message.payload);
        }, { workers: 4 });
        await broker.start();
        const items = Array.from({ length: 1_200 }, (_, index) => ({ payload: index }));
        expect(await broker.publishMany(queue, items)).toBe(1_200);
        await seen.waitFor(1_200, 60_000);
        await broker.stop();
        expect(new Set(seen.items).size).toBe(1_200);
      });

      it('a publish to one group is not handled by another group\'s subscription', async () => {
        const table = jobsTable({ form });
        await createTable(stand, context.db, table);
        const broker = createBroker(context.db, context.brokers);
        const emails = new Collector<string>();
        const sms = new Collector<string>();
        broker.subscribe(table.queue<string>('emails'), (message) => {
          emails.push(message.payload);
        });
        broker.subscribe(table.queue<string>('sms'), (message) => {
          sms.push(message.payload);
        });
        await broker.start();
        await broker.publish(table.queue('emails'), 'e1');
        await broker.publish(table.queue('sms'), 's1');
        await Promise.all([emails.waitFor(1), sms.waitFor(1)]);
        await broker.stop();
        expect(emails.items).toEqual(['e1']);
        expect(sms.items).toEqual(['s1']);
      });
    });
  }
}
