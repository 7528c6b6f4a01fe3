import { describe, expect, it } from 'vitest';
import { runCliHere } from '../../src/cli/run-cli.fixture.js';
import { CancelledError, ClosedError, DeclarationError, UnsupportedError, type Queue } from '../../src/index.js';
import { Collector, countRows, createBroker, createTable, formsOf, jobsDeclaration, jobsTable, statsOf, untilStats, waitForDatabase } from '../fixtures.js';
import { spawnLineProcess } from '../processes/spawn-line-process.js';
import type { SuiteContext } from '../run-conformance.js';
import { advisoryDeclaration, advisoryTable } from './advisory-tables.js';

/** Ids no integer id column holds: not a number, and one beyond 64 bits. */
const NOT_AN_INTEGER_ID = ['not-a-number', '99999999999999999999999'];

const CANCEL_WORKER = new URL('../processes/cancel-worker.ts', import.meta.url).pathname;

/** broker.cancel: a waiting message removed unhandled, one in work stopped in whichever process runs it, an unknown one gone. */
export function cancelSuite(context: SuiteContext): void {
  const { stand } = context;
  describe('cancel refusals', () => {
    it('refuses before start, after stop, without an id, and on an advisory table whose rows share keys, saying why', async () => {
      const table = jobsTable({ form: 'lease' });
      await createTable(stand, context.db, table);
      const broker = createBroker(context.db, context.brokers);
      await expect(broker.cancel(table.queue('emails'), '1')).rejects.toThrow(ClosedError);
      await broker.start();
      await expect(broker.cancel(table.queue('emails'), '')).rejects.toThrow(DeclarationError);
      const shared = advisoryTable({ name: 'advisory_jobs', keyedByCustomer: true });
      const refusal = broker.cancel(shared.queue('emails'), '1');
      await expect(refusal).rejects.toThrow(UnsupportedError);
      await expect(refusal).rejects.toThrow(/does not name the id column "id", so rows share keys .*such as "job-\{id\}"/);
      await broker.stop();
      await expect(broker.cancel(table.queue('emails'), '1')).rejects.toThrow(/broker is stopped/);
    });
  });

  describe('advisory cancel (a key per row)', () => {
    it('a waiting message, due or delayed, is removed before any handler sees it; an unknown id is gone', async () => {
      const table = advisoryTable();
      await createTable(stand, context.db, table);
      const queue = table.queue<string>('emails');
      const broker = createBroker(context.db, context.brokers);
      await broker.start();
      const doomed = await broker.publish(queue, 'doomed');
      const delayed = await broker.publish(queue, 'later', { delayMs: 3_600_000 });
      const kept = await broker.publish(queue, 'kept');
      expect(await broker.cancel(queue, doomed)).toEqual({ status: 'waiting' });
      expect(await broker.cancel(queue, delayed)).toEqual({ status: 'waiting' });
      expect(await broker.cancel(queue, doomed)).toEqual({ status: 'gone' });
      for (const impossible of NOT_AN_INTEGER_ID) expect(await broker.cancel(queue, impossible), impossible).toEqual({ status: 'gone' });
      expect(await broker.cancel(table.queue('sms'), kept)).toEqual({ status: 'gone' });
      expect(await countRows(context.db, 'jobs')).toBe(1);
    });

    it('a message in work in this broker: its signal aborts with a CancelledError, it settles as cancelled, and its key is free again', async () => {
      const table = advisoryTable();
      await createTable(stand, context.db, table);
      const queue = table.queue<string>('emails');
      const broker = createBroker(context.db, context.brokers);
      const started = new Collector<string>();
      const reasons = new Collector<unknown>();
      broker.subscribe(queue, async (message, handlerContext) => {
        started.push(message.id);
        if (message.payload !== 'work') return;
        await new Promise((resolve) => handlerContext.signal.addEventListener('abort', resolve, { once: true }));
        reasons.push(handlerContext.signal.reason);
        return { kind: 'retry' } as const;
      });
      await broker.start();
      const id = await broker.publish(queue, 'work');
      await started.waitFor(1);
      expect(await broker.cancel(queue, id)).toEqual({ status: 'inWork' });
      const [reason] = await reasons.waitFor(1);
      expect(reason).toBeInstanceOf(CancelledError);
      await untilStats(broker, queue, (stats) => stats.cancelled === 1 && stats.inWork === 0, 'the delivery settled as cancelled');
      expect(statsOf(broker, queue).retried).toBe(0);
      expect(await countRows(context.db, 'jobs')).toBe(0);
      await waitForDatabase(async () => (await countRows(context.db, 'tablequeue_cancellations')) === 0, 10_000, 'the record removed');
      const next = await broker.publish(queue, 'next');
      await started.waitFor(2);
      expect(started.items).toEqual([id, next]);
    });

    if (stand.capabilities.supportsProcesses && stand.capabilities.supportsSessionLocks) {
      it('a message in work in another process: the key it holds tells the cancel, and that handler aborts at its poll', async () => {
        const table = advisoryTable();
        await createTable(stand, context.db, table);
        const queue: Queue<string> = table.queue<string>('emails');
        const canceller = createBroker(context.db, context.brokers);
        await canceller.start();
        const id = await canceller.publish(queue, 'work');
        const next = await canceller.publish(queue, 'next');
        const worker = spawnLineProcess({
          script: CANCEL_WORKER,
          config: { database: context.db.url, table: advisoryDeclaration(), queue: 'emails', leaseMs: 2_000, pollIntervalMs: 50 },
          label: 'cancel worker',
          prefix: 'event ',
          parse: (rest) => rest,
        });
        try {
          await worker.ready;
          await worker.itemsAtLeast(1);
          expect(worker.items[0]).toBe(`handling ${id}`);
          expect(await canceller.cancel(queue, id)).toEqual({ status: 'inWork' });
          await worker.itemsAtLeast(3, 15_000);
          expect(worker.items.slice(1, 3)).toEqual([`aborted ${id} CANCELLED`, `settled ${id} cancelled=1 leasesLost=0`]);
          await worker.itemsAtLeast(4);
          expect(worker.items[3]).toBe(`handling ${next}`);
          expect(await countRows(context.db, 'jobs', `id = ${Number(id)}`)).toBe(0);
        } finally {
          worker.child.kill('SIGTERM');
          await worker.exited;
        }
      });
    }
  });

  for (const form of formsOf(stand)) {
    for (const mark of [false, true]) {
      const finished = mark ? 'marked processed' : 'deleted';
      describe(`${form} cancel (finished rows ${finished})`, () => {
        /** The unfinished rows with `id`: none once a cancel removed it. */
        const unfinished = (id: string) =>
          countRows(context.db, 'jobs', `id = ${Number(id)}${mark ? ' AND processed_at IS NULL' : ''}`);

        it('a waiting message is removed before any handler sees it; an unknown id is gone', async () => {
          const table = jobsTable({ form, mark });
          await createTable(stand, context.db, table);
          const queue = table.queue<string>('emails');
          const canceller = createBroker(context.db, context.brokers);
          await canceller.start();
          const doomed = await canceller.publish(queue, 'doomed');
          const kept = await canceller.publish(queue, 'kept');
          expect(await canceller.cancel(queue, doomed)).toEqual({ status: 'waiting' });
          expect(await unfinished(doomed)).toBe(0);
          if (mark) expect(await countRows(context.db, 'jobs', `id = ${Number(doomed)} AND processed_at IS NOT NULL`)).toBe(1);
          expect(await canceller.cancel(queue, doomed)).toEqual({ status: 'gone' });
          expect(await canceller.cancel(queue, '987654')).toEqual({ status: 'gone' });
          // Ids the id column cannot hold: PostgreSQL refuses to cast them, the others find no row.
          for (const impossible of NOT_AN_INTEGER_ID) expect(await canceller.cancel(queue, impossible), impossible).toEqual({ status: 'gone' });
          // The queue names the group: the row is no message of another queue of the table.
          expect(await canceller.cancel(table.queue('sms'), kept)).toEqual({ status: 'gone' });

          const handled = new Collector<string>();
          const reader = createBroker(context.db, context.brokers);
          reader.subscribe(queue, (message) => handled.push(message.payload));
          await reader.start();
          await handled.waitFor(1);
          await untilStats(reader, queue, (stats) => stats.acked === 1 && stats.inWork === 0, 'the kept message acked');
          expect(handled.items).toEqual(['kept']);
          expect(statsOf(reader, queue).cancelled).toBe(0);
        });

        it('a message in work in this broker: its signal aborts with a CancelledError and it settles as cancelled, whatever the handler returns', async () => {
          const table = jobsTable({ form, mark });
          await createTable(stand, context.db, table);
          const queue = table.queue<string>('emails');
          const broker = createBroker(context.db, context.brokers);
          const started = new Collector<string>();
          const reasons = new Collector<unknown>();
          broker.subscribe(queue, async (message, handlerContext) => {
            started.push(message.id);
            await new Promise((resolve) => handlerContext.signal.addEventListener('abort', resolve, { once: true }));
            reasons.push(handlerContext.signal.reason);
            // Asks for a retry, which a cancelled message must not get.
            return { kind: 'retry' } as const;
          });
          await broker.start();
          const id = await broker.publish(queue, 'work');
          await started.waitFor(1);
          expect(await broker.cancel(queue, id)).toEqual({ status: 'inWork' });
          const [reason] = await reasons.waitFor(1);
          expect(reason).toBeInstanceOf(CancelledError);
          expect((reason as CancelledError).code).toBe('CANCELLED');
          await untilStats(broker, queue, (stats) => stats.cancelled === 1 && stats.inWork === 0, 'the delivery settled as cancelled');
          const stats = statsOf(broker, queue);
          expect([stats.retried, stats.acked, stats.handlerErrors, stats.settleErrors, stats.leasesLost]).toEqual([0, 0, 0, 0, 0]);
          expect(await unfinished(id)).toBe(0);
          expect(started.items).toEqual([id]);
          await waitForDatabase(async () => (await countRows(context.db, 'tablequeue_cancellations')) === 0, 10_000, 'the record removed');
          expect(broker.metrics()).toMatch(/tablequeue_cancelled_total\{table="jobs",queue="emails"\} 1/);
        });

        if (stand.capabilities.supportsListenNotify) {
          it('a listening broker hears a cancel of its message in work at once, long before its poll or renewal', async () => {
            const table = jobsTable({ form, mark });
            await createTable(stand, context.db, table);
            const queue = table.queue<string>('emails');
            const worker = createBroker(context.db, context.brokers, { pollIntervalMs: 120_000, leaseMs: 120_000 });
            const started = new Collector<string>();
            const reasons = new Collector<unknown>();
            worker.subscribe(queue, async (message, handlerContext) => {
              started.push(message.id);
              await new Promise((resolve) => handlerContext.signal.addEventListener('abort', resolve, { once: true }));
              reasons.push(handlerContext.signal.reason);
            });
            await worker.start();
            const canceller = createBroker(context.db, context.brokers);
            await canceller.start();
            const id = await canceller.publish(queue, 'work');
            await started.waitFor(1);
            expect(await canceller.cancel(queue, id)).toEqual({ status: 'inWork' });
            const [reason] = await reasons.waitFor(1, 10_000);
            expect(reason).toBeInstanceOf(CancelledError);
            await untilStats(worker, queue, (stats) => stats.cancelled === 1 && stats.inWork === 0, 'the delivery settled as cancelled');
            expect(await unfinished(id)).toBe(0);
          });
        }

        if (!stand.capabilities.supportsProcesses) return;

        // Lease: the worker polls too seldom to read the record in time, so the cancel reaches it
        // through its renewal (every second), which finds the row gone and then the record.
        const pollIntervalMs = form === 'lease' ? 120_000 : 50;
        it(`a message in work in another process: that handler aborts (${form === 'lease' ? 'heard at its lease renewal' : 'read at its poll'}), the message is not retried and is removed`, async () => {
          const table = jobsTable({ form, mark });
          await createTable(stand, context.db, table);
          const queue: Queue<string> = table.queue<string>('emails');
          const canceller = createBroker(context.db, context.brokers);
          await canceller.start();
          // Both before the worker starts, whose first claims need no poll.
          const id = await canceller.publish(queue, 'work');
          const next = await canceller.publish(queue, 'next');
          const worker = spawnLineProcess({
            script: CANCEL_WORKER,
            config: { database: context.db.url, table: jobsDeclaration({ form, mark }), queue: 'emails', leaseMs: 2_000, pollIntervalMs },
            label: 'cancel worker',
            prefix: 'event ',
            parse: (rest) => rest,
          });
          try {
            await worker.ready;
            await worker.itemsAtLeast(1);
            expect(worker.items[0]).toBe(`handling ${id}`);
            expect(await canceller.cancel(queue, id)).toEqual({ status: 'inWork' });
            await worker.itemsAtLeast(3, 15_000);
            // Not counted as a lost lease, though the renewal found the row gone.
            expect(worker.items.slice(1, 3)).toEqual([`aborted ${id} CANCELLED`, `settled ${id} cancelled=1 leasesLost=0`]);
            expect(await unfinished(id)).toBe(0);
            await waitForDatabase(async () => (await countRows(context.db, 'tablequeue_cancellations')) === 0, 10_000, 'the record removed');
            // Nothing is left to retry: the second message is the next one handled.
            await worker.itemsAtLeast(4);
            expect(worker.items[3]).toBe(`handling ${next}`);
          } finally {
            worker.child.kill('SIGTERM');
            await worker.exited;
          }
        });

        it('tablequeue cancel prints what it found: waiting, then gone (exit 1); a message in work here is told to stop', async () => {
          const table = jobsTable({ form, mark });
          await createTable(stand, context.db, table);
          const queue = table.queue<string>('emails');
          const broker = createBroker(context.db, context.brokers);
          const started = new Collector<string>();
          const reasons = new Collector<unknown>();
          broker.subscribe(table.queue('sms'), async (message, handlerContext) => {
            started.push(message.id);
            await new Promise((resolve) => handlerContext.signal.addEventListener('abort', resolve, { once: true }));
            reasons.push(handlerContext.signal.reason);
          });
          await broker.start();
          const base = ['cancel', '--database', context.db.url!, '--table', 'jobs'];
          const waiting = await broker.publish(queue, 'waiting');
          const first = await runCliHere([...base, '--queue', 'emails', '--id', waiting]);
          expect(first).toEqual({
            code: 0,
            stdout: `waiting: message ${waiting} of jobs/emails: removed before any handler saw it\n`,
            stderr: '',
          });
          expect(await unfinished(waiting)).toBe(0);
          const again = await runCliHere([...base, '--queue', 'emails', '--id', waiting]);
          expect(again.code).toBe(1);
          expect(again.stdout).toBe(`gone: message ${waiting} of jobs/emails: no unfinished message with this id in the queue; nothing was cancelled\n`);
          const withoutQueue = await runCliHere([...base, '--id', waiting]);
          expect(withoutQueue.code).toBe(2);
          expect(withoutQueue.stderr).toMatch(/cancel needs --queue NAME/);

          const inWork = await broker.publish(table.queue('sms'), 'in work');
          await started.waitFor(1);
          const running = await runCliHere([...base, '--queue', 'sms', '--id', inWork]);
          expect(running.code).toBe(0);
          expect(running.stdout).toMatch(new RegExp(`^inWork: message ${inWork} of jobs/sms: in work`));
          const [reason] = await reasons.waitFor(1, 15_000);
          expect(reason).toBeInstanceOf(CancelledError);
          await untilStats(broker, table.queue('sms'), (stats) => stats.cancelled === 1 && stats.inWork === 0, 'the delivery settled as cancelled', 15_000);
          expect(await unfinished(inWork)).toBe(0);
        });
      });
    }
  }
}
