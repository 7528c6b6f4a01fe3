import { describe, expect, it } from 'vitest';
import { LAST_ERROR_HEADER } from '../../src/admin/open-queue-inspector.js';
import { decodeHeaders } from '../../src/delivery/codec.js';
import { MAX_LAST_ERROR_CHARACTERS } from '../../src/delivery/last-error.js';
import {
  defineTable,
  openQueueInspector,
  Outcome,
  type DeadLetterLocation,
  type PeekedRow,
  type QueueTable,
  type StandardSchemaV1,
} from '../../src/index.js';
import { Collector, countRows, createBroker, createTable, formsOf, jobsDeclaration, jobsTable } from '../fixtures.js';
import type { SuiteContext } from '../run-conformance.js';
import { advisoryDeclaration } from './advisory-tables.js';

type DeadLetterForm = 'rowLock' | 'lease' | 'advisory';

/** A `jobs` table of the form, with its headers column unless `headers: false`. */
function deadLetterTable(form: DeadLetterForm, options: { name?: string; grouped?: boolean; headers?: boolean } = {}): QueueTable {
  const shape = { grouped: options.grouped ?? true, ...(options.name === undefined ? {} : { name: options.name }) };
  const declaration = form === 'advisory' ? advisoryDeclaration(shape) : jobsDeclaration({ form, ...shape });
  return defineTable(options.headers === false ? { ...declaration, headers: undefined } : declaration);
}

/** The dead letters of table `jobs` as the operator tools read them. */
async function peekDeadLetters(context: SuiteContext, deadLetter: DeadLetterLocation): Promise<PeekedRow[]> {
  const driver = await context.db.openDriver();
  try {
    const inspector = await openQueueInspector({ database: driver, table: 'jobs', deadLetter });
    try {
      return await inspector.peek({ deadLetters: true });
    } finally {
      await inspector.close();
    }
  } finally {
    await driver.close();
  }
}

/** The headers column of every row of `table`, decoded by the codec the broker reads them with. */
async function storedHeaders(context: SuiteContext, table: string): Promise<Record<string, string>[]> {
  const rows = await context.db.query<{ headers: unknown }>(`SELECT headers FROM ${table}`);
  return rows.map((row) => decodeHeaders(row.headers));
}

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
        expect(await storedHeaders(context, 'jobs')).toEqual([{ [LAST_ERROR_HEADER]: 'retry requested at attempt 3 of 3' }]);
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
        const [headers] = await storedHeaders(context, 'jobs');
        expect(headers![LAST_ERROR_HEADER]).toMatch(/^DecodeError: payload is not UTF-8 JSON: /);
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

  const deadLetterForms: DeadLetterForm[] = [...formsOf(stand), 'advisory'];
  for (const form of deadLetterForms) {
    describe(`${form} dead letters record the last error`, () => {
      /** Publishes one row, fails it `maxAttempts` times with `thrown`, and stops once it was dead-lettered. */
      async function deadLetterOne(
        table: QueueTable,
        options: { deadLetter: string; thrown: unknown; headers?: Record<string, string> },
      ): Promise<string> {
        const queue = table.queue('emails');
        const broker = createBroker(context.db, context.brokers);
        broker.on('error', () => undefined);
        const attempts = new Collector<number>();
        broker.subscribe(
          queue,
          (message) => {
            attempts.push(message.attempt);
            throw options.thrown;
          },
          { maxAttempts: 2, deadLetter: options.deadLetter, retryBackoff: { initialMs: 10 } },
        );
        await broker.start();
        const id = await broker.publish(queue, { keep: 'me' }, options.headers === undefined ? {} : { headers: options.headers });
        await attempts.waitFor(2);
        await broker.stop();
        expect(broker.stats().subscriptions[0]!.deadLettered).toBe(1);
        return id;
      }

      it('a row moved into a group carries the thrown error in its headers, the other headers unchanged', async () => {
        const table = deadLetterTable(form);
        await createTable(stand, context.db, table);
        const message = 'smtp refused <42>: "quoted" \\ back\nslash é 😀 \u2028';
        const headers = {
          'x-note': 'a "quoted" \\ value é 😀',
          'x-request-id': '0af7651916cd43dd',
          [LAST_ERROR_HEADER]: 'from an earlier dead letter',
        };
        const id = await deadLetterOne(table, { deadLetter: 'emails.dead', thrown: new TypeError(message), headers });
        const expected = { ...headers, [LAST_ERROR_HEADER]: `TypeError: ${message}` };
        const rows = await context.db.query<{ id: unknown; queue: string }>('SELECT id, queue FROM jobs');
        expect(rows.map((row) => [String(row.id), row.queue])).toEqual([[id, 'emails.dead']]);
        expect(await storedHeaders(context, 'jobs')).toEqual([expected]);
        const peeked = await peekDeadLetters(context, { kind: 'group', group: 'emails.dead' });
        expect(peeked.map((row) => [row.id, row.lastError, row.headers])).toEqual([[id, `TypeError: ${message}`, expected]]);
      });

      it('a row without headers moved into a table carries the error, made storable and cut to its bound', async () => {
        const table = deadLetterTable(form, { grouped: false });
        await createTable(stand, context.db, table);
        await createTable(stand, context.db, deadLetterTable(form, { grouped: false, name: 'jobs_dead' }));
        const thrown = new Error(`bad\u0000byte ${'x'.repeat(3_000)}`);
        const id = await deadLetterOne(table, { deadLetter: 'jobs_dead', thrown });
        const lastError = `${`bad\uFFFDbyte ${'x'.repeat(3_000)}`.slice(0, MAX_LAST_ERROR_CHARACTERS - 1)}…`;
        expect(await countRows(context.db, 'jobs')).toBe(0);
        expect(await storedHeaders(context, 'jobs_dead')).toEqual([{ [LAST_ERROR_HEADER]: lastError }]);
        const peeked = await peekDeadLetters(context, { kind: 'table', table: 'jobs_dead' });
        expect(peeked.map((row) => [row.id, row.lastError, row.payload])).toEqual([[id, lastError, { keep: 'me' }]]);
      });

      it('a table without headers still dead-letters, into a group and into a table', async () => {
        const grouped = deadLetterTable(form, { headers: false });
        await createTable(stand, context.db, grouped);
        const id = await deadLetterOne(grouped, { deadLetter: 'emails.dead', thrown: new Error('no headers to write') });
        const rows = await context.db.query<{ id: unknown; queue: string }>('SELECT id, queue FROM jobs');
        expect(rows.map((row) => [String(row.id), row.queue])).toEqual([[id, 'emails.dead']]);
        const peeked = await peekDeadLetters(context, { kind: 'group', group: 'emails.dead' });
        expect(peeked.map((row) => [row.id, row.lastError])).toEqual([[id, null]]);
        await context.db.exec('DROP TABLE jobs');

        const table = deadLetterTable(form, { grouped: false, headers: false });
        await createTable(stand, context.db, table);
        await createTable(stand, context.db, deadLetterTable(form, { grouped: false, headers: false, name: 'jobs_dead' }));
        const movedId = await deadLetterOne(table, { deadLetter: 'jobs_dead', thrown: new Error('no headers to write') });
        expect(await countRows(context.db, 'jobs')).toBe(0);
        const moved = await context.db.query<{ id: unknown }>('SELECT id FROM jobs_dead');
        expect(moved.map((row) => String(row.id))).toEqual([movedId]);
      });
    });
  }
}
