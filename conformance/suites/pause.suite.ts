import { describe, expect, it } from 'vitest';
import { controlReadTestHooksOf, testHooksOf } from '../../src/broker/broker.js';
import { runCliHere } from '../../src/cli/run-cli.fixture.js';
import { CancelledError, SchemaError, type Broker, type Queue } from '../../src/index.js';
import { createDeferred } from '../../src/internal/deferred.js';
import { untilSignalled } from '../../src/internal/test-signal.js';
import { Collector, countRows, createBroker, createTable, formsOf, jobsDeclaration, jobsTable, statsOf, untilStats, waitForDatabase } from '../fixtures.js';
import { spawnPausedReplica } from '../processes/spawn-paused-replica.js';
import type { SuiteContext } from '../run-conformance.js';

const POLL_INTERVAL_MS = 200;
/**
 * What a claim already past its pause check may take beyond the interval: the check and the
 * claim's first step run in one turn of the event loop, so this only absorbs a busy machine.
 */
const SCHEDULING_SLACK_MS = 150;

/** broker.pause and resume: every replica stops claiming within one poll interval, and claims again after resume. */
export function pauseSuite(context: SuiteContext): void {
  const { stand } = context;
  for (const form of formsOf(stand)) {
    describe(`${form} pause and resume`, () => {
      it('no broker claims a paused queue after one poll interval; the row in work settles, publishes wait, resume claims again', async () => {
        const table = jobsTable({ form });
        await createTable(stand, context.db, table);
        const queue = table.queue<string>('emails');
        const release = createDeferred();
        const handled = new Collector<string>();
        const brokers = [0, 1].map(() => {
          const broker = createBroker(context.db, context.brokers, { pollIntervalMs: POLL_INTERVAL_MS });
          broker.subscribe(queue, async (message) => {
            handled.push(message.payload);
            if (message.payload === 'held') await release.promise;
          }, { workers: 2 });
          return broker;
        });
        const [pauser, other] = brokers as [Broker, Broker];
        for (const broker of brokers) await broker.start();
        await pauser.publish(queue, 'held');
        await handled.waitFor(1);

        const claimStartedAt: number[] = [];
        for (const broker of brokers) {
          const loop = testHooksOf(broker, queue).loop;
          loop.claimStarted.observe(() => claimStartedAt.push(performance.now()));
          loop.pausedNoClaim.turnOn();
        }
        await pauser.pause(queue);
        const pausedAt = performance.now();
        for (const broker of brokers) {
          await testHooksOf(broker, queue).loop.pausedNoClaim.next({ what: 'a claim skipped for the pause' });
        }
        const claimsWhenSeen = brokers.map((broker) => statsOf(broker, queue).claims);

        // The row in work when the queue was paused finishes and settles.
        release.resolve();
        await untilSubscriptionsSettle(brokers, queue, 1);

        // Publishing goes on; the rows wait while each broker looks twice more and claims nothing.
        await pauser.publishMany(queue, ['a', 'b', 'c'].map((payload) => ({ payload })));
        for (const broker of brokers) {
          const loop = testHooksOf(broker, queue).loop;
          loop.pausedNoClaim.clear();
          await loop.pausedNoClaim.next({ what: 'a claim skipped after the publish' });
          await loop.pausedNoClaim.next({ what: 'a second claim skipped after the publish' });
        }
        expect(brokers.map((broker) => statsOf(broker, queue).claims)).toEqual(claimsWhenSeen);
        expect(handled.items).toEqual(['held']);
        expect(await countRows(context.db, 'jobs')).toBe(3);
        expect(claimStartedAt.filter((at) => at > pausedAt + POLL_INTERVAL_MS + SCHEDULING_SLACK_MS)).toEqual([]);
        expect(await other.isPaused(queue)).toBe(true);
        expect(brokers.map((broker) => statsOf(broker, queue).paused)).toEqual([true, true]);
        expect(other.metrics()).toContain('tablequeue_queue_paused{table="jobs",queue="emails"} 1');

        // Resumed from the other broker: both claim again and the rows are handled.
        const claimsBeforeResume = brokers.map((broker) => statsOf(broker, queue).claims);
        await other.resume(queue);
        await handled.waitFor(4);
        for (const [index, broker] of brokers.entries()) {
          await untilStats(broker, queue, (stats) => stats.claims > claimsBeforeResume[index]!, 'a claim after resume');
          await untilStats(broker, queue, (stats) => !stats.paused, 'the resume read');
        }
        expect(handled.items.slice(1).sort()).toEqual(['a', 'b', 'c']);
        expect(await pauser.isPaused(queue)).toBe(false);
        expect(other.metrics()).toContain('tablequeue_queue_paused{table="jobs",queue="emails"} 0');
      });
    });
  }

  describe('pause and resume: which queues', () => {
    it('a queue pauses alone, names compare exactly, and a whole table pauses every queue of it', async () => {
      const table = jobsTable({ form: formsOf(stand)[0]! });
      await createTable(stand, context.db, table);
      const emails = table.queue<number>('emails');
      const broker = createBroker(context.db, context.brokers, { pollIntervalMs: POLL_INTERVAL_MS });
      const handled = new Collector<number>();
      broker.subscribe(emails, (message) => handled.push(message.payload));
      const loop = testHooksOf(broker, emails).loop;
      loop.pausedNoClaim.turnOn();
      await broker.start();

      await broker.pause(table.queue('sms'));
      await broker.pause(table.queue('EMAILS'));
      await broker.publish(emails, 1);
      await handled.waitFor(1);
      expect(await broker.isPaused(emails)).toBe(false);
      expect(loop.pausedNoClaim.pending).toEqual([]);

      await broker.pause(table);
      await loop.pausedNoClaim.next({ what: 'a claim skipped for the whole table' });
      await broker.publish(emails, 2);
      loop.pausedNoClaim.clear();
      await loop.pausedNoClaim.next({ what: 'a claim skipped after the publish' });
      expect(handled.items).toEqual([1]);
      expect(await broker.isPaused(emails)).toBe(true);

      await broker.resume(table);
      await handled.waitFor(2);
      expect(handled.items).toEqual([1, 2]);
    });

    it('without a queue controls table the queues run, each subscription warns once, and pause says how to create it', async () => {
      const table = jobsTable({ form: formsOf(stand)[0]! });
      await createTable(stand, context.db, table);
      const queue = table.queue<number>('emails');
      const broker = createBroker(context.db, context.brokers, { queueControlsTable: 'no_such_schema.controls' });
      const warnings: string[] = [];
      broker.on('warning', (message) => warnings.push(message));
      const handled = new Collector<number>();
      broker.subscribe(queue, (message) => handled.push(message.payload));
      await broker.start();
      await broker.publish(queue, 1);
      await broker.publish(queue, 2);
      await handled.waitFor(2);
      expect(warnings.filter((warning) => warning.includes('createQueueControlsTableSql'))).toHaveLength(1);
      expect(warnings.filter((warning) => warning.includes('cannot read whether its queue is paused'))).toHaveLength(1);
      await expect(broker.pause(queue)).rejects.toThrow(SchemaError);
      await expect(broker.pause(queue)).rejects.toThrow('createQueueControlsTableSql');
    });
  });

  describe('one read of pauses and cancels', () => {
    it('a broker reads a pause of one of its queues and a cancel of a message it runs in the same single statement', async () => {
      const table = jobsTable({ form: 'lease' });
      await createTable(stand, context.db, table);
      const paused = table.queue<string>('paused');
      const running = table.queue<string>('running');
      // Without LISTEN, and with renewals a minute apart, only the poll can bring either news.
      const reader = createBroker(context.db, context.brokers, { pollIntervalMs: POLL_INTERVAL_MS, listen: false, leaseMs: 120_000 });
      const started = new Collector<string>();
      const reasons = new Collector<unknown>();
      reader.subscribe(paused, () => undefined);
      reader.subscribe(running, async (message, handlerContext) => {
        started.push(message.id);
        await new Promise((resolve) => handlerContext.signal.addEventListener('abort', resolve, { once: true }));
        reasons.push(handlerContext.signal.reason);
      });
      const operator = createBroker(context.db, context.brokers, { listen: false });
      await reader.start();
      await operator.start();
      await operator.publish(running, 'work');
      const [id] = await started.waitFor(1);
      const reads = controlReadTestHooksOf(reader).read.turnOn();

      await operator.pause(paused);
      expect(await operator.cancel(running, id!)).toEqual({ status: 'inWork' });
      const read = await reads.next({
        matches: (found) => found.paused.includes('jobs/paused') && found.cancelled.includes(id!),
        what: 'one read that found both the pause and the cancel',
      });
      expect(read).toEqual({ paused: ['jobs/paused'], cancelled: [id], statements: 1 });
      const [reason] = await reasons.waitFor(1);
      expect(reason).toBeInstanceOf(CancelledError);
      await untilStats(reader, running, (stats) => stats.cancelled === 1 && stats.inWork === 0, 'the delivery settled as cancelled');
      expect(statsOf(reader, paused).paused).toBe(true);
      expect(statsOf(reader, running).paused).toBe(false);
    });
  });

  if (stand.capabilities.supportsListenNotify) {
    describe('pause and resume with LISTEN', () => {
      it('a broker polling once a minute reads a pause and a resume at once', async () => {
        const table = jobsTable({ form: formsOf(stand)[0]! });
        await createTable(stand, context.db, table);
        const queue = table.queue<number>('emails');
        const controller = createBroker(context.db, context.brokers);
        const reader = createBroker(context.db, context.brokers, { pollIntervalMs: 60_000 });
        const handled = new Collector<number>();
        reader.subscribe(queue, (message) => handled.push(message.payload));
        const loop = testHooksOf(reader, queue).loop;
        loop.waiting.turnOn();
        loop.pausedNoClaim.turnOn();
        await controller.start();
        await reader.start();
        expect(await loop.waiting.next({ what: 'the wait after the first empty claim' })).toBe(60_000);

        await controller.pause(queue);
        await loop.pausedNoClaim.next({ what: 'the pause, read on its notification', timeoutMs: 5_000 });
        await controller.publish(queue, 1);
        await controller.resume(queue);
        await handled.waitFor(1, 5_000);
        expect(handled.items).toEqual([1]);
      });
    });
  }

  if (!stand.capabilities.supportsProcesses) return;
  describe('tablequeue pause and resume', () => {
    it('print the new state, a running broker obeys them, and stats marks what is paused', async () => {
      const table = jobsTable({ form: formsOf(stand)[0]! });
      await createTable(stand, context.db, table);
      const queue = table.queue<number>('emails');
      const broker = createBroker(context.db, context.brokers, { pollIntervalMs: POLL_INTERVAL_MS });
      const handled = new Collector<number>();
      broker.subscribe(queue, (message) => handled.push(message.payload));
      const loop = testHooksOf(broker, queue).loop;
      loop.pausedNoClaim.turnOn();
      await broker.start();
      const base = ['--database', context.db.url!, '--table', 'jobs'];

      expect(await runCliHere(['pause', ...base, '--queue', 'emails'])).toEqual({ code: 0, stdout: 'jobs/emails: paused\n', stderr: '' });
      await loop.pausedNoClaim.next({ what: 'a claim skipped for the pause from the command line' });
      await broker.publish(queue, 1);
      const stats = JSON.parse((await runCliHere(['stats', ...base, '--json'])).stdout) as {
        groups: { group: string; paused: boolean }[];
        paused: unknown;
      };
      expect(stats.groups.map((group) => [group.group, group.paused])).toEqual([['emails', true]]);
      expect(stats.paused).toEqual({ queueControlsTable: 'tablequeue_queue_controls', wholeTable: false, groups: ['emails'] });
      expect((await runCliHere(['stats', ...base])).stdout).toContain('emails paused');

      expect((await runCliHere(['pause', ...base])).stdout).toBe('jobs (every queue of the table): paused\n');
      expect((await runCliHere(['resume', ...base, '--queue', 'emails'])).stdout).toBe(
        'jobs/emails: paused, since every queue of jobs is; tablequeue resume --table without --queue resumes them\n',
      );
      expect(handled.items).toEqual([]);
      expect((await runCliHere(['resume', ...base])).stdout).toBe('jobs (every queue of the table): running\n');
      await handled.waitFor(1);
      const stillPaused = JSON.parse((await runCliHere(['stats', ...base, '--json'])).stdout) as { paused: unknown };
      expect(stillPaused.paused).toEqual({ queueControlsTable: 'tablequeue_queue_controls', wholeTable: false, groups: [] });

      const usage = await runCliHere(['pause', '--database', context.db.url!]);
      expect(usage.code).toBe(2);
      expect(usage.stderr).toContain('pause needs --table NAME');
    });
  });

  describe('pause and resume across processes', () => {
    it('a replica in another process stops claiming once it reads the pause, and claims the waiting rows after resume', async () => {
      const form = formsOf(stand).at(-1)!;
      const table = jobsTable({ form });
      await createTable(stand, context.db, table);
      const queue = table.queue<number>('emails');
      const controller = createBroker(context.db, context.brokers);
      await controller.start();
      const replica = spawnPausedReplica({
        database: context.db.url!,
        table: jobsDeclaration({ form }),
        queue: 'emails',
        pollIntervalMs: POLL_INTERVAL_MS,
      });
      await replica.ready;
      await controller.publish(queue, 0);
      await replica.eventsAtLeast((event) => event.startsWith('handling '), 1);

      await controller.pause(queue);
      const pausedAt = Date.now();
      const sincePause = replica.events.length;
      await replica.eventsAtLeast((event) => event === 'paused', 1, sincePause);
      const seenAt = Date.now();
      // A claim already past its check may still run; none starts once the pause was read, and
      // none later than one poll interval after pause() returned (both processes read this host's clock).
      const seen = replica.events.indexOf('paused', sincePause);
      await controller.publishMany(queue, [1, 2, 3].map((payload) => ({ payload })));
      await replica.eventsAtLeast((event) => event === 'paused', 3, seen + 1);
      expect(replica.events.slice(seen).filter((event) => event !== 'paused')).toEqual([]);
      const claimTimes = replica.events.slice(sincePause).flatMap((event) => (event.startsWith('claim ') ? [Number(event.slice(6))] : []));
      expect(claimTimes.filter((at) => at > pausedAt + POLL_INTERVAL_MS + SCHEDULING_SLACK_MS)).toEqual([]);
      expect(await countRows(context.db, 'jobs')).toBe(3);
      // One poll interval, with room for a loaded machine to deliver the child's line.
      expect(seenAt - pausedAt).toBeLessThan(POLL_INTERVAL_MS + 2_000);

      await controller.resume(queue);
      await replica.eventsAtLeast((event) => event.startsWith('handling '), 4);
      // The replica's own process settles the rows: only the database shows it.
      await waitForDatabase(async () => (await countRows(context.db, 'jobs')) === 0, 20_000, 'the waiting rows handled after resume');
      replica.child.kill('SIGTERM');
      await replica.exited;
    });
  });
}

/** Waits until the subscriptions of `queue` on `brokers` have settled `count` rows between them. */
function untilSubscriptionsSettle(brokers: readonly Broker[], queue: Queue<unknown>, count: number): Promise<void> {
  return untilSignalled(
    brokers.flatMap((broker) => testHooksOf(broker, queue).all()),
    () => brokers.reduce((sum, broker) => sum + statsOf(broker, queue).acked, 0) >= count,
    `${count} rows settled`,
  );
}
