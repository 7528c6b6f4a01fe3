import { describe, expect, it } from 'vitest';
import { defineTable, openQueueInspector, Outcome, type DeadLetterLocation, type Logger, type PeekedRow, type QueueTable } from '../../src/index.js';
import { Collector, createBroker, createTable, formsOf, jobsDeclaration } from '../fixtures.js';
import type { SuiteContext } from '../run-conformance.js';
import { advisoryDeclaration } from './advisory-tables.js';

type Form = 'rowLock' | 'lease' | 'advisory';

/** A `jobs` table of the form: grouped by `queue` unless `grouped: false`, with a retryAfter column unless told otherwise. */
function formTable(form: Form, options: { name?: string; grouped?: boolean; withRetryAfter?: boolean } = {}): QueueTable {
  const shape = { grouped: options.grouped ?? true, ...(options.name === undefined ? {} : { name: options.name }) };
  const declaration = form === 'advisory' ? advisoryDeclaration(shape) : jobsDeclaration({ form, ...shape });
  return defineTable(options.withRetryAfter === false ? { ...declaration, retryAfter: undefined } : declaration);
}

interface LoggedLine {
  readonly level: 'warn' | 'error';
  readonly message: string;
  readonly detail: Record<string, unknown>;
}

/** A logger that keeps every line, as a service's own logger would receive them. */
function collectingLogger(): { logger: Logger; errors: Collector<LoggedLine>; warnings: Collector<LoggedLine> } {
  const errors = new Collector<LoggedLine>();
  const warnings = new Collector<LoggedLine>();
  return {
    errors,
    warnings,
    logger: {
      error: (message, detail) => errors.push({ level: 'error', message, detail: detail ?? {} }),
      warn: (message, detail) => warnings.push({ level: 'warn', message, detail: detail ?? {} }),
    },
  };
}

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

/**
 * What a person sees when handlers fail: the log line with the error's stack, when the message
 * comes back or where it went, and the attempts a dead letter shows.
 */
