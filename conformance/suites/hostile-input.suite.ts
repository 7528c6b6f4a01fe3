import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { EncodeError } from '../../src/index.js';
import { Collector, countRows, createBroker, createTable, formsOf, jobsDeclaration } from '../fixtures.js';
import { defineTable } from '../../src/index.js';
import type { SuiteContext } from '../run-conformance.js';

/** The same generated inputs on every run, so a failure names a case that reproduces. */
const SEED = 20261130;

/** Text a column can store unchanged: no NUL, no unpaired surrogate; up to VARCHAR(255) on MySQL. */
const storableText = fc
  .string({ unit: 'grapheme', maxLength: 60 })
  .filter((text) => !text.includes('\u0000') && [...text].length <= 255);

/** Hostile and odd input round-trips byte-exact, or is refused before anything is written. */
export function hostileInputSuite(context: SuiteContext): void {
  const { stand } = context;
  const form = formsOf(stand).at(-1)!;
  const table = () => defineTable({ ...jobsDeclaration({ form }), partitionKey: 'customer' });

  describe(`${form} hostile input`, () => {
    it('payload bytes of any content and size come back byte-exact', async () => {
      await createTable(stand, context.db, table());
      const queue = table().queue<Buffer>('emails');
      const samples = [
        ...fc.sample(fc.uint8Array({ maxLength: 2_048 }), { numRuns: 40, seed: SEED }),
        new Uint8Array(0),
        new Uint8Array([0, 0, 0]),
        new Uint8Array([0xff, 0xfe, 0xc3, 0x28]),
        new Uint8Array(1_000_000).map((_, index) => (index * 7) % 256),
      ];
      const broker = createBroker(context.db, context.brokers);
      const received = new Collector<{ id: string; raw: Buffer }>();
      broker.subscribe(queue, (message) => void received.push({ id: message.id, raw: message.payload }), {
        decode: (raw: Buffer) => raw,
        workers: 4,
      });
      await broker.start();
      const published = new Map<string, Uint8Array>();
      for (const bytes of samples) published.set(await broker.publish(queue, Buffer.from(bytes)), bytes);
      await received.waitFor(samples.length, 60_000);
      for (const { id, raw } of received.items) expect(Buffer.compare(raw, Buffer.from(published.get(id)!))).toBe(0);
    });

    it('JSON payloads, headers and partition keys round-trip exactly', async () => {
      await createTable(stand, context.db, table());
      const queue = table().queue('emails');
      const cases = fc.sample(
        fc.record({
          payload: fc.jsonValue({ maxDepth: 4 }),
          headers: fc.dictionary(storableText, storableText, { maxKeys: 5 }),
          partitionKey: fc.option(storableText, { nil: null }),
        }),
        { numRuns: 50, seed: SEED },
      );
      cases.push({ payload: { '__proto__': 1, text: 'naïve 😀 \u2028' }, headers: { '': '', '__proto__': 'p' }, partitionKey: '' });
      const broker = createBroker(context.db, context.brokers);
      const received = new Collector<{ id: string; payload: unknown; headers: unknown; partitionKey: string | null }>();
      broker.subscribe(queue, (message) => {
        received.push({ id: message.id, payload: message.payload, headers: message.headers, partitionKey: message.partitionKey });
      }, { workers: 4 });
      await broker.start();
      const published = new Map<string, (typeof cases)[number]>();
      for (const item of cases) {
        published.set(await broker.publish(queue, item.payload, { headers: item.headers, partitionKey: item.partitionKey }), item);
      }
      await received.waitFor(cases.length, 60_000);
      for (const item of received.items) {
        const sent = published.get(item.id)!;
        expect(JSON.stringify(item.payload)).toBe(JSON.stringify(sent.payload));
        expect(item.headers).toEqual(sent.headers);
        expect(item.partitionKey).toBe(sent.partitionKey);
      }
    });

    it('refuses unstorable keys and headers and oversized payloads before any write', async () => {
      await createTable(stand, context.db, table());
      const queue = table().queue('emails');
      const broker = createBroker(context.db, context.brokers, { maxPayloadBytes: 1_024 });
      await broker.start();
      await expect(broker.publish(queue, {}, { partitionKey: 'a\u0000b' })).rejects.toThrow(EncodeError);
      await expect(broker.publish(queue, {}, { partitionKey: '\uD83D' })).rejects.toThrow(EncodeError);
      await expect(broker.publish(queue, {}, { headers: { trace: '\u0000' } })).rejects.toThrow(EncodeError);
      await expect(broker.publish(queue, 'x'.repeat(2_000))).rejects.toThrow(/over the limit of 1024/);
      await expect(
        broker.publishMany(queue, [{ payload: 'fine' }, { payload: 'y'.repeat(2_000) }]),
      ).rejects.toThrow(EncodeError);
      expect(await countRows(context.db, 'jobs')).toBe(0);
    });

    it('undecodable rows never stop the subscription: every good row is handled', async () => {
      await createTable(stand, context.db, table());
      const queue = table().queue('emails');
      const broker = createBroker(context.db, context.brokers);
      const handled = new Collector<unknown>();
      const errors = new Collector<unknown>();
      broker.on('error', (error) => errors.push(error));
      broker.subscribe(queue, (message) => void handled.push(message.payload), { workers: 2 });
      await broker.start();
      for (let index = 0; index < 20; index += 1) {
        await broker.publish(queue, index % 2 === 0 ? Buffer.from([0xc3, 0x28, index]) : { good: index });
      }
      await handled.waitFor(10);
      await errors.waitFor(10);
      await broker.stop();
      expect(await countRows(context.db, 'jobs')).toBe(0);
      expect(broker.stats().subscriptions[0]!.decodeFailures).toBe(10);
    });
  });
}
