import { describe, expect, it } from 'vitest';
import { Outcome, type StandardSchemaV1 } from '../../src/index.js';
import { Collector, countRows, createBroker, createTable, formsOf, jobsTable } from '../fixtures.js';
import type { SuiteContext } from '../run-conformance.js';

/** maxAttempts with deadLetter, and what happens to rows whose payload does not decode. */
export function retrySuite(context: SuiteContext): void {
  const { stand } = context;
  for (const form of formsOf(stand)) {
    describe(`${form} dead letters and decode failures`, () => {
      it('moves a row to the dead-letter group at maxAttempts, keeping its attempts', async () => {
        const table = jobsTable({ form });
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
          { maxAttempts: 3, deadLetter: 'emails.dead' },
        );
        await broker.start();
        const id = await broker.publish(queue, {});
        await attempts.waitFor(3);
        await broker.stop();
        expect(attempts.items).toEqual([1, 2, 3]);
        const rows = await context.db.query<{ id: unknown; queue: string; attempt: unknown }>(
          'SELECT id, queue, attempt FROM jobs',
        );
        expect(rows.map((row) => [String(row.id), row.queue])).toEqual([[id, 'emails.dead']]);
        expect(broker.stats().subscriptions[0]!.deadLettered).toBe(1);
      });

      it('moves a row into the dead-letter table at maxAttempts', async () => {
        const table = jobsTable({ form, grouped: false });
        const dead = jobsTable({ form, grouped: false, name: 'jobs_dead' });
        await createTable(stand, context.db, table);
        await createTable(stand, context.db, dead);
        const queue = table.queue('jobs');
        const broker = createBroker(context.db, context.brokers);
        const attempts = new Collector<number>();
        broker.subscribe(
          queue,
          (message) => {
            attempts.push(message.attempt);
            throw new Error('always fails');
          },
          { maxAttempts: 2, deadLetter: 'jobs_dead', retryBackoff: { initialMs: 10 } },
        );
        broker.on('error', () => undefined);
        await broker.start();
        const id = await broker.publish(queue, { keep: 'me' });
        await attempts.waitFor(2);
        await broker.stop();
        expect(await countRows(context.db, 'jobs')).toBe(0);
        const moved = await context.db.query<Record<string, unknown>>('SELECT * FROM jobs_dead');
        expect(moved).toHaveLength(1);
        expect(String(moved[0]!['id'])).toBe(id);
        expect(Buffer.from(moved[0]!['payload'] as Uint8Array).toString()).toBe('{"keep":"me"}');
        if (form === 'lease') expect(moved[0]!['locked_until']).toBeNull();
      });

      it('maxAttempts: 1 moves the row at the first failure', async () => {
        const table = jobsTable({ form });
        await createTable(stand, context.db, table);
        const queue = table.queue('emails');
        const broker = createBroker(context.db, context.brokers);
        const attempts = new Collector<number>();
        broker.subscribe(
          queue,
          (message) => {
            attempts.push(message.attempt);
            return Outcome.retryAfter(10);
          },
          { maxAttempts: 1, deadLetter: 'failed' },
        );
        await broker.start();
        await broker.publish(queue, {});
        await attempts.waitFor(1);
        await broker.stop();
        expect(attempts.items).toEqual([1]);
        expect(await countRows(context.db, 'jobs', "queue = 'failed'")).toBe(1);
      });

      it('drops an undecodable row by default without calling the handler', async () => {
        const table = jobsTable({ form });
        await createTable(stand, context.db, table);
        const queue = table.queue('emails');
        const broker = createBroker(context.db, context.brokers);
        const handled = new Collector<unknown>();
        const errors = new Collector<unknown>();
        broker.on('error', (error) => errors.push(error));
        broker.subscribe(queue, (message) => {
          handled.push(message.payload);
        });
        await broker.start();
        await broker.publish(queue, Buffer.from('not json {'));
        await broker.publish(queue, { fine: true });
        await handled.waitFor(1);
        await errors.waitFor(1);
        await broker.stop();
        expect(handled.items).toEqual([{ fine: true }]);
        expect((errors.items[0] as Error).name).toBe('DecodeError');
        expect(await countRows(context.db, 'jobs')).toBe(0);
        expect(broker.stats().subscriptions[0]!.decodeFailures).toBe(1);
      });

      it("onDecodeFailure: { retryAfterMs } keeps the row and counts toward maxAttempts", async () => {
        const table = jobsTable({ form });
        await createTable(stand, context.db, table);
        const queue = table.queue('emails');
        const broker = createBroker(context.db, context.brokers);
        const failures = new Collector<unknown>();
        broker.on('error', (error) => failures.push(error));
        broker.subscribe(queue, () => undefined, {
          onDecodeFailure: { retryAfterMs: 20 },
          maxAttempts: 3,
          deadLetter: 'undecodable',
        });
        await broker.start();
        await broker.publish(queue, Buffer.from([0xff, 0xfe]));
        await failures.waitFor(3);
        await broker.stop();
        expect(await countRows(context.db, 'jobs', "queue = 'undecodable'")).toBe(1);
      });

      it('a custom decode and a Standard Schema validator type the payload', async () => {
        const table = jobsTable({ form });
        await createTable(stand, context.db, table);
        const broker = createBroker(context.db, context.brokers);
        const decoded = new Collector<unknown>();
        const schema: StandardSchemaV1<unknown, { to: string }> = {
          '~standard': {
            version: 1 as const,
            vendor: 'test',
            validate: (value: unknown) =>
              typeof value === 'object' && value !== null && typeof (value as { to?: unknown }).to === 'string'
                ? { value: value as { to: string } }
                : { issues: [{ message: 'to must be a string' }] },
          },
        };
        broker.subscribe(table.queue('emails'), (message) => {
          decoded.push(message.payload.to);
        }, { decode: schema });
        broker.subscribe(table.queue('raw'), (message) => {
          decoded.push(message.payload);
        }, { decode: (raw: Buffer) => raw.toString('hex') });
        const errors = new Collector<unknown>();
        broker.on('error', (error) => errors.push(error));
        await broker.start();
        await broker.publish(table.queue('emails'), { to: 'a@b.c' });
        await broker.publish(table.queue('emails'), { to: 42 });
        await broker.publish(table.queue('raw'), Buffer.from([1, 2, 255]));
        await decoded.waitFor(2);
        await errors.waitFor(1);
        await broker.stop();
        expect(decoded.items.sort()).toEqual(['0102ff', 'a@b.c']);
        expect((errors.items[0] as Error).message).toContain('to must be a string');
        expect(broker.stats().subscriptions[0]!.decodeFailures).toBe(1);
      });
    });
  }
}
