import { describe, expect, it } from 'vitest';
import { defineTable, DeclarationError } from '../../src/index.js';
import { Collector, countRows, createBroker, createTable, formsOf } from '../fixtures.js';
import type { SuiteContext } from '../run-conformance.js';

/** Row mode: a table without a payload column; the handler receives the row itself. */
export function rowModeSuite(context: SuiteContext): void {
  const { stand } = context;
  for (const form of formsOf(stand)) {
    describe(`${form} row mode`, () => {
      it('publishes data columns and hands the handler the row', async () => {
        const table = defineTable({
          table: 'tasks',
          id: 'id',
          group: 'queue',
          attempt: 'attempt',
          retryAfter: 'retry_after',
          headers: 'headers',
          ...(form === 'lease' ? { lockedUntil: 'locked_until' } : {}),
        });
        await createTable(stand, context.db, table);
        await context.db.exec('ALTER TABLE tasks ADD COLUMN recipient VARCHAR(255)');
        await context.db.exec('ALTER TABLE tasks ADD COLUMN subject VARCHAR(255)');
        const queue = table.queue<{ recipient: string; subject: string }>('mail');
        const broker = createBroker(context.db, context.brokers);
        const seen = new Collector<{ recipient: unknown; subject: unknown; raw: unknown; headers: unknown }>();
        broker.subscribe(queue, (message) => {
          seen.push({
            recipient: message.payload.recipient,
            subject: message.payload.subject,
            raw: message.raw,
            headers: message.headers,
          });
        });
        await broker.start();
        await broker.publish(queue, { recipient: 'a@b.c', subject: 'hello' }, { headers: { 'x-trace': 't-1' } });
        await broker.publishMany(queue, [
          { payload: { recipient: 'd@e.f', subject: 'second' } },
          { payload: { recipient: 'g@h.i', subject: 'third' } },
        ]);
        await seen.waitFor(3);
        await expect(broker.publish(queue, { recipient: 'x', queue: 'other' } as never)).rejects.toThrow(DeclarationError);
        await expect(broker.publish(queue, 'not an object' as never)).rejects.toThrow(/row mode/);
        await expect(broker.publish(queue, { 'bad name;': 1 } as never)).rejects.toThrow(DeclarationError);
        await broker.stop();
        expect(seen.items.map((item) => item.recipient).sort()).toEqual(['a@b.c', 'd@e.f', 'g@h.i']);
        expect(seen.items.find((item) => item.recipient === 'a@b.c')).toMatchObject({
          subject: 'hello',
          raw: undefined,
          headers: { 'x-trace': 't-1' },
        });
        expect(await countRows(context.db, 'tasks')).toBe(0);
      });
    });
  }
}
