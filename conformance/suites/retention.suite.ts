import { setTimeout as delay } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { retentionTestHooksOf } from '../../src/broker/broker.js';
import { runCliHere } from '../../src/cli/run-cli.fixture.js';
import { createRetentionStatements } from '../../src/dialect/retention-statements.js';
import { untilSignalled } from '../../src/internal/test-signal.js';
import { defineTable, Outcome, type Broker, type Queue, type QueueTable } from '../../src/index.js';
import type { RetentionRunReport } from '../../src/retention/retainer.js';
import { bindStatement } from '../../src/statement.js';
import { Collector, countRows, createBroker, createTable, formsOf, jobsDeclaration, jobsTable, placeholder, untilStats } from '../fixtures.js';
import type { SuiteContext } from '../run-conformance.js';

const HOUR_MS = 3_600_000;

/** Old enough for an age of an hour, and young enough to stay. */
const twoHoursAgo = () => new Date(Date.now() - 2 * HOUR_MS);
const aMinuteAgo = () => new Date(Date.now() - 60_000);

interface Filled {
  readonly oldProcessed: number;
  readonly recentProcessed: number;
  readonly oldDeadLetters: number;
  readonly recentDeadLetters: number;
  readonly oldWaiting: number;
}

/**
 * Rows of every age and state: processed two hours and a minute ago (group "done"), dead letters
 * in group "dead" last due two hours and a minute ago, and rows still waiting in group "waiting"
 * that were due two hours ago, which no retention may touch.
 */
