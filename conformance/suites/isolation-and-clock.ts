/**
 * Isolation levels, SQLite begin modes and the database clock, observed through what they change:
 * what a transactional handler reads, whether another session may write meanwhile, and when rows
 * are due while the host's clock is wrong. Part of the transactional suite.
 */
import Database from 'better-sqlite3';
import { describe, expect, it, vi } from 'vitest';
import {
  defineTable,
  Outcome,
  UnsupportedError,
  type HandlerTransaction,
  type IsolationLevel,
  type TableDeclaration,
} from '../../src/index.js';
import { createDeferred } from '../../src/internal/deferred.js';
import { Collector, countRows, createBroker, createTable, formsOf, jobsDeclaration, placeholder } from '../fixtures.js';
import type { SuiteContext } from '../run-conformance.js';
import { advisoryDeclaration } from './advisory-tables.js';

/** How far behind the real time the host's clock is set in the database clock tests. */
const HOST_CLOCK_BEHIND_MS = 3_600_000;

export function isolationAndClockSuite(context: SuiteContext): void {
  const { stand } = context;
  const levels = stand.capabilities.isolationLevels;
  // SQLite transactions are always serializable; a table chooses their begin mode instead.
  const hasBeginModes = levels.length === 0;

  /** One row, one integer: what the handlers read twice in one transaction. */
  async function createCounter(): Promise<void> {
    await context.db.exec('CREATE TABLE counter (value INTEGER NOT NULL)');
    await context.db.exec('INSERT INTO counter (value) VALUES (1)');
  }

  async function readCounter(tx: HandlerTransaction | undefined): Promise<number> {
    if (tx === undefined) throw new Error('a transactional handler gets context.tx');
    const rows = await tx.query<{ value: unknown }>('SELECT value FROM counter');
    return Number(rows[0]?.value);
  }

  for (const form of [...formsOf(stand), 'advisory'] as const) {
    const declarationOfForm = (): TableDeclaration =>
      form === 'advisory' ? advisoryDeclaration() : jobsDeclaration({ form });

    describe.skipIf(!levels.includes('repeatable read'))(`${form} isolation levels`, () => {
      it.each([
        ['repeatable read', 'repeatable read', [1, 1]],
        ['the default level', undefined, [1, 2]],
      ] as const)('a handler at %s reads what that level shows of a concurrent commit', async (_, isolation, expected) => {
        const declaration: TableDeclaration = { ...declarationOfForm(), isolation };
        const table = defineTable(declaration);
        await createTable(stand, context.db, table);
        await createCounter();
        const queue = table.queue('emails');
        const broker = createBroker(context.db, context.brokers);
        const firstRead = createDeferred();
        const committed = createDeferred();
        const reads = new Collector<number[]>();
        broker.subscribe(
          queue,
          async (_message, { tx }) => {
            const before = await readCounter(tx);
            firstRead.resolve();
            await committed.promise;
            reads.push([before, await readCounter(tx)]);
          },
          { transactional: true },
        );
        await broker.start();
        await broker.publish(queue, {});
        await firstRead.promise;
        await context.db.query('UPDATE counter SET value = 2');
        committed.resolve();
        await reads.waitFor(1);
        await broker.stop();
        // Repeatable read keeps the snapshot of its first read; the default (read committed) does not.
        expect(reads.items[0]).toEqual(expected);
      });
    });

    describe.skipIf(!levels.includes('read uncommitted'))(`${form} read uncommitted`, () => {
      it('a handler at read uncommitted reads what another session has not committed', async () => {
        const table = defineTable({ ...declarationOfForm(), isolation: 'read uncommitted' });
        await createTable(stand, context.db, table);
        await createCounter();
        const other = await (await context.db.openDriver()).acquire();
        await other.execute({ name: 'test.begin', sql: 'BEGIN', values: [] });
        await other.execute({ name: 'test.update', sql: 'UPDATE counter SET value = 3', values: [] });
        const queue = table.queue('emails');
        const broker = createBroker(context.db, context.brokers);
        const reads = new Collector<number>();
        broker.subscribe(queue, async (_message, { tx }) => reads.push(await readCounter(tx)), { transactional: true });
        await broker.start();
        await broker.publish(queue, {});
        await reads.waitFor(1);
        await broker.stop();
        other.destroy();
        expect(reads.items).toEqual([3]);
      });
    });
  }

  describe('levels and begin modes a database cannot open', () => {
    const unopenable = (['read uncommitted', 'read committed', 'repeatable read', 'serializable'] as const).find(
      (level: IsolationLevel) => !levels.includes(level),
    );

    it.skipIf(unopenable === undefined)('refuses at start an isolation level the database cannot open', async () => {
      const table = defineTable({ ...jobsDeclaration({ form: 'lease' }), isolation: unopenable });
      await createTable(stand, context.db, defineTable(jobsDeclaration({ form: 'lease' })));
      const broker = createBroker(context.db, context.brokers);
      broker.subscribe(table.queue('emails'), () => undefined, { transactional: true });
      await expect(broker.start()).rejects.toThrow(UnsupportedError);
    });

    it.skipIf(hasBeginModes)('refuses at start a SQLite begin mode on a database of isolation levels', async () => {
      const table = defineTable({ ...jobsDeclaration({ form: 'lease' }), sqliteBegin: 'immediate' });
      await createTable(stand, context.db, defineTable(jobsDeclaration({ form: 'lease' })));
      const broker = createBroker(context.db, context.brokers);
      broker.subscribe(table.queue('emails'), () => undefined);
      await expect(broker.start()).rejects.toThrow(/only SQLite has/);
    });
  });

  // A second handle on the same file observes the write lock; an in-memory database has none.
  describe.skipIf(!hasBeginModes || !stand.capabilities.supportsProcesses)('SQLite begin modes', () => {
    it.each([
      ['deferred lets another handle write', 'deferred', true],
      ['immediate (the default) keeps another handle from writing', undefined, false],
    ] as const)('a handler at sqliteBegin %s', async (_, sqliteBegin, othersMayWrite) => {
      const table = defineTable({ ...jobsDeclaration({ form: 'lease' }), sqliteBegin });
      await createTable(stand, context.db, table);
      await createCounter();
      const queue = table.queue('emails');
      const broker = createBroker(context.db, context.brokers);
      const observed = new Collector<boolean>();
      broker.subscribe(
        queue,
        // No statement before the probe: a deferred transaction then holds no lock yet.
        () => {
          observed.push(writesWithoutWaiting(context.db.url!));
        },
        { transactional: true },
      );
      await broker.start();
      await broker.publish(queue, {});
      await observed.waitFor(1);
      await broker.stop();
      // The default, immediate, takes the write lock at BEGIN; deferred only at the first write.
      expect(observed.items).toEqual([othersMayWrite]);
    });
  });

  const clockForms = [...(stand.capabilities.supportsRowLock ? ['row lock' as const] : []), 'advisory lock' as const];
  describe.each(clockForms)('database clock, %s form', (form) => {
    it('claims, delays, publishes and marks by the database clock while the host clock is an hour behind', async () => {
      const table = defineTable({
        ...jobsDeclaration({ form: 'rowLock', mark: true }),
        ...(form === 'advisory lock' ? { advisoryLock: 'clock-{id}' } : {}),
        clock: 'database',
      });
      await createTable(stand, context.db, table);
      const queue = table.queue('emails');
      vi.useFakeTimers({ toFake: ['Date'], shouldAdvanceTime: true });
      try {
        vi.setSystemTime(Date.now() - HOST_CLOCK_BEHIND_MS);
        const broker = createBroker(context.db, context.brokers);
        const deliveries = new Collector<{ id: string; attempt: number; at: number }>();
        broker.subscribe(queue, (message) => {
          deliveries.push({ id: message.id, attempt: message.attempt, at: performance.now() });
          return message.attempt === 1 && message.payload === 'retried' ? Outcome.retryAfter(1_500) : Outcome.ack();
        });
        await broker.start();
        // Written by another writer, due at the database's now (the column default): a claim on
        // the host clock would not take it for an hour.
        await context.db.query(
          `INSERT INTO jobs (queue, payload) VALUES (${placeholder(stand, 1)}, ${placeholder(stand, 2)})`,
          ['emails', Buffer.from('"retried"')],
        );
        const [first] = await deliveries.waitFor(1);
        const [, second] = await deliveries.waitFor(2);
        expect(second!.id).toBe(first!.id);
        // A delay from the host clock would make the row due an hour ago, and so at once.
        expect(second!.at - first!.at).toBeGreaterThanOrEqual(1_490);

        const publishedAt = performance.now();
        await broker.publish(queue, 'delayed', { delayMs: 1_000 });
        const [, , delayed] = await deliveries.waitFor(3);
        expect(delayed!.at - publishedAt).toBeGreaterThanOrEqual(990);
        await broker.stop();
      } finally {
        vi.useRealTimers();
      }
      const realMinuteAgo = new Date(Date.now() - 60_000);
      expect(await countRows(context.db, 'jobs', 'processed_at IS NULL')).toBe(0);
      const markedNow = await context.db.query<{ n: unknown }>(
        `SELECT COUNT(*) AS n FROM jobs WHERE processed_at > ${placeholder(stand, 1)}`,
        [realMinuteAgo],
      );
      expect(Number(markedNow[0]?.n)).toBe(2);
    });
  });
}

/** Whether a second handle on the database file can write at once, without waiting for a lock. */
function writesWithoutWaiting(url: string): boolean {
  const other = new Database(url.slice('sqlite:'.length), { timeout: 0 });
  try {
    other.exec('UPDATE counter SET value = value + 1');
    return true;
  } catch (error) {
    if ((error as { code?: unknown }).code === 'SQLITE_BUSY') return false;
    throw error;
  } finally {
    other.close();
  }
}
