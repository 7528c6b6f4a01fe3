import { describe, expect, it } from 'vitest';
import {
  AlreadySubscribedError,
  Broker,
  ClosedError,
  ConnectionError,
  defineTable,
  EncodeError,
  SchemaError,
  UnsupportedError,
} from '../../src/index.js';
import { countRows, createBroker, createTable, formsOf, jobsTable } from '../fixtures.js';
import type { SuiteContext } from '../run-conformance.js';

/** What `start()` checks, and bad input that must fail before anything is written. */
export function startupSuite(context: SuiteContext): void {
  const { stand } = context;
  describe('start-up checks and bad input', () => {
    for (const form of formsOf(stand)) {
      it(`${form}: a missing table fails start() with a SchemaError naming it`, async () => {
        const broker = createBroker(context.db, context.brokers);
        broker.subscribe(jobsTable({ form, name: 'no_such_jobs' }).queue('emails'), () => undefined);
        const failure = await broker.start().then(
          () => undefined,
          (error: unknown) => error,
        );
        expect(failure).toBeInstanceOf(SchemaError);
        expect((failure as SchemaError).table).toBe('no_such_jobs');
        expect((failure as Error).message).toContain('no_such_jobs');
      });

      it(`${form}: a missing dead-letter table fails start() with a SchemaError that says how to make it`, async () => {
        const jobs = jobsTable({ form, grouped: false });
        await createTable(stand, context.db, jobs);
        const broker = createBroker(context.db, context.brokers);
        broker.subscribe(jobs.queue('emails'), () => undefined, { maxAttempts: 3, deadLetter: 'failed_jobs' });
        const failure = await broker.start().catch((error: unknown) => error);
        expect(failure).toBeInstanceOf(SchemaError);
        expect((failure as SchemaError).statement).toMatch(/^settle\.deadLetter/);
        expect((failure as Error).message).toContain(
          `the dead-letter table "failed_jobs" needs the columns of "jobs", of the same types: create it from the queue table's declaration under its own name (defineTable({ ...declaration, table: 'failed_jobs' }).createTableSql())`,
        );
      });

      it(`${form}: a role naming a missing column fails start() with a SchemaError naming the column`, async () => {
        await createTable(stand, context.db, jobsTable({ form }));
        const declared = defineTable({
          table: 'jobs',
          id: 'id',
          group: 'queue',
          payload: 'payload',
          partitionKey: 'customer',
          ...(form === 'lease' ? { lockedUntil: 'locked_until' } : {}),
        });
        const broker = createBroker(context.db, context.brokers);
        broker.subscribe(declared.queue('emails'), () => undefined);
        await expect(broker.start()).rejects.toThrow(/"customer"/);
      });
    }

    if (!stand.capabilities.supportsRowLock) {
      it('refuses a row lock table at start and says to add lockedUntil', async () => {
        await createTable(stand, context.db, jobsTable({ form: 'lease' }));
        const rowLock = defineTable({ table: 'jobs', id: 'id', group: 'queue', payload: 'payload' });
        const broker = createBroker(context.db, context.brokers);
        broker.subscribe(rowLock.queue('emails'), () => undefined);
        const failure = await broker.start().catch((error: unknown) => error);
        expect(failure).toBeInstanceOf(UnsupportedError);
        expect((failure as Error).message).toContain('lockedUntil');
      });
    }

    it('refuses a second subscription on the same queue', () => {
      const table = jobsTable({ form: 'lease' });
      const broker = createBroker(context.db, context.brokers);
      broker.subscribe(table.queue('emails'), () => undefined);
      expect(() => broker.subscribe(table.queue('emails'), () => undefined)).toThrow(AlreadySubscribedError);
    });

    it('refuses to publish before start and a payload with no JSON form, writing nothing', async () => {
      const table = jobsTable({ form: formsOf(stand)[0]! });
      await createTable(stand, context.db, table);
      const broker = createBroker(context.db, context.brokers);
      await expect(broker.publish(table.queue('emails'), {})).rejects.toThrow(ClosedError);
      await broker.start();
      await expect(broker.publish(table.queue('emails'), { big: 1n })).rejects.toThrow(EncodeError);
      await expect(broker.publish(table.queue('emails'), undefined)).rejects.toThrow(EncodeError);
      await broker.stop();
      expect(await countRows(context.db, 'jobs')).toBe(0);
    });

    if (stand.kind !== 'sqlite') {
      it('a database that is down at start() fails with a ConnectionError naming the host', async () => {
        const url = new URL(context.db.url!);
        url.port = '1';
        const broker = new Broker({ database: url.toString() });
        const failure = await broker.start().catch((error: unknown) => error);
        expect(failure).toBeInstanceOf(ConnectionError);
        expect((failure as Error).message).toContain(url.hostname);
      });
    }
  });
}
