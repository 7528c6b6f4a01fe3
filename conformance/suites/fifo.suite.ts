import { describe, expect, it } from 'vitest';
import {
  defineTable,
  Outcome,
  type Broker,
  type Message,
  type SubscriptionStats,
  type TableDeclaration,
} from '../../src/index.js';
import { createDeferred, type Deferred } from '../../src/internal/deferred.js';
import {
  Collector,
  countRows,
  createBroker,
  createTable,
  formsOf,
  jobsDeclaration,
  placeholder,
  untilStats,
  waitForDatabase,
  type FormUnderTest,
} from '../fixtures.js';
import { spawnWorker } from '../processes/spawn-worker.js';
import type { SuiteContext } from '../run-conformance.js';
import type { Stand, TestDatabase } from '../stand.js';

const GROUPS = ['a', 'b', 'c'];

/**
 * FIFO groups (WP-11): one row of a group in work at a time, in claim order, across workers,
 * brokers and processes; and one claim at a time on a FIFO table (WP-7).
 */
export function fifoSuite(context: SuiteContext): void {
  const { stand } = context;
  for (const form of formsOf(stand)) {
    describe(`${form} FIFO groups`, () => {
      it('WP-11: keeps claim order within each group under workers: 4 while two groups progress', async () => {
        const rows = 12;
        const table = defineTable(fifoDeclaration(form, { mark: true }));
        await createTable(stand, context.db, table);
        const broker = createBroker(context.db, context.brokers);
        const work = new GroupWork();
        const groupBIsDone = createDeferred();
        const handleA = work.handler('a', async (message) => {
          // Group a's head stays in work until group b has finished: b must not wait for a.
          if (message.payload === 0) await groupBIsDone.promise;
        });
        const handleB = work.handler('b', (message) => {
          if (message.payload === rows - 1) groupBIsDone.resolve();
        });
        broker.subscribe(table.queue<number>('a'), handleA, { workers: 4 });
        broker.subscribe(table.queue<number>('b'), handleB, { workers: 4 });
        await broker.start();
        await broker.publishMany(table.queue<number>('a'), numbered(rows));
        await broker.publishMany(table.queue<number>('b'), numbered(rows));
        await work.finished.waitFor(2 * rows);
        await broker.stop();
        expect(work.startedIn('b')).toEqual(sequence(rows));
        expect(work.startedIn('a')).toEqual(sequence(rows));
        expect(work.mostInOneGroup).toBe(1);
        expect(await countRows(context.db, 'jobs', 'processed_at IS NULL')).toBe(0);
      });

      it('WP-11: a retried head stays the head: 1, 1, 2, 3', async () => {
        const table = defineTable(fifoDeclaration(form));
        await createTable(stand, context.db, table);
        const queue = table.queue<number>('a');
        const broker = createBroker(context.db, context.brokers);
        const work = new GroupWork();
        const handle = work.handler('a', (message) =>
          message.payload === 1 && message.attempt === 1 ? Outcome.retry() : Outcome.ack(),
        );
        broker.subscribe(queue, handle, { workers: 4 });
        await broker.start();
        await broker.publishMany(queue, [1, 2, 3].map((payload) => ({ payload })));
        await work.finished.waitFor(4);
        await broker.stop();
        expect(work.startedIn('a')).toEqual([1, 1, 2, 3]);
        expect(work.mostInOneGroup).toBe(1);
      });

      it('WP-11: a delayed head lets rows due earlier go first', async () => {
        const table = defineTable(fifoDeclaration(form));
        await createTable(stand, context.db, table);
        const queue = table.queue<number>('a');
        const broker = createBroker(context.db, context.brokers);
        const work = new GroupWork();
        const handle = work.handler('a', (message) =>
          message.payload === 1 && message.attempt === 1 ? Outcome.retryAfter(60_000) : Outcome.ack(),
        );
        broker.subscribe(queue, handle, { workers: 4 });
        await broker.start();
        await broker.publishMany(queue, [1, 2, 3].map((payload) => ({ payload })));
        await work.finished.waitFor(3);
        expect(work.startedIn('a')).toEqual([1, 2, 3]);
        // Row 1 is due in a minute; make it due now rather than wait for it.
        await context.db.exec(`UPDATE jobs SET retry_after = '${longAgo(stand)}'`);
        await work.finished.waitFor(4);
        await broker.stop();
        expect(work.startedIn('a')).toEqual([1, 2, 3, 1]);
      });

      it('WP-11: rows behind a head in work wait, on two brokers, while another group goes on', async () => {
        const table = defineTable(fifoDeclaration(form));
        await createTable(stand, context.db, table);
        const brokers = [createBroker(context.db, context.brokers), createBroker(context.db, context.brokers)];
        const work = new GroupWork();
        const { handle: handleA, headStarted, releaseHead } = work.holdingHead('a');
        let holder = -1;
        brokers.forEach((broker, index) =>
          broker.subscribe(
            table.queue<number>('a'),
            (message: Message<number>) => {
              if (message.payload === 1) holder = index;
              return handleA(message);
            },
            { workers: 4 },
          ),
        );
        brokers[0]!.subscribe(table.queue<number>('b'), work.handler('b', () => undefined), { workers: 4 });
        await Promise.all(brokers.map((broker) => broker.start()));
        await brokers[0]!.publishMany(table.queue<number>('a'), [1, 2, 3].map((payload) => ({ payload })));
        await headStarted.promise;
        await brokers[0]!.publishMany(table.queue<number>('b'), [1, 2].map((payload) => ({ payload })));
        // The other broker's subscription of group a goes on claiming while the head is in work, and
        // each claim must come back empty (the holder's claims nothing until its row is done).
        const groupA = table.queue<number>('a');
        const other = brokers[1 - holder]!;
        const claimsBefore = statsOf(other, 'jobs/a').claims;
        await untilStats(other, groupA, (stats) => stats.claims >= claimsBefore + 3, 'three more claims of group a');
        await untilStats(brokers[0]!, table.queue('b'), (stats) => stats.handled === 2, 'both rows of group b');
        expect(work.startedIn('b')).toEqual([1, 2]);
        expect(work.startedIn('a')).toEqual([1]);
        releaseHead.resolve();
        // Two rows of group b and three of group a.
        await work.finished.waitFor(5);
        await Promise.all(brokers.map((broker) => broker.stop()));
        expect(work.startedIn('a')).toEqual([1, 2, 3]);
        expect(work.mostInOneGroup).toBe(1);
      });

      it('WP-11: a row published ahead of the head in work becomes the head and waits for it', async () => {
        await expectRowAheadOfHeadInWorkWaits(context, form);
      });

      it.runIf(stand.kind === 'mysql')(
        'WP-11 (MySQL, MariaDB): a group whose guard row was removed gets it back at its next claim, and the guard holds',
        async () => {
          await expectRowAheadOfHeadInWorkWaits(context, form, {
            afterStart: async () => {
              expect(await context.db.query('SELECT queue_name FROM tablequeue_fifo_guards')).toEqual([{ queue_name: 'a' }]);
              await context.db.exec('DELETE FROM tablequeue_fifo_guards');
            },
            // The head in work holds the row its claim added.
            whileHeadInWork: async () => {
              expect(await context.db.query('SELECT queue_name FROM tablequeue_fifo_guards')).toEqual([{ queue_name: 'a' }]);
            },
          });
        },
      );

      it('WP-11: two brokers keep per-group order with at most one row of a group in work', async () => {
        const rows = 15;
        const table = defineTable(fifoDeclaration(form, { mark: true }));
        await createTable(stand, context.db, table);
        await createSequenceEffects(stand, context.db);
        const recordSql = sequenceInsert(stand);
        const brokers = [createBroker(context.db, context.brokers), createBroker(context.db, context.brokers)];
        for (const broker of brokers) {
          for (const group of GROUPS) {
            broker.subscribe(table.queue<number>(group), async (message, handlerContext) => {
              await handlerContext.query(recordSql, [group, message.payload, 'start']);
              await handlerContext.query(recordSql, [group, message.payload, 'end']);
            }, { workers: 4 });
          }
        }
        await Promise.all(brokers.map((broker) => broker.start()));
        for (const group of GROUPS) await brokers[0]!.publishMany(table.queue<number>(group), numbered(rows));
        await waitForSequenceEnds(context.db, GROUPS.length * rows);
        await Promise.all(brokers.map((broker) => broker.stop()));
        await expectOneAtATimeInOrder(context.db, rows);
      });

      it.skipIf(!stand.capabilities.supportsProcesses)(
        'WP-11: three replica processes keep per-group order with at most one row of a group in work',
        async () => {
          const rows = 15;
          const declaration = fifoDeclaration(form, { mark: true });
          const table = defineTable(declaration);
          await createTable(stand, context.db, table);
          await createSequenceEffects(stand, context.db);
          const config = {
            database: context.db.url,
            table: declaration,
            queue: GROUPS[0],
            queues: GROUPS,
            workers: 4,
            mode: 'sequence',
            recordSql: sequenceInsert(stand),
          };
          const replicas = [spawnWorker(config), spawnWorker(config), spawnWorker(config)];
          try {
            await Promise.all(replicas.map((replica) => replica.ready));
            const publisher = createBroker(context.db, context.brokers);
            await publisher.start();
            for (const group of GROUPS) await publisher.publishMany(table.queue<number>(group), numbered(rows));
            await waitForSequenceEnds(context.db, GROUPS.length * rows);
          } finally {
            for (const replica of replicas) replica.child.kill('SIGTERM');
            await Promise.all(replicas.map((replica) => replica.exited));
          }
          await expectOneAtATimeInOrder(context.db, rows);
        },
      );

      it('WP-7, WP-11: runs one claim at a time on a FIFO table with workers: 4, and none beside a row in work', async () => {
        const rows = 20;
        const table = defineTable(fifoDeclaration(form));
        await createTable(stand, context.db, table);
        const queue = table.queue<number>('a');
        const broker = createBroker(context.db, context.brokers);
        const work = new GroupWork();
        const claimsBesideDelivery: number[] = [];
        const handle = work.handler('a', async () => {
          // Three workers are idle while this one works. A loop that claimed for them would have
          // started a claim in the turn that handed this row over; none can take a row of the group.
          await new Promise((resolve) => setImmediate(resolve));
          claimsBesideDelivery.push(statsOf(broker, 'jobs/a').claimsRunning);
        });
        broker.subscribe(queue, handle, { workers: 4 });
        await broker.start();
        await broker.publishMany(queue, numbered(rows));
        await work.finished.waitFor(rows);
        await broker.stop();
        const stats = statsOf(broker, 'jobs/a');
        // The loop's own count of the claims it ever ran at once.
        expect(stats.maxClaimsRunning).toBe(1);
        expect(claimsBesideDelivery).toEqual(Array.from({ length: rows }, () => 0));
        expect(stats.claims).toBeGreaterThanOrEqual(rows);
        // Lease deliveries hold no connection, so every connection the subscription ever held
        // was a claim: the most held at once is the most claims that ran at once.
        if (form === 'lease') expect(stats.maxConnectionsHeld).toBe(1);
        expect(work.startedIn('a')).toEqual(sequence(rows));
      });
    });
  }
}

