import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { openQueueInspector, Outcome, type Broker, type QueueTable } from '../../src/index.js';
import { LAST_ERROR_HEADER } from '../../src/admin/open-queue-inspector.js';
import { runCliHere } from '../../src/cli/run-cli.fixture.js';
import { Collector, countRows, createBroker, createTable, formsOf, jobsTable, placeholder, untilStats } from '../fixtures.js';
import type { SuiteContext } from '../run-conformance.js';
import type { Stand } from '../stand.js';

/** The installed command, for `stats --watch`, which runs until its process gets Ctrl-C. */
const CLI = fileURLToPath(new URL('../../src/cli/cli.ts', import.meta.url));

/**
 * What a user or attacker can put in a queue to act on the terminal of whoever reads it: set the
 * window title, write the clipboard, erase the lines above, and a C1 CSI (U+009B) in place of ESC [.
 */
const TERMINAL_ATTACK = 'x\u001b]0;owned\u0007\u001b]52;c;cm0gLXJmIH4=\u0007\u001b[2K\u001b[1A\u009b2Jy';
const ATTACK_SHOWN = 'x\\x1b]0;owned\\x07\\x1b]52;c;cm0gLXJmIH4=\\x07\\x1b[2K\\x1b[1A\\u009b2Jy';
// eslint-disable-next-line no-control-regex
const RAW_CONTROL = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/;

interface GroupJson {
  group: string | null;
  ready: number;
  delayed: number;
  inWork: number;
  processed: number;
  deadLettered: number;
  total: number;
  oldestReadyAgeSeconds: number | null;
  /** Null when the heartbeats cannot tell. */
  unread: boolean | null;
}

interface InspectionJson {
  table: string;
  deadLettered: number;
  groups: GroupJson[];
  readers: { heartbeatTable: string; brokers: number; unreadGroups: string[]; reported: unknown[] } | null;
  unindexedRowsInWork: { queues: { group: string | null; reason: string }[]; createIndexSql: string } | null;
}

/**
 * A lease table (every stand has the lease form) that marks processed rows, holding a row in
 * each state: group "waiting" two ready and one delayed, "working" one leased by a handler still
 * running, "finished" one processed, and two dead letters in group "dead" that came from "failing".
 */
async function fillEveryState(context: SuiteContext): Promise<{ broker: Broker; release: () => void }> {
  const table = jobsTable({ form: 'lease', mark: true });
  await createTable(context.stand, context.db, table);
  const broker = createBroker(context.db, context.brokers);
  const started = new Collector<string>();
  let release: () => void = () => undefined;
  const gate = new Promise<void>((resolve) => {
    release = resolve;
  });
  broker.subscribe(table.queue('working'), async (message) => {
    started.push(message.id);
    await gate;
  });
  const [finished, failing] = [table.queue('finished'), table.queue('failing')];
  broker.subscribe(finished, () => Outcome.ack());
  broker.subscribe(failing, () => Outcome.retry(), { maxAttempts: 1, deadLetter: 'dead' });
  await broker.start();
  await broker.publishMany(table.queue('waiting'), [{ payload: { n: 1 } }, { payload: { n: 2 } }]);
  await broker.publish(table.queue('waiting'), { n: 3 }, { delayMs: 3_600_000 });
  await broker.publish(table.queue('working'), { n: 4 });
  await broker.publish(table.queue('finished'), { n: 5 });
  await broker.publishMany(table.queue('failing'), [{ payload: { n: 6 } }, { payload: { n: 7 } }]);
  await started.waitFor(1);
  await untilStats(broker, finished, (stats) => stats.acked === 1, 'the processed row');
  await untilStats(broker, failing, (stats) => stats.deadLettered === 2, 'two dead letters');
  return { broker, release };
}

/** The statement `createTableSql` adds for `inWorkIndex`, which `stats` gives as the fix. */
function inWorkIndexSql(stand: Stand, table: QueueTable): string {
  const plain = new Set(table.createTableSql(stand.ddlDialect));
  const added = table.createTableSql(stand.ddlDialect, { inWorkIndex: true }).filter((sql) => !plain.has(sql));
  expect(added).toHaveLength(1);
  return added[0]!;
}

