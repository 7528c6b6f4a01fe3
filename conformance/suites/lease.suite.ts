import { describe, expect, it } from 'vitest';
import { LeaseLostError, type Broker } from '../../src/index.js';
import { testHooksOf } from '../../src/broker/broker.js';
import { createDeferred } from '../../src/internal/deferred.js';
import { ManualClock } from '../../src/internal/manual-clock.fixture.js';
import { Collector, countRows, createBroker, createTable, jobsTable, placeholder, untilStats, waitForDatabase } from '../fixtures.js';
import type { SuiteContext } from '../run-conformance.js';

/** The lease form's token fencing and renewal. */
export function leaseSuite(context: SuiteContext): void {
  const { stand } = context;
  describe('lease fencing and renewal', () => {
    it('a lease holder past expiry gets LeaseLostError and changes nothing', async () => {
      const table = jobsTable({ form: 'lease' });
      await createTable(stand, context.db, table);
      const queue = table.queue('emails');
      const first = createBroker(context.db, context.brokers, { leaseMs: 30_000 });
      const firstStarted = createDeferred();
      const releaseFirst = createDeferred();
      const errors = new Collector<unknown>();
      first.on('error', (error) => errors.push(error));
      first.subscribe(queue, async () => {
        firstStarted.resolve();
        await releaseFirst.promise;
      });
      await first.start();
      await first.publish(queue, {});
      await firstStarted.promise;

      // The lease runs out (as if the holder stalled for longer than it), and a second broker takes
      // the row. Its lease is longer, so its token differs from the first one's even though both
      // claims fall in the same second; in real time a new token always comes a lease later.
      await context.db.exec("UPDATE jobs SET locked_until = '2000-01-01 00:00:00'");
      const second = createBroker(context.db, context.brokers, { leaseMs: 60_000 });
      const secondAttempts = new Collector<number>();
      const releaseSecond = createDeferred();
      second.subscribe(queue, async (message) => {
        secondAttempts.push(message.attempt);
        await releaseSecond.promise;
      });
      await second.start();
      await secondAttempts.waitFor(1);
      expect(secondAttempts.items).toEqual([2]);

      releaseFirst.resolve();
      await errors.waitFor(1);
      expect(errors.items[0]).toBeInstanceOf(LeaseLostError);
      expect(await countRows(context.db, 'jobs')).toBe(1);
      expect(first.stats().subscriptions[0]!.leasesLost).toBe(1);

      releaseSecond.resolve();
      await second.stop();
      expect(await countRows(context.db, 'jobs')).toBe(0);
    });

    it('renews the lease every half lease while a handler runs longer than the lease', async () => {
      const table = jobsTable({ form: 'lease' });
      await createTable(stand, context.db, table);
      const queue = table.queue('emails');
      // The leases' time is the test's: a thief's claim compares the holder's token with its own
      // "now" (both host times bound by the claims, never the database's clock), so both read
      // one clock that the test moves on. A lease long enough that the host's own time, which the
      // clock runs with, never ends it.
      const clock = new ManualClock();
      const leaseMs = 30_000;
      const holder = createBroker(context.db, context.brokers, { leaseMs });
      const started = createDeferred();
      const errors = new Collector<unknown>();
      holder.on('error', (error) => errors.push(error));
      const done = createDeferred();
      holder.subscribe(queue, async () => {
        started.resolve();
        await done.promise;
      });
      const holderHooks = testHooksOf(holder, queue);
      holderHooks.clock = clock;
      await holder.start();
      await holder.publish(queue, {});
      await started.promise;
      const thief: Broker = createBroker(context.db, context.brokers, { leaseMs, pollIntervalMs: 20 });
      const stolen = new Collector<string>();
      thief.subscribe(queue, (message) => {
        stolen.push(message.id);
      });
      const thiefLoop = testHooksOf(thief, queue);
      thiefLoop.clock = clock;
      await thief.start();

      // The scenario itself: the handler outlives its lease two and a half times. After each half
      // lease, a renewal round, then a claim of the thief's that began after it and came back empty.
      for (let halfLeases = 1; halfLeases <= 5; halfLeases += 1) {
        holderHooks.keeper.roundEnded.clear();
        clock.advance(leaseMs / 2);
        await holderHooks.keeper.roundEnded.next({ what: `renewal round ${halfLeases}` });
        thiefLoop.loop.claimStarted.clear();
        await thiefLoop.loop.claimStarted.next({ what: "the thief's next claim" });
        thiefLoop.loop.claimCameBackEmpty.clear();
        await thiefLoop.loop.claimCameBackEmpty.next({ what: "the thief's claim to come back empty" });
      }
      done.resolve();
      await holder.stop();
      await thief.stop();
      expect(stolen.items).toEqual([]);
      expect(errors.items).toEqual([]);
      expect(holder.stats().subscriptions[0]!.leaseRenewals).toBe(5);
      expect(await countRows(context.db, 'jobs')).toBe(0);
    });

    for (const coalesceSettlements of [true, false]) {
      const settling = coalesceSettlements ? 'in a coalesced window' : 'on its own';
      // The round blocks on a row the test locks, which needs row locks (not SQLite).
      it.skipIf(!stand.capabilities.supportsRowLock)(
        `a renewal round that reaches a row its own delivery settled ${settling} meanwhile counts no lost lease`,
        async () => {
          const table = jobsTable({ form: 'lease' });
          await createTable(stand, context.db, table);
          const queue = table.queue('emails');
          // Rounds run when the test moves the leases' clock on, so the test starts the one it blocks.
          const leaseMs = 30_000;
          const broker = createBroker(context.db, context.brokers, { leaseMs });
          const errors = new Collector<unknown>();
          broker.on('error', (error) => errors.push(error));
          const started = new Collector<string>();
          const releaseFirst = createDeferred();
          const ackSecond = createDeferred();
          broker.subscribe(
            queue,
            async (message) => {
              started.push(message.id);
              await (message.payload === 'first' ? releaseFirst.promise : ackSecond.promise);
            },
            { workers: 2, coalesceSettlements },
          );
          const hooks = testHooksOf(broker, queue);
          const clock = (hooks.clock = new ManualClock());
          await broker.start();
          // One at a time, so the first row is first in the book and in every renewal round.
          const firstId = await broker.publish(queue, 'first');
          await started.waitFor(1);
          const secondId = await broker.publish(queue, 'second');
          await started.waitFor(2);

          // A renewal round reads its rows, then renews them one by one: holding the first row's
          // lock stops the round at that row while the second row is still to come.
          const locker = await context.db.openDriver({ poolSize: 1 });
          const lock = await locker.acquire();
          try {
            await lock.execute({ name: 'test.begin', sql: 'BEGIN', values: [] });
            await lock.execute({
              name: 'test.lock',
              sql: `SELECT id FROM jobs WHERE id = ${placeholder(stand, 1)} FOR UPDATE`,
              values: [firstId],
            });
            hooks.keeper.roundEnded.clear();
            clock.advance(leaseMs / 2);
            // The renewal waits in the server: only the database shows it.
            await waitForDatabase(async () => (await sessionsWaitingOnRowLocks(context)) > 0, 10_000, 'a renewal waiting on the row lock');

            // The second row is acked and gone before the round reaches it.
            ackSecond.resolve();
            await untilStats(broker, queue, (stats) => stats.acked === 1, 'the ack of the second row');
            expect(await countRows(context.db, 'jobs', `id = ${Number(secondId)}`)).toBe(0);
          } finally {
            await lock.execute({ name: 'test.rollback', sql: 'ROLLBACK', values: [] });
            lock.release();
          }
          await hooks.keeper.roundEnded.next({ what: 'the blocked renewal round to end' });
          expect(broker.stats().subscriptions[0]!.leaseRenewals).toBe(1);

          expect(broker.stats().subscriptions[0]!.leasesLost).toBe(0);
          releaseFirst.resolve();
          await broker.stop();
          expect(errors.items).toEqual([]);
          expect(started.items).toEqual([firstId, secondId]);
          expect(await countRows(context.db, 'jobs')).toBe(0);
          expect(broker.metrics()).toMatch(/^tablequeue_leases_lost_total\{[^}]*\} 0$/m);
        },
      );
    }

    it('the claim commits at once and counts the attempt, visible from another connection', async () => {
      const table = jobsTable({ form: 'lease' });
      await createTable(stand, context.db, table);
      const queue = table.queue('emails');
      const broker = createBroker(context.db, context.brokers);
      const started = createDeferred();
      const release = createDeferred();
      broker.subscribe(queue, async () => {
        started.resolve();
        await release.promise;
      });
      await broker.start();
      await broker.publish(queue, {});
      await started.promise;
      const rows = await context.db.query<{ attempt: unknown; locked_until: unknown }>(
        'SELECT attempt, locked_until FROM jobs',
      );
      expect(Number(rows[0]!.attempt)).toBe(2);
      expect(rows[0]!.locked_until).not.toBeNull();
      release.resolve();
      await broker.stop();
    });
  });
}

/**
 * Sessions of the test database whose UPDATE waits for a row lock. MariaDB does not always list
 * such an UPDATE among InnoDB's lock waits (a renewal's, on a pooled connection, was missing from
 * INNODB_TRX while it waited), so there it counts UPDATEs still running; the only rows the test
 * locks are the ones it waits on.
 */
async function sessionsWaitingOnRowLocks(context: SuiteContext): Promise<number> {
  const query =
    context.stand.kind === 'postgres'
      ? "SELECT COUNT(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
      : "SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE DB = DATABASE() AND STATE = 'Updating' AND INFO LIKE 'UPDATE%'";
  const rows = await context.db.query<{ n: unknown }>(query);
  return Number(rows[0]!.n);
}