export function failureVisibilitySuite(context: SuiteContext): void {
  const { stand } = context;
  const forms: Form[] = [...formsOf(stand), 'advisory'];

  for (const form of forms) {
    describe(`${form}: handler failures a person can see`, () => {
      it('logs a thrown error with its stack and the next attempt time, then its move into the dead-letter group', async () => {
        const table = formTable(form);
        await createTable(stand, context.db, table);
        const queue = table.queue('emails');
        const { logger, errors } = collectingLogger();
        const broker = createBroker(context.db, context.brokers, { logger });
        const startedAt = new Collector<number>();
        broker.subscribe(
          queue,
          function sendWelcomeEmail(message) {
            startedAt.push(Date.now());
            throw new TypeError(`smtp refused on attempt ${message.attempt}`);
          },
          { maxAttempts: 2, deadLetter: 'emails.dead', retryBackoff: { initialMs: 400, maxMs: 400 } },
        );
        await broker.start();
        const id = await broker.publish(queue, { to: 'a@b.c' });
        await errors.waitFor(2);
        await broker.stop();

        const [retried, moved] = errors.items;
        const nextAttemptAt = retried!.detail['nextAttemptAt'] as Date;
        expect(nextAttemptAt).toBeInstanceOf(Date);
        expect(retried!.message).toBe(
          `subscription "jobs/emails": the handler threw on message ${id} at attempt 1 of 2: TypeError: smtp refused on attempt 1; ` +
            `next attempt at ${nextAttemptAt.toISOString()}, in ${String(retried!.detail['retryDelayMs'])} ms`,
        );
        expect(retried!.detail).toMatchObject({ subscription: 'jobs/emails', messageId: id, phase: 'handler', attempt: 1, maxAttempts: 2 });
        // The backoff of the first attempt: 400 ms less up to a quarter of jitter.
        expect(retried!.detail['retryDelayMs']).toBeGreaterThanOrEqual(300);
        expect(retried!.detail['retryDelayMs']).toBeLessThanOrEqual(400);
        const thrown = retried!.detail['error'] as Error;
        expect(thrown).toBeInstanceOf(TypeError);
        expect(thrown.stack).toMatch(/^TypeError: smtp refused on attempt 1\n\s+at sendWelcomeEmail .*failure-visibility\.suite\.ts/);
        // The time said is the time kept: the second attempt starts no earlier.
        expect(startedAt.items[1]).toBeGreaterThanOrEqual(nextAttemptAt.getTime());

        expect(moved!.message).toBe(
          `subscription "jobs/emails": the handler threw on message ${id} at attempt 2 of 2: TypeError: smtp refused on attempt 2; ` +
            'no attempt left: moved to dead-letter group "emails.dead"',
        );
        expect(moved!.detail).toMatchObject({ messageId: id, attempt: 2, deadLetter: { group: 'emails.dead' } });
        expect(moved!.detail['nextAttemptAt']).toBeUndefined();
        expect((moved!.detail['error'] as Error).stack).toMatch(/at sendWelcomeEmail /);
      });

      it('says "at once" where the table has no retryAfter column', async () => {
        const table = formTable(form, { withRetryAfter: false });
        await createTable(stand, context.db, table);
        const queue = table.queue('emails');
        const { logger, errors, warnings } = collectingLogger();
        const broker = createBroker(context.db, context.brokers, { logger });
        const attempts = new Collector<number>();
        broker.subscribe(queue, (message) => {
          attempts.push(message.attempt);
          if (message.attempt === 1) throw new Error('boom');
        });
        await broker.start();
        const id = await broker.publish(queue, {});
        await attempts.waitFor(2);
        await broker.stop();
        expect(errors.items).toHaveLength(1);
        expect(errors.items[0]!.message).toBe(`subscription "jobs/emails": the handler threw on message ${id} at attempt 1: Error: boom; next attempt at once`);
        expect(errors.items[0]!.detail).toMatchObject({ attempt: 1, retryDelayMs: 0, nextAttemptAt: expect.any(Date) });
        expect(warnings.items.map((line) => line.message)).toEqual([expect.stringMatching(/has no retryAfter column, so delayed retries go back to the queue at once/)]);
      });

      it('names a dead-letter table, for a thrown error and for a retry asked for at the last attempt', async () => {
        const table = formTable(form, { grouped: false });
        await createTable(stand, context.db, table);
        await createTable(stand, context.db, formTable(form, { grouped: false, name: 'jobs_dead' }));
        const queue = table.queue('jobs');
        const { logger, errors, warnings } = collectingLogger();
        const broker = createBroker(context.db, context.brokers, { logger });
        broker.subscribe(
          queue,
          (message) => {
            if ((message.payload as { fail: string }).fail === 'throw') throw new RangeError('out of stock');
            return Outcome.retry();
          },
          { maxAttempts: 1, deadLetter: 'jobs_dead' },
        );
        await broker.start();
        const thrownId = await broker.publish(queue, { fail: 'throw' });
        await errors.waitFor(1);
        const retriedId = await broker.publish(queue, { fail: 'retry' });
        await warnings.waitFor(1);
        await broker.stop();
        expect(errors.items.map((line) => line.message)).toEqual([
          `subscription "jobs": the handler threw on message ${thrownId} at attempt 1 of 1: RangeError: out of stock; no attempt left: moved to dead-letter table "jobs_dead"`,
        ]);
        expect(errors.items[0]!.detail).toMatchObject({ deadLetter: { table: 'jobs_dead' } });
        expect(warnings.items.map((line) => line.message)).toEqual([
          `subscription "jobs": message ${retriedId} had no attempt left (retry requested at attempt 1 of 1) and moved to dead-letter table "jobs_dead"`,
        ]);
      });

      for (const deadLetter of [
        { kind: 'group', group: 'emails.dead' },
        { kind: 'table', table: 'jobs_dead' },
      ] satisfies DeadLetterLocation[]) {
        it(`a dead letter moved into a ${deadLetter.kind} shows the attempts it was given`, async () => {
          const grouped = deadLetter.kind === 'group';
          const table = formTable(form, { grouped });
          await createTable(stand, context.db, table);
          if (!grouped) await createTable(stand, context.db, formTable(form, { grouped: false, name: 'jobs_dead' }));
          const queue = table.queue(grouped ? 'emails' : 'jobs');
          const broker = createBroker(context.db, context.brokers);
          broker.on('error', () => undefined);
          const attempts = new Collector<number>();
          broker.subscribe(
            queue,
            (message) => {
              attempts.push(message.attempt);
              throw new Error('always fails');
            },
            { maxAttempts: 3, deadLetter: grouped ? deadLetter.group : deadLetter.table, retryBackoff: { initialMs: 10 } },
          );
          await broker.start();
          const id = await broker.publish(queue, {});
          await attempts.waitFor(3);
          await broker.stop();
          expect(attempts.items).toEqual([1, 2, 3]);
          expect(broker.stats().subscriptions[0]!.deadLettered).toBe(1);
          // Every form leaves the column one past the attempts made, as a retried row has it.
          const stored = await context.db.query<{ attempt: unknown }>(`SELECT attempt FROM ${grouped ? 'jobs' : 'jobs_dead'}`);
          expect(stored.map((row) => Number(row.attempt))).toEqual([4]);
          const peeked = await peekDeadLetters(context, deadLetter);
          expect(peeked.map((row) => [row.id, row.attemptsMade, row.attempt])).toEqual([[id, 3, 4]]);
        });
      }
    });
  }

  describe('handler failures with an error listener', () => {
    it("the 'error' event gets the error and what comes next, for each message of a batch, and the logger stays quiet", async () => {
      const table = formTable('lease');
      await createTable(stand, context.db, table);
      const queue = table.queue('emails');
      const { logger, errors } = collectingLogger();
      const broker = createBroker(context.db, context.brokers, { logger });
      const reports = new Collector<{ error: unknown; detail: Record<string, unknown> }>();
      broker.on('error', (error, detail) => reports.push({ error, detail }));
      broker.subscribe(
        queue,
        () => {
          throw new Error('batch failed');
        },
        { batch: 2, maxAttempts: 2, deadLetter: 'emails.dead', retryBackoff: { initialMs: 60_000 } },
      );
      const publisher = createBroker(context.db, context.brokers);
      await publisher.start();
      const ids = [await publisher.publish(queue, { n: 1 }), await publisher.publish(queue, { n: 2 })];
      await publisher.stop();
      // The second row is on its last attempt: it moves, the first waits for its backoff.
      await context.db.exec(`UPDATE jobs SET attempt = 2 WHERE id = ${ids[1]!}`);
      await broker.start();
      await reports.waitFor(1);
      await broker.stop();
      const [report] = reports.items;
      expect((report!.error as Error).message).toBe('batch failed');
      expect(report!.detail).toMatchObject({
        subscription: 'jobs/emails',
        messageId: ids.join(','),
        phase: 'handler',
        maxAttempts: 2,
        deadLetter: { group: 'emails.dead' },
        deadLetteredIds: ids[1],
      });
      expect(report!.detail['attempt']).toBeUndefined();
      expect(report!.detail['retryDelayMs']).toBeGreaterThanOrEqual(45_000);
      expect(report!.detail['nextAttemptAt']).toBeInstanceOf(Date);
      expect(report!.detail['error']).toBeUndefined();
      expect(errors.items).toEqual([]);
    });
  });
}