function groupOf(inspection: InspectionJson, group: string): GroupJson | undefined {
  return inspection.groups.find((counts) => counts.group === group);
}

/** Operator commands (`stats`, `peek`, `requeue`, `purge`) and the inspector behind them. */
export function cliOperationsSuite(context: SuiteContext): void {
  const { stand } = context;

  describe('queue inspector', () => {
    it('counts, peeks, requeues from a dead-letter table and purges, in process', async () => {
      const table = jobsTable({ form: 'lease', grouped: false });
      await createTable(stand, context.db, table);
      await createTable(stand, context.db, jobsTable({ form: 'lease', grouped: false, name: 'jobs_dead' }));
      const broker = createBroker(context.db, context.brokers);
      broker.subscribe(table.queue('jobs'), () => Outcome.retry(), { maxAttempts: 1, deadLetter: 'jobs_dead' });
      await broker.start();
      const ids = [await broker.publish(table.queue('jobs'), { n: 1 }), await broker.publish(table.queue('jobs'), 'plain text')];
      await untilStats(broker, table.queue('jobs'), (stats) => stats.deadLettered === 2, 'two dead letters');
      await broker.stop();

      const driver = await context.db.openDriver();
      const missing = openQueueInspector({ database: driver, table: 'no_such_jobs' });
      await expect(missing).rejects.toMatchObject({ code: 'SCHEMA', table: 'no_such_jobs' });
      const misnamed = openQueueInspector({ database: driver, table: 'jobs', columns: { group: 'topic' } });
      await expect(misnamed).rejects.toThrow(/table "jobs" has no column "topic" \(named as its group column\)/);
      const inspector = await openQueueInspector({ database: driver, table: 'jobs', deadLetter: { kind: 'table', table: 'jobs_dead' } });
      try {
        const before = await inspector.inspect();
        expect(before.deadLettered).toBe(2);
        expect(before.groups).toEqual([
          expect.objectContaining({ group: null, ready: 0, delayed: 0, inWork: 0, processed: 0, deadLettered: 2 }),
        ]);
        const dead = await inspector.peek({ deadLetters: true });
        // One attempt each (maxAttempts: 1); the column holds the attempt a next delivery would have had.
        expect(dead.map((row) => [row.id, row.payload, row.attemptsMade, row.attempt])).toEqual([
          [ids[0], { n: 1 }, 1, 2],
          [ids[1], 'plain text', 1, 2],
        ]);

        // Dead letters that waited long: requeued, they are due from the requeue on.
        const longAgo = stand.kind === 'sqlite' ? '2000-01-01T00:00:00.000+00:00' : '2000-01-01 00:00:00';
        await context.db.exec(`UPDATE jobs_dead SET retry_after = '${longAgo}'`);
        const notMoved: string[] = [];
        const requeuedAt = Date.now();
        expect(await inspector.requeue({ ids: [ids[1]!, '999999'], onNotMoved: (id) => notMoved.push(id) })).toBe(1);
        expect(notMoved).toEqual(['999999']);
        const requeued = await inspector.peek();
        expect(requeued.map((row) => [row.id, row.attempt, row.lockedUntil, row.lastError])).toEqual([[ids[1], 1, null, null]]);
        // Stored to the database's precision (whole seconds on some MySQL columns).
        expect(requeued[0]!.retryAfter!.getTime()).toBeGreaterThanOrEqual(requeuedAt - 1_000);
        expect((await inspector.inspect()).groups[0]).toMatchObject({ ready: 1, deadLettered: 1 });
        expect(await inspector.requeue({})).toBe(1);
        const after = await inspector.inspect();
        expect(after.deadLettered).toBe(0);
        expect(after.groups[0]).toMatchObject({ ready: 2, deadLettered: 0 });
        expect(await countRows(context.db, 'jobs_dead')).toBe(0);

        expect(await inspector.purge()).toBe(2);
        expect(await countRows(context.db, 'jobs')).toBe(0);
      } finally {
        await inspector.close();
        await driver.close();
      }
    });

    it('reads whether an index serves the count of the rows in work, and gives the one to add', async () => {
      const table = jobsTable({ form: 'lease' });
      await createTable(stand, context.db, table);
      const driver = await context.db.openDriver();
      try {
        const createIndexSql = inWorkIndexSql(stand, table);
        const read = async () => {
          const inspector = await openQueueInspector({ database: driver, table: 'jobs' });
          try {
            return await inspector.readInWorkIndex();
          } finally {
            await inspector.close();
          }
        };
        expect(await read()).toEqual({ isPresent: false, createIndexSql });
        await context.db.exec(createIndexSql);
        expect(await read()).toEqual({ isPresent: true, createIndexSql });
        if (formsOf(stand).includes('rowLock')) {
          await createTable(stand, context.db, jobsTable({ form: 'rowLock', name: 'locked_jobs' }));
          const rowLock = await openQueueInspector({ database: driver, table: 'locked_jobs' });
          expect(await rowLock.readInWorkIndex()).toBeNull();
          await rowLock.close();
        }
      } finally {
        await driver.close();
      }
    });
  });

  // The commands run in processes of their own, which need a database another process can open.
  if (!stand.capabilities.supportsProcesses) return;

  describe('tablequeue stats, peek, requeue and purge', { timeout: 120_000 }, () => {
    it('stats --json counts every state per group, and peek shows the dead letters decoded', async () => {
      const { broker, release } = await fillEveryState(context);
      const url = context.db.url!;
      const base = ['--database', url, '--table', 'jobs', '--dead-letter-group', 'dead'];
      const withoutFlag = ['--database', url, '--table', 'jobs'];
      const [stats, peek, human, statsWithoutFlag, live, liveWithoutFlag] = await Promise.all([
        runCliHere(['stats', ...base, '--json']),
        runCliHere(['peek', ...base, '--dead-letters', '--json']),
        runCliHere(['stats', ...base]),
        runCliHere(['stats', ...withoutFlag, '--json']),
        runCliHere(['peek', ...base, '--json']),
        runCliHere(['peek', ...withoutFlag, '--json']),
      ]);
      release();
      await broker.stop();

      expect(stats.stderr).toBe('');
      expect(stats.code).toBe(0);
      const inspection = JSON.parse(stats.stdout) as InspectionJson;
      expect(inspection.table).toBe('jobs');
      expect(inspection.deadLettered).toBe(2);
      expect(groupOf(inspection, 'waiting')).toMatchObject({ ready: 2, delayed: 1, inWork: 0, processed: 0, deadLettered: 0, total: 3 });
      expect(groupOf(inspection, 'waiting')!.oldestReadyAgeSeconds).toEqual(expect.any(Number));
      expect(groupOf(inspection, 'working')).toMatchObject({ ready: 0, delayed: 0, inWork: 1, processed: 0, total: 1 });
      expect(groupOf(inspection, 'finished')).toMatchObject({ ready: 0, inWork: 0, processed: 1, total: 1 });
      // Dead letters are their own column: never ready, so no oldest-ready age to alert on.
      expect(groupOf(inspection, 'dead')).toMatchObject({ ready: 0, delayed: 0, inWork: 0, deadLettered: 2, total: 2, oldestReadyAgeSeconds: null });
      expect(groupOf(inspection, 'failing')).toBeUndefined();
      // Without --dead-letter-group the same: the dead-letter move marked each row with its last error.
      expect(statsWithoutFlag.code).toBe(0);
      const inspectionWithoutFlag = JSON.parse(statsWithoutFlag.stdout) as InspectionJson;
      expect(inspectionWithoutFlag.deadLettered).toBe(2);
      expect(groupOf(inspectionWithoutFlag, 'dead')).toMatchObject({ ready: 0, deadLettered: 2, oldestReadyAgeSeconds: null });
      expect(groupOf(inspectionWithoutFlag, 'waiting')).toMatchObject({ ready: 2, delayed: 1, deadLettered: 0 });

      // peek without --group shows the queues' own rows in claim order, the dead letters left out.
      for (const result of [live, liveWithoutFlag]) {
        expect(result.code).toBe(0);
        const liveRows = JSON.parse(result.stdout) as { group: string; payload: unknown }[];
        expect(liveRows.map((row) => [row.group, row.payload])).toEqual([
          ['waiting', { n: 1 }],
          ['waiting', { n: 2 }],
          ['working', { n: 4 }],
          ['waiting', { n: 3 }],
        ]);
      }

      expect(peek.code).toBe(0);
      const rows = JSON.parse(peek.stdout) as { group: string; payload: unknown; attempt: number }[];
      expect(rows.map((row) => [row.group, row.payload])).toEqual([
        ['dead', { n: 6 }],
        ['dead', { n: 7 }],
      ]);

      expect(human.code).toBe(0);
      const lines = human.stdout.trimEnd().split('\n');
      expect(lines[1]).toMatch(/^group\s+ready\s+delayed\s+in work\s+processed\s+dead-lettered\s+oldest ready$/);
      // Lined up: every row as wide as the heading (right-aligned counts end where it ends).
      expect(new Set(lines.slice(1).map((line) => line.length)).size).toBe(1);
      expect(human.stdout.includes('\u001b[')).toBe(false);
    });

    it('requeue moves exactly the dead letters named, then all of them: attempt reset, due now, last error gone', async () => {
      const { broker, release } = await fillEveryState(context);
      release();
      await broker.stop();
      // Dead letters that waited long: a requeue must not leave them with their old retry time.
      const longAgo = stand.kind === 'sqlite' ? '2000-01-01T00:00:00.000+00:00' : '2000-01-01 00:00:00';
      await context.db.exec(`UPDATE jobs SET retry_after = '${longAgo}' WHERE queue = 'dead'`);
      const url = context.db.url!;
      const base = ['--database', url, '--table', 'jobs', '--dead-letter-group', 'dead'];
      const dead = JSON.parse((await runCliHere(['peek', ...base, '--dead-letters', '--json'])).stdout) as { id: string }[];
      expect(dead).toHaveLength(2);

      const [neither, noDestination, unused] = await Promise.all([
        runCliHere(['requeue', ...base]),
        runCliHere(['requeue', ...base, '--all']),
        // "failing" has no rows left and the broker that read it has stopped: as a misspelt group would.
        runCliHere(['requeue', ...base, '--all', '--to-group', 'failing']),
      ]);
      expect(neither.code).toBe(2);
      expect(neither.stderr).toMatch(/--id .* or --all/);
      expect(noDestination.code).toBe(2);
      expect(noDestination.stderr).toMatch(/--to-group/);
      expect(unused.code).toBe(2);
      expect(unused.stderr).toMatch(/group "failing" of table "jobs" has no rows, and no running broker reads it \(heartbeat table "tablequeue_brokers" cannot be read/);
      expect(unused.stderr).toMatch(/run again with --yes to move them there anyway/);
      expect(await countRows(context.db, 'jobs', "queue = 'dead'")).toBe(2);

      const one = await runCliHere(['requeue', ...base, '--id', dead[0]!.id, '--id', '999999', '--to-group', 'failing', '--yes']);
      expect(one.code).toBe(1);
      expect(one.stdout).toMatch(/moved 1 dead letter back to group "failing"/);
      expect(one.stderr).toMatch(/not moved: 999999 is not a dead letter in group "dead"/);
      const moved = await context.db.query<{ id: unknown; queue: string; attempt: unknown }>('SELECT id, queue, attempt FROM jobs ORDER BY id');
      const byId = new Map(moved.map((row) => [String(row.id), row]));
      expect(byId.get(dead[0]!.id)).toMatchObject({ queue: 'failing' });
      expect(Number(byId.get(dead[0]!.id)!.attempt)).toBe(1);
      expect(byId.get(dead[1]!.id)).toMatchObject({ queue: 'dead' });

      // Ready at once, its wait counted from the requeue, its last error gone with its death.
      const [stats, requeued] = await Promise.all([
        runCliHere(['stats', '--database', url, '--table', 'jobs', '--json']),
        runCliHere(['peek', '--database', url, '--table', 'jobs', '--group', 'failing', '--json']),
      ]);
      const failing = groupOf(JSON.parse(stats.stdout) as InspectionJson, 'failing');
      expect(failing).toMatchObject({ ready: 1, deadLettered: 0 });
      expect(failing!.oldestReadyAgeSeconds).toBeLessThan(600);
      expect(groupOf(JSON.parse(stats.stdout) as InspectionJson, 'dead')).toMatchObject({ ready: 0, deadLettered: 1 });
      expect(JSON.parse(requeued.stdout)).toEqual([expect.objectContaining({ id: dead[0]!.id, lastError: null, headers: {} })]);

      const all = await runCliHere(['requeue', ...base, '--all', '--to-group', 'failing']);
      expect(all.stderr).toBe('');
      expect(all.code).toBe(0);
      expect(all.stdout).toMatch(/moved 1 dead letter back/);
      expect(await countRows(context.db, 'jobs', "queue = 'dead'")).toBe(0);
      expect(await countRows(context.db, 'jobs', "queue = 'failing' AND attempt = 1")).toBe(2);
      expect(await countRows(context.db, 'jobs')).toBe(7);
    });

    it('requeue --to-group takes a group with no rows without --yes when a running broker reads it, by its heartbeat', async () => {
      const { broker, release } = await fillEveryState(context);
      release();
      await broker.stop();
      const reader = createBroker(context.db, context.brokers, { heartbeat: { table: 'tq_requeue_brokers', intervalMs: 1_000 } });
      const handled = new Collector<unknown>();
      reader.subscribe(jobsTable({ form: 'lease', mark: true }).queue('second-chance'), (message) => void handled.push(message.payload));
      await reader.start();
      const base = ['--database', context.db.url!, '--table', 'jobs', '--dead-letter-group', 'dead', '--to-group', 'second-chance', '--all'];
      const [elsewhere, read] = [
        await runCliHere(['requeue', ...base]),
        await runCliHere(['requeue', ...base, '--heartbeat-table', 'tq_requeue_brokers']),
      ];
      expect(elsewhere.code).toBe(2);
      expect(elsewhere.stderr).toMatch(/no running broker reads it/);
      expect(read.stderr).toBe('');
      expect(read.code).toBe(0);
      expect(read.stdout).toMatch(/moved 2 dead letters back to group "second-chance"/);
      await handled.waitFor(2);
      await reader.stop();
      expect(handled.items).toEqual(expect.arrayContaining([{ n: 6 }, { n: 7 }]));
    });

    it('purge refuses without --yes (exit 2, saying what it would delete) and deletes with it', async () => {
      const { broker, release } = await fillEveryState(context);
      release();
      await broker.stop();
      const base = ['--database', context.db.url!, '--table', 'jobs'];
      const refused = await runCliHere(['purge', ...base, '--group', 'waiting']);
      expect(refused.code).toBe(2);
      expect(refused.stderr).toMatch(/would delete 3 rows of group "waiting"/);
      expect(await countRows(context.db, 'jobs')).toBe(7);

      const purged = await runCliHere(['purge', ...base, '--group', 'waiting', '--yes']);
      expect(purged.code).toBe(0);
      expect(purged.stdout).toMatch(/deleted 3 rows/);
      expect(await countRows(context.db, 'jobs', "queue = 'waiting'")).toBe(0);
      expect(await countRows(context.db, 'jobs')).toBe(4);

      const everything = await runCliHere(['purge', ...base, '--yes']);
      expect(everything.stdout).toMatch(/deleted 4 rows of table "jobs"/);
      expect(await countRows(context.db, 'jobs')).toBe(0);
    });

    it('exits 1 naming a missing table and 2 on a missing flag', async () => {
      const [missingTable, missingFlag] = await Promise.all([
        runCliHere(['stats', '--database', context.db.url!, '--table', 'no_such_jobs']),
        runCliHere(['peek', '--database', context.db.url!]),
      ]);
      expect(missingTable.code).toBe(1);
      expect(missingTable.stderr).toMatch(/table "no_such_jobs" cannot be read/);
      expect(missingFlag.code).toBe(2);
      expect(missingFlag.stderr).toMatch(/peek needs --table/);
    });

    it('peek and stats show control characters from payloads, errors and group names as escapes; --json keeps them exact', async () => {
      const table = jobsTable({ form: 'lease' });
      await createTable(stand, context.db, table);
      const broker = createBroker(context.db, context.brokers);
      await broker.start();
      const deadId = await broker.publish(table.queue('dead'), TERMINAL_ATTACK, { headers: { [LAST_ERROR_HEADER]: TERMINAL_ATTACK } });
      const queuedId = await broker.publish(table.queue('emails'), { note: TERMINAL_ATTACK });
      await broker.stop();
      // A group name written by whoever can write the table, past any check of the publisher.
      await context.db.query(`UPDATE jobs SET queue = ${placeholder(stand, 1)} WHERE id = ${placeholder(stand, 2)}`, [`q${TERMINAL_ATTACK}`, queuedId]);

      const base = ['--database', context.db.url!, '--table', 'jobs', '--dead-letter-group', 'dead'];
      const [stats, peek, dead, deadJson] = await Promise.all([
        runCliHere(['stats', ...base]),
        runCliHere(['peek', ...base, '--limit', '5']),
        runCliHere(['peek', ...base, '--dead-letters']),
        runCliHere(['peek', ...base, '--dead-letters', '--json']),
      ]);
      for (const result of [stats, peek, dead, deadJson]) {
        expect(result.stderr).toBe('');
        expect(result.code).toBe(0);
        expect(result.stdout).not.toMatch(RAW_CONTROL);
      }
      expect(stats.stdout).toContain(`q${ATTACK_SHOWN}`);
      expect(peek.stdout).toContain(`q${ATTACK_SHOWN}`);
      expect(peek.stdout).toContain('\\u001b]0;owned');
      // The payload and the last error, each cut to the preview's length.
      expect(dead.stdout.split(ATTACK_SHOWN)).toHaveLength(3);
      const [row] = JSON.parse(deadJson.stdout) as { id: string; payload: unknown; lastError: string }[];
      expect(row).toMatchObject({ id: deadId, payload: TERMINAL_ATTACK, lastError: TERMINAL_ATTACK });
    });

    it('stats flags a group with ready rows that no running broker reads, by the heartbeats, and says nothing without them', async () => {
      const table = jobsTable({ form: 'lease' });
      await createTable(stand, context.db, table);
      const broker = createBroker(context.db, context.brokers, { heartbeat: { table: 'tq_brokers', intervalMs: 1_000 } });
      const started = new Collector<string>();
      let release: () => void = () => undefined;
      const gate = new Promise<void>((resolve) => {
        release = resolve;
      });
      broker.subscribe(
        table.queue('emails'),
        async (message) => {
          started.push(message.id);
          await gate;
        },
        { maxAttempts: 3, deadLetter: 'emails.dead', concurrency: { global: 1 } },
      );
      await broker.start();
      await broker.publishMany(table.queue('emails'), [{ payload: { n: 1 } }, { payload: { n: 2 } }]);
      // A publisher's typo, a row in the subscription's dead-letter group, and a row not due yet.
      await broker.publishMany(table.queue('emial'), [{ payload: { n: 3 } }, { payload: { n: 4 } }]);
      await broker.publish(table.queue('emails.dead'), { n: 5 });
      await broker.publish(table.queue('later'), { n: 6 }, { delayMs: 3_600_000 });
      await started.waitFor(1);
      const base = ['--database', context.db.url!, '--table', 'jobs'];
      const [json, human, unknownJson, unknownHuman] = await Promise.all([
        runCliHere(['stats', ...base, '--heartbeat-table', 'tq_brokers', '--json']),
        runCliHere(['stats', ...base, '--heartbeat-table', 'tq_brokers']),
        // The default heartbeat table, which no broker of this test writes: nothing can be told.
        runCliHere(['stats', ...base, '--json']),
        runCliHere(['stats', ...base]),
      ]);
      // The fix as given: with the index, the same stats say nothing of it.
      await context.db.exec(inWorkIndexSql(stand, table));
      const indexed = await runCliHere(['stats', ...base, '--heartbeat-table', 'tq_brokers', '--json']);
      release();
      await broker.stop();
      expect((JSON.parse(indexed.stdout) as InspectionJson).unindexedRowsInWork).toBeNull();

      for (const result of [json, human, unknownJson, unknownHuman]) {
        expect(result.stderr).toBe('');
        expect(result.code).toBe(0);
      }
      const inspection = JSON.parse(json.stdout) as InspectionJson;
      expect(inspection.readers).toEqual({
        heartbeatTable: 'tq_brokers',
        brokers: 1,
        unreadGroups: ['emial'],
        reported: [{ group: 'emails', limits: ['at most 1 in work'], countsRowsInWork: 'concurrency', timedOut: 0, cancelled: 0 }],
      });
      expect(inspection.groups.map((counts) => [counts.group, counts.ready, counts.unread])).toEqual([
        ['emails', 1, false],
        ['emails.dead', 1, false],
        ['emial', 2, true],
        ['later', 0, false],
      ]);
      expect(human.stdout).toContain(
        'unread: group "emial" has 2 ready rows, and no running broker subscribes to it ' +
          '(1 broker reads this table and reports to heartbeat table "tq_brokers"); check the queue name',
      );
      expect(human.stdout.match(/unread:/g)).toHaveLength(1);
      expect(human.stdout).toContain('group "emails": at most 1 in work (as its brokers report)');
      // A lease claim under a limit counts the rows in work, and the fixture's table has no index for it.
      const createIndexSql = inWorkIndexSql(stand, table);
      expect(inspection.unindexedRowsInWork).toEqual({ queues: [{ group: 'emails', reason: 'concurrency' }], createIndexSql });
      expect(human.stdout).toContain(
        'no in-work index: group "emails" (a concurrency limit) counts the rows in work on every claim, as its brokers report, ' +
          `and each count reads the whole table; add the index with: ${createIndexSql}`,
      );

      const unknown = JSON.parse(unknownJson.stdout) as InspectionJson;
      expect(unknown.readers).toBeNull();
      expect(unknown.unindexedRowsInWork).toBeNull();
      expect(unknown.groups.map((counts) => counts.unread)).toEqual([null, null, null, null]);
      expect(unknownHuman.stdout).not.toContain('unread');
    });

    it('takes the database URL from DATABASE_URL, or the variable --database-env names, keeping it off the command line', async () => {
      await createTable(stand, context.db, jobsTable({ form: 'lease' }));
      const url = context.db.url!;
      const [fromDefault, fromNamed, missing] = await Promise.all([
        runCliHere(['stats', '--table', 'jobs', '--json'], { DATABASE_URL: url }),
        runCliHere(['peek', '--database-env', 'QUEUE_DATABASE', '--table', 'jobs', '--json'], { QUEUE_DATABASE: url, DATABASE_URL: 'postgres://nowhere.invalid/db' }),
        runCliHere(['purge', '--database-env', 'QUEUE_DATABASE', '--table', 'jobs', '--yes'], { DATABASE_URL: url }),
      ]);
      expect(fromDefault.stderr).toBe('');
      expect(fromDefault.code).toBe(0);
      expect(JSON.parse(fromDefault.stdout)).toMatchObject({ table: 'jobs', groups: [] });
      expect(fromNamed.stderr).toBe('');
      expect(fromNamed.code).toBe(0);
      expect(JSON.parse(fromNamed.stdout)).toEqual([]);
      expect(missing.code).toBe(2);
      expect(missing.stderr).toMatch(/purge needs --database URL, or the URL in the environment variable QUEUE_DATABASE, which is not set/);
    });

    it('stats --watch prints a snapshot per refresh until Ctrl-C, then exits 0', async () => {
      const table = jobsTable({ form: 'lease' });
      await createTable(stand, context.db, table);
      const child = spawn(
        process.execPath,
        ['--import', 'tsx', CLI, 'stats', '--database', context.db.url!, '--table', 'jobs', '--watch', '0.2', '--json'],
        { stdio: ['ignore', 'pipe', 'pipe'] },
      );
      const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
      let stdout = '';
      let stderr = '';
      child.stderr.on('data', (chunk: Buffer) => {
        stderr += chunk.toString();
      });
      const snapshots = await new Promise<InspectionJson[]>((resolve, reject) => {
        child.stdout.on('data', (chunk: Buffer) => {
          stdout += chunk.toString();
          const lines = stdout.split('\n').filter((line) => line.length > 0);
          if (lines.length >= 2 && stdout.endsWith('\n')) resolve(lines.map((line) => JSON.parse(line) as InspectionJson));
        });
        void exited.then(() => reject(new Error(`stats --watch exited before two snapshots: ${stderr}`)));
      });
      child.kill('SIGINT');
      expect(await exited).toBe(0);
      expect(snapshots.length).toBeGreaterThanOrEqual(2);
      for (const snapshot of snapshots) expect(snapshot).toMatchObject({ table: 'jobs', groups: [], deadLettered: 0 });
    });
  });
}