/** The usual queue table with its group declared FIFO; `mark` keeps finished rows, marked. */
function fifoDeclaration(form: FormUnderTest, options: { mark?: boolean } = {}): TableDeclaration {
  return { ...jobsDeclaration({ form, mark: options.mark }), group: { column: 'queue', fifo: true } };
}

/** Handlers of this process per group: the order they began, and the most in work at once in one group. */
class GroupWork {
  readonly finished = new Collector<string>();
  mostInOneGroup = 0;
  readonly #started = new Map<string, unknown[]>();
  readonly #inWork = new Map<string, number>();

  /** A handler for the rows of `group` that records each payload as it begins, around `body`. */
  handler<T>(group: string, body: (message: Message<number>) => T | Promise<T>): (message: Message<number>) => Promise<T> {
    return async (message) => {
      const inWork = (this.#inWork.get(group) ?? 0) + 1;
      this.#inWork.set(group, inWork);
      this.mostInOneGroup = Math.max(this.mostInOneGroup, inWork);
      this.#started.set(group, [...this.startedIn(group), message.payload]);
      try {
        return await body(message);
      } finally {
        this.#inWork.set(group, (this.#inWork.get(group) ?? 1) - 1);
        this.finished.push(group);
      }
    };
  }

  startedIn(group: string): unknown[] {
    return this.#started.get(group) ?? [];
  }

  /** A handler for `group` that holds row 1 (its head) in work until `releaseHead`, and lets the others through. */
  holdingHead(group: string): { handle: (message: Message<number>) => Promise<void>; headStarted: Deferred<void>; releaseHead: Deferred<void> } {
    const headStarted = createDeferred();
    const releaseHead = createDeferred();
    const handle = this.handler(group, async (message) => {
      if (message.payload !== 1) return;
      headStarted.resolve();
      await releaseHead.promise;
    });
    return { handle, headStarted, releaseHead };
  }
}

function numbered(count: number): { payload: number }[] {
  return sequence(count).map((payload) => ({ payload }));
}

function sequence(count: number): number[] {
  return Array.from({ length: count }, (_, index) => index);
}

function statsOf(broker: Broker, queue: string): SubscriptionStats {
  const stats = broker.stats().subscriptions.find((subscription) => subscription.queue === queue);
  if (stats === undefined) throw new Error(`no subscription of ${queue}`);
  return stats;
}

/** A time long past, written the way each database compares it (SQLite compares the text). */
function longAgo(stand: Stand): string {
  return stand.kind === 'sqlite' ? '2000-01-01T00:00:00.000+00:00' : '2000-01-01 00:00:00';
}

/**
 * Handlers write a `start` and an `end` row around their work. The database numbers them as they
 * are written, so within a group the ids give the order in which handlers began and ended,
 * across brokers and processes.
 */
async function createSequenceEffects(stand: Stand, db: TestDatabase): Promise<void> {
  const id = {
    postgres: 'BIGSERIAL PRIMARY KEY',
    mysql: 'BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY',
    sqlite: 'INTEGER PRIMARY KEY AUTOINCREMENT',
  }[stand.kind];
  await db.exec(`CREATE TABLE effects (id ${id}, grp VARCHAR(16) NOT NULL, item INTEGER NOT NULL, phase VARCHAR(8) NOT NULL)`);
}

function sequenceInsert(stand: Stand): string {
  const values = [1, 2, 3].map((index) => placeholder(stand, index)).join(', ');
  return `INSERT INTO effects (grp, item, phase) VALUES (${values})`;
}

/** The replicas are processes of their own: their handlers' progress shows only in the database. */
async function waitForSequenceEnds(db: TestDatabase, count: number): Promise<void> {
  await waitForDatabase(async () => (await countRows(db, 'effects', "phase = 'end'")) >= count, 60_000, `${count} handlers ended`);
}

/**
 * Per group, start and end of item 0, then of item 1, and so on: items strictly increasing, and
 * no handler of the group began before the previous one ended.
 */
async function expectOneAtATimeInOrder(db: TestDatabase, rows: number): Promise<void> {
  const events = await db.query<{ grp: string; item: unknown; phase: string }>('SELECT grp, item, phase FROM effects ORDER BY id');
  const expected = sequence(rows).flatMap((item) => [`start ${item}`, `end ${item}`]);
  for (const group of GROUPS) {
    const ofGroup = events.filter((event) => event.grp === group).map((event) => `${event.phase} ${Number(event.item)}`);
    expect(ofGroup, `group ${group}`).toEqual(expected);
  }
}

/**
 * Rows 1 and 2 of group a, row 1's handler held on one broker; then row 0 published with a
 * smaller priority, which sorts first and so is the head though row 1 is in work. A second
 * broker's claims (the first claims nothing while its row is in work) are held back by the
 * group guard (row lock form) or the check for a row of the group in work (lease form), three of
 * them, and row 0 runs once row 1 is done. `afterStart` runs before the publishes,
 * `whileHeadInWork` once row 1 is in work.
 */
async function expectRowAheadOfHeadInWorkWaits(
  context: SuiteContext,
  form: FormUnderTest,
  steps: { afterStart?: () => Promise<void>; whileHeadInWork?: () => Promise<void> } = {},
): Promise<void> {
  const table = defineTable(fifoDeclaration(form));
  await createTable(context.stand, context.db, table);
  const queue = table.queue<number>('a');
  const broker = createBroker(context.db, context.brokers);
  const work = new GroupWork();
  const { handle, headStarted, releaseHead } = work.holdingHead('a');
  broker.subscribe(queue, handle, { workers: 4 });
  await broker.start();
  await steps.afterStart?.();
  await broker.publishMany(queue, [1, 2].map((payload) => ({ payload })));
  await headStarted.promise;
  await steps.whileHeadInWork?.();
  const other = createBroker(context.db, context.brokers);
  other.subscribe(queue, handle, { workers: 4 });
  await other.start();
  await broker.publish(queue, 0, { priority: -1 });
  await untilStats(other, queue, (stats) => stats.claims >= 3, 'three claims on the other broker');
  expect(work.startedIn('a')).toEqual([1]);
  releaseHead.resolve();
  await work.finished.waitFor(3);
  await Promise.all([broker.stop(), other.stop()]);
  expect(work.startedIn('a')).toEqual([1, 0, 2]);
  expect(work.mostInOneGroup).toBe(1);
}