async function fill(context: SuiteContext, broker: Broker, table: QueueTable, filled: Filled): Promise<void> {
  const publish = (queue: Queue<unknown>, count: number, runAt?: Date) =>
    broker.publishMany(queue, Array.from({ length: count }, (_, index) => ({ payload: { index }, ...(runAt === undefined ? {} : { runAt }) })));
  const driver = await context.db.openDriver({ poolSize: 1 });
  try {
    const markProcessed = (at: Date) =>
      driver.execute({
        name: 'test.markProcessed',
        sql: `UPDATE jobs SET processed_at = ${placeholder(context.stand, 1)} WHERE queue = 'done' AND processed_at IS NULL`,
        values: [at],
      });
    await publish(table.queue('done'), filled.oldProcessed);
    await markProcessed(twoHoursAgo());
    await publish(table.queue('done'), filled.recentProcessed);
    await markProcessed(aMinuteAgo());
  } finally {
    await driver.close();
  }
  await publish(table.queue('dead'), filled.oldDeadLetters, twoHoursAgo());
  await publish(table.queue('dead'), filled.recentDeadLetters, aMinuteAgo());
  await publish(table.queue('waiting'), filled.oldWaiting, twoHoursAgo());
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

/** Retention (`broker.retain`, `tablequeue prune`): exactly the old rows go, in batches that never stall claims. */
export function retentionSuite(context: SuiteContext): void {
  const { stand } = context;

  describe('retention', { timeout: 60_000 }, () => {
    for (const form of formsOf(stand)) {
      it(`${form}: deletes exactly the processed rows and dead letters past their age while a drain runs, claims going on`, async () => {
        const table = jobsTable({ form, mark: true });
        await createTable(stand, context.db, table);
        const drainer = createBroker(context.db, context.brokers);
        const handled = new Collector<number>();
        drainer.subscribe(table.queue('work'), async (message) => {
          handled.push(Date.now() - (message.payload as { publishedAt: number }).publishedAt);
        });
        await drainer.start();
        const filled = { oldProcessed: 3_000, recentProcessed: 50, oldDeadLetters: 600, recentDeadLetters: 20, oldWaiting: 20 };
        await fill(context, drainer, table, filled);

        // A claim's latency: one message published, and the time until its handler starts.
        const ping = async (): Promise<void> => {
          const count = handled.items.length;
          await drainer.publish(table.queue('work'), { publishedAt: Date.now() });
          await handled.waitFor(count + 1);
        };
        for (let index = 0; index < 30; index += 1) await ping();
        const before = handled.items.slice();

        const retainer = createBroker(context.db, context.brokers);
        retainer.retain(table, {
          processedForMs: HOUR_MS,
          deadLettersForMs: HOUR_MS,
          deadLetters: { group: 'dead' },
          batchSize: 250,
          pauseMs: 20,
        });
        const errors: unknown[] = [];
        retainer.on('error', (error) => errors.push(error));
        const hooks = retentionTestHooksOf(retainer);
        const runEnded = hooks.runEnded.next({ matches: (report) => report.held, what: 'the first retention run', timeoutMs: 30_000 }).catch((error: unknown) => {
          throw new Error(`${String(error)}; errors: ${errors.map(String).join('; ')}`);
        });
        hooks.batchDeleted.turnOn();
        await retainer.start();
        let isPruning = true;
        void runEnded.finally(() => (isPruning = false));
        const duringFrom = handled.items.length;
        while (isPruning) await ping();
        const during = handled.items.slice(duringFrom);
        const report = await runEnded;
        const batches = hooks.batchDeleted.pending.length;

        console.log(
          `${stand.name} ${form} retention: ${batches} batches of at most 250 in ${report.endedAt - report.startedAt} ms; ` +
            `claim latency before: median ${median(before)} ms, max ${Math.max(...before)} ms (${before.length} claims); ` +
            `during: median ${median(during)} ms, max ${Math.max(...during)} ms (${during.length} claims)`,
        );
        expect(report.deleted).toEqual({ processed: filled.oldProcessed, deadLetter: filled.oldDeadLetters, dedupeWindow: 0 });
        expect(await countRows(context.db, 'jobs', "queue = 'done'")).toBe(filled.recentProcessed);
        expect(await countRows(context.db, 'jobs', "queue = 'dead'")).toBe(filled.recentDeadLetters);
        expect(await countRows(context.db, 'jobs', "queue = 'waiting'")).toBe(filled.oldWaiting);
        // Every ping was handled and marked processed a moment ago: young rows stay.
        expect(await countRows(context.db, 'jobs', "queue = 'work'")).toBe(handled.items.length);
        // Claims went on while it deleted: no claim waited behind a batch for long.
        expect(Math.max(...during)).toBeLessThan(2_000);

        const [stats] = retainer.stats().retention;
        expect(stats).toMatchObject({
          table: 'jobs',
          runs: 1,
          lastRunDeleted: { processed: filled.oldProcessed, deadLetter: filled.oldDeadLetters },
          deleted: { processed: filled.oldProcessed, deadLetter: filled.oldDeadLetters },
          isPruning: false,
        });
        const metrics = retainer.metrics();
        expect(metrics).toContain(`tablequeue_pruned_rows_total{table="jobs",kind="processed"} ${filled.oldProcessed}`);
        expect(metrics).toContain(`tablequeue_pruned_rows_total{table="jobs",kind="deadLetter"} ${filled.oldDeadLetters}`);
      });
    }

    it("dedupeWindows: deletes the table's passed dedupeForMs windows in batches, and keeps open ones and other tables'", async () => {
      const keyed = (name: string) => defineTable({ ...jobsDeclaration({ form: 'lease', name }), dedupeKey: 'dedupe_key' });
      const table = keyed('jobs');
      const other = keyed('other_jobs');
      await createTable(stand, context.db, table);
      await createTable(stand, context.db, other);
      const windows = { dedupeWindowsTable: 'retained_windows' };
      const publisher = createBroker(context.db, context.brokers, windows);
      publisher.subscribe(table.queue('emails'), () => Outcome.ack());
      await publisher.start();
      const passingMs = 50;
      for (let index = 0; index < 5; index += 1) {
        await publisher.publish(table.queue('emails'), {}, { dedupeKey: `open-${index}`, dedupeForMs: HOUR_MS });
      }
      for (let index = 0; index < 30; index += 1) {
        await publisher.publish(table.queue('emails'), {}, { dedupeKey: `passed-${index}`, dedupeForMs: passingMs });
      }
      for (let index = 0; index < 3; index += 1) {
        await publisher.publish(other.queue('emails'), {}, { dedupeKey: `passed-${index}`, dedupeForMs: passingMs });
      }
      const lastOpenedAt = Date.now();
      await untilStats(publisher, table.queue('emails'), (stats) => stats.acked === 35, 'every row acked, so only the windows hold keys');
      // The windows are the publishing host's time: wait until the short ones have passed on it.
      await delay(Math.max(0, lastOpenedAt + passingMs + 10 - Date.now()));

      const retainer = createBroker(context.db, context.brokers, windows);
      retainer.retain(table, { dedupeWindows: true, batchSize: 8, pauseMs: 0 });
      const hooks = retentionTestHooksOf(retainer);
      hooks.batchDeleted.turnOn();
      const runEnded = hooks.runEnded.next({ matches: (report) => report.held, what: 'the first retention run', timeoutMs: 30_000 });
      await retainer.start();
      const report = await runEnded;
      expect(report.deleted).toEqual({ processed: 0, deadLetter: 0, dedupeWindow: 30 });
      expect(hooks.batchDeleted.pending.map((batch) => batch.rowCount)).toEqual([8, 8, 8, 6]);
      expect(await countRows(context.db, 'retained_windows', "queue_table = 'jobs'")).toBe(5);
      expect(await countRows(context.db, 'retained_windows', "queue_table = 'other_jobs'")).toBe(3);
      expect(retainer.metrics()).toContain('tablequeue_pruned_rows_total{table="jobs",kind="dedupeWindow"} 30');
      // A key whose window was deleted opens a new one; an open window still refuses its key.
      expect((await publisher.publish(table.queue('emails'), {}, { dedupeKey: 'passed-0', dedupeForMs: HOUR_MS })).status).toBe('published');
      expect((await publisher.publish(table.queue('emails'), {}, { dedupeKey: 'open-0', dedupeForMs: HOUR_MS })).status).toBe('duplicate');
    });

    it('two brokers retaining one table: one prunes at a time, through the maintenance lease', async () => {
      const table = jobsTable({ form: 'lease', mark: true });
      await createTable(stand, context.db, table);
      const options = { processedForMs: HOUR_MS, batchSize: 50, pauseMs: 300, intervalMs: 100 };
      const [first, second] = [createBroker(context.db, context.brokers), createBroker(context.db, context.brokers)];
      first.retain(table, options);
      second.retain(table, options);
      const reports: (RetentionRunReport & { broker: number })[] = [];
      const hooks = [first, second].map((broker) => retentionTestHooksOf(broker));
      hooks.forEach((hook, broker) => hook.runEnded.turnOn().observe((report) => reports.push({ ...report, broker })));

      const filler = createBroker(context.db, context.brokers);
      await filler.start();
      await fill(context, filler, table, { oldProcessed: 600, recentProcessed: 10, oldDeadLetters: 0, recentDeadLetters: 0, oldWaiting: 0 });

      // The first holds the lease through twelve batches 300 ms apart (3.3 s); the second starts meanwhile.
      await first.start();
      await hooks[0]!.batchDeleted.next({ what: "the first broker's first batch" });
      await second.start();
      const secondFirstRun = await hooks[1]!.runEnded.next({ what: "the second broker's first run" });
      expect(secondFirstRun.held).toBe(false);

      const deletedSoFar = () => reports.reduce((sum, report) => sum + report.deleted.processed, 0);
      await untilSignalled(
        hooks.map((hook) => hook.runEnded),
        () => deletedSoFar() >= 600 && reports.some((report) => report.broker === 1 && report.held),
        'every old row deleted, and a later run of the second broker that held the lease',
        30_000,
      );
      const held = reports.filter((report) => report.held);
      for (const a of held) {
        for (const b of held) {
          if (a.broker !== b.broker) expect(a.endedAt <= b.startedAt || b.endedAt <= a.startedAt).toBe(true);
        }
      }
      expect(deletedSoFar()).toBe(600);
      expect(await countRows(context.db, 'jobs')).toBe(10);
      expect(second.stats().retention[0]!.runsSkipped).toBeGreaterThanOrEqual(1);
    });

    it('waits while another holder keeps the maintenance lease, and takes it once it expires', async () => {
      const table = jobsTable({ form: 'lease', mark: true });
      await createTable(stand, context.db, table);
      const filler = createBroker(context.db, context.brokers);
      await filler.start();
      await fill(context, filler, table, { oldProcessed: 30, recentProcessed: 0, oldDeadLetters: 0, recentDeadLetters: 0, oldWaiting: 0 });
      const driver = await context.db.openDriver({ poolSize: 1 });
      const statements = createRetentionStatements(stand.kind);
      const maintenance = { schema: undefined, name: 'tablequeue_maintenance' };
      // A replica that died holding the lease: its row says so for a minute, then for no longer.
      const holdAsGhost = (delayMicroseconds: number) =>
        driver.execute(
          bindStatement(statements.takeLease(maintenance), { 'column:task': 'retain:jobs', 'column:holder': 'ghost', delayMicroseconds }),
        );
      try {
        await driver.execute({ name: 'test.create', sql: statements.createMaintenanceTable(maintenance), values: [] });
        await driver.execute(bindStatement(statements.addTask(maintenance), { 'column:task': 'retain:jobs' }));
        expect((await holdAsGhost(60_000_000)).affectedRows).toBe(1);

        const broker = createBroker(context.db, context.brokers);
        broker.retain(table, { processedForMs: HOUR_MS, intervalMs: 100 });
        const hooks = retentionTestHooksOf(broker);
        hooks.runEnded.turnOn();
        await broker.start();
        expect((await hooks.runEnded.next({ what: 'a run while the ghost holds the lease' })).held).toBe(false);
        expect(await countRows(context.db, 'jobs')).toBe(30);

        expect((await holdAsGhost(-1_000_000)).affectedRows).toBe(1);
        const report = await hooks.runEnded.next({ matches: (run) => run.held, what: 'a run after the lease expired' });
        expect(report.deleted.processed).toBe(30);
        // Its runs hand the lease back: once it stopped, the ghost takes it again at once.
        await broker.stop();
        expect((await holdAsGhost(60_000_000)).affectedRows).toBe(1);
      } finally {
        await driver.close();
      }
    });

    it('refuses what the table cannot keep, saying which column to declare', () => {
      const broker = createBroker(context.db, context.brokers);
      const unmarked = jobsTable({ form: 'lease' });
      expect(() => broker.retain(unmarked, { processedForMs: HOUR_MS })).toThrow(/no processedAt column.*declare processedAt/);
      const noRetryAfter = jobsTable({ form: 'lease', mark: true, withRetryAfter: false });
      expect(() => broker.retain(noRetryAfter, { deadLettersForMs: HOUR_MS, deadLetters: { group: 'dead' } })).toThrow(
        /no retryAfter column.*declare retryAfter/,
      );
    });

    // The command line opens the database by URL, which an in-memory database has none of.
    if (!stand.capabilities.supportsProcesses) return;

    it('tablequeue prune counts with --dry-run, then deletes the old rows of the table and of a dead-letter table', async () => {
      const table = jobsTable({ form: 'lease', mark: true });
      const deadTable = jobsTable({ form: 'lease', mark: true, name: 'jobs_dead' });
      await createTable(stand, context.db, table);
      await createTable(stand, context.db, deadTable);
      const broker = createBroker(context.db, context.brokers);
      await broker.start();
      await fill(context, broker, table, { oldProcessed: 120, recentProcessed: 5, oldDeadLetters: 0, recentDeadLetters: 0, oldWaiting: 3 });
      // Dead letters moved into a table keep their rows as they were, retryAfter included.
      await broker.publishMany(deadTable.queue('failing'), Array.from({ length: 40 }, () => ({ payload: 'old', runAt: twoHoursAgo() })));
      await broker.publishMany(deadTable.queue('failing'), Array.from({ length: 4 }, () => ({ payload: 'new', runAt: aMinuteAgo() })));
      await broker.stop();

      const base = ['prune', '--database', context.db.url!, '--table', 'jobs'];
      const ages = ['--processed-older-than', '1h', '--dead-letters-older-than', '90m', '--dead-letter-table', 'jobs_dead'];
      const dryRun = await runCliHere([...base, ...ages, '--dry-run']);
      expect(dryRun).toEqual({
        code: 0,
        stdout: 'would delete 120 processed rows older than 1h of table "jobs"\nwould delete 40 dead letters older than 90m of table "jobs"\n',
        stderr: '',
      });
      expect(await countRows(context.db, 'jobs')).toBe(128);

      const pruned = await runCliHere([...base, ...ages, '--batch', '25', '--pause-ms', '0']);
      expect(pruned).toEqual({
        code: 0,
        stdout: 'deleted 120 processed rows older than 1h of table "jobs"\ndeleted 40 dead letters older than 90m of table "jobs"\n',
        stderr: '',
      });
      expect(await countRows(context.db, 'jobs')).toBe(8);
      expect(await countRows(context.db, 'jobs_dead')).toBe(4);

      const usage = await runCliHere([...base, '--dead-letters-older-than', '30d']);
      expect(usage.code).toBe(2);
      expect(usage.stderr).toContain('--dead-letters-older-than needs where the dead letters are: --dead-letter-group NAME or --dead-letter-table NAME');
      const badAge = await runCliHere([...base, '--processed-older-than', '7']);
      expect(badAge.code).toBe(2);
      expect(badAge.stderr).toContain('--processed-older-than takes an age such as 7d, 12h, 30m, 90s or 500ms, got "7"');
    });

    it('tablequeue prune --dedupe-windows counts with --dry-run, then deletes the passed windows; a missing windows table is named', async () => {
      const table = defineTable({ ...jobsDeclaration({ form: 'lease' }), dedupeKey: 'dedupe_key' });
      await createTable(stand, context.db, table);
      const broker = createBroker(context.db, context.brokers);
      broker.subscribe(table.queue('emails'), () => Outcome.ack());
      await broker.start();
      const passingMs = 20;
      for (let index = 0; index < 12; index += 1) {
        await broker.publish(table.queue('emails'), {}, { dedupeKey: `passed-${index}`, dedupeForMs: passingMs });
      }
      await broker.publish(table.queue('emails'), {}, { dedupeKey: 'open', dedupeForMs: HOUR_MS });
      const lastOpenedAt = Date.now();
      await untilStats(broker, table.queue('emails'), (stats) => stats.acked === 13, 'every row acked');
      await broker.stop();
      await delay(Math.max(0, lastOpenedAt + passingMs + 10 - Date.now()));

      const base = ['prune', '--database', context.db.url!, '--table', 'jobs', '--dedupe-windows'];
      expect(await runCliHere([...base, '--dry-run'])).toEqual({
        code: 0,
        stdout: 'would delete 12 passed dedupe windows of table "jobs" in "tablequeue_dedupe_windows"\n',
        stderr: '',
      });
      expect(await runCliHere([...base, '--batch', '5', '--pause-ms', '0'])).toEqual({
        code: 0,
        stdout: 'deleted 12 passed dedupe windows of table "jobs" in "tablequeue_dedupe_windows"\n',
        stderr: '',
      });
      expect(await countRows(context.db, 'tablequeue_dedupe_windows')).toBe(1);

      const again = createBroker(context.db, context.brokers);
      await again.start();
      await again.publish(table.queue('emails'), {}, { dedupeKey: 'once', dedupeForMs: passingMs });
      const onceOpenedAt = Date.now();
      await again.stop();
      await delay(Math.max(0, onceOpenedAt + passingMs + 10 - Date.now()));
      expect((await runCliHere([...base, '--dry-run'])).stdout).toBe('would delete 1 passed dedupe window of table "jobs" in "tablequeue_dedupe_windows"\n');

      const missing = await runCliHere([...base, '--dedupe-windows-table', 'no_windows']);
      expect(missing.code).toBe(1);
      expect(missing.stderr).toContain('the dedupe windows table "no_windows" cannot be read (');
      const withoutFlag = await runCliHere(['prune', '--database', context.db.url!, '--table', 'jobs', '--dedupe-windows-table', 'w']);
      expect(withoutFlag.code).toBe(2);
      expect(withoutFlag.stderr).toContain('add --dedupe-windows');
    });
  });
}
