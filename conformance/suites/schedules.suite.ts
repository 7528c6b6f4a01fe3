import { describe, expect, it } from 'vitest';
import { scheduleTestHooksOf } from '../../src/broker/broker.js';
import { runCliHere } from '../../src/cli/run-cli.fixture.js';
import type { SchedulesBody } from '../../src/dashboard/dashboard-api.js';
import { openDashboard } from '../../src/dashboard/dashboard.js';
import { decodeHeaders } from '../../src/delivery/codec.js';
import { createScheduleStatements, parseSchedulesTable } from '../../src/dialect/schedule-statements.js';
import { bindStatement } from '../../src/statement.js';
import { untilSignalled } from '../../src/internal/test-signal.js';
import { SCHEDULED_AT_HEADER, type Broker } from '../../src/index.js';
import { countRows, createBroker, createTable, jobsDeclaration, jobsTable, waitForDatabase } from '../fixtures.js';
import { spawnScheduleReplica, type SpawnedScheduleReplica } from '../processes/spawn-schedule-replica.js';
import type { SuiteContext } from '../run-conformance.js';
import type { TestDatabase } from '../stand.js';

const EVERY_SECOND = '* * * * * *';

/** The scheduled-at header of every message in the queue table, in time order. */
async function scheduledAts(db: TestDatabase): Promise<string[]> {
  const rows = await db.query<{ headers: unknown }>('SELECT headers FROM jobs');
  return rows.map((row) => decodeHeaders(row.headers)[SCHEDULED_AT_HEADER]!).sort();
}

/** The gaps between consecutive ticks of a one-second schedule, in milliseconds: all 1,000 when none is missing. */
function gapsMs(ticks: readonly string[]): number[] {
  return ticks.slice(1).map((tick, index) => Date.parse(tick) - Date.parse(ticks[index]!));
}

async function scheduleRow(db: TestDatabase): Promise<{ fired: number; missed: number }> {
  const [row] = await db.query<{ fired_count: unknown; missed_count: unknown }>('SELECT fired_count, missed_count FROM tablequeue_schedules');
  return { fired: Number(row!.fired_count), missed: Number(row!.missed_count) };
}

/**
 * Polls the server's view of sessions waiting on locks until `query` counts one. InnoDB refreshes
 * INNODB_TRX only when it was not read for 0.1 s, so the polls are further apart than
 * waitForDatabase's, which would read the same stale rows forever.
 */
async function untilWaiting(db: TestDatabase, query: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (Number((await db.query<{ n: unknown }>(query))[0]?.n) === 0) {
    if (Date.now() > deadline) throw new Error('timed out after 10000 ms waiting for the second advance to wait on the row lock');
    await new Promise((resolve) => setTimeout(resolve, 150));
  }
}

/** Recurring schedules: each tick's message written exactly once, however many replicas declare it. */
export function schedulesSuite(context: SuiteContext): void {
  const { stand } = context;

  describe('schedules', () => {
    it('two brokers on one schedule of every second write each tick once', async () => {
      const table = jobsTable({ form: 'lease' });
      await createTable(stand, context.db, table);
      const brokers: Broker[] = [createBroker(context.db, context.brokers), createBroker(context.db, context.brokers)];
      for (const broker of brokers) broker.schedule('every-second', table.queue('ticks'), { cron: EVERY_SECOND, payload: { job: 'sweep' } });
      const hooks = brokers.map((broker) => scheduleTestHooksOf(broker));
      const fired = () => brokers.reduce((sum, broker) => sum + broker.stats().schedules[0]!.fired, 0);
      await Promise.all(brokers.map((broker) => broker.start()));
      await untilSignalled(
        hooks.map((hook) => hook.committed),
        () => fired() >= 3,
        'three ticks fired by the two brokers',
        10_000,
      );
      await Promise.all(brokers.map((broker) => broker.stop()));

      const ticks = await scheduledAts(context.db);
      expect(ticks).toHaveLength(fired());
      expect(new Set(ticks).size).toBe(ticks.length);
      expect(gapsMs(ticks).every((gap) => gap === 1_000)).toBe(true);
      expect(await scheduleRow(context.db)).toEqual({ fired: ticks.length, missed: 0 });
      const [payload] = await context.db.query<{ payload: unknown }>('SELECT payload FROM jobs');
      expect(JSON.parse(Buffer.from(payload!.payload as Uint8Array).toString())).toEqual({ job: 'sweep' });
    });

    it('the dashboard and tablequeue schedules show what the schedules table holds', async () => {
      const table = jobsTable({ form: 'lease' });
      await createTable(stand, context.db, table);
      const broker = createBroker(context.db, context.brokers, { schedulesTable: 'tq_schedules' });
      broker.schedule('every-second', table.queue('ticks'), { cron: EVERY_SECOND });
      broker.schedule('nightly', table.queue('reports'), { cron: '0 3 * * *', timezone: 'Europe/Berlin' });
      const committed = scheduleTestHooksOf(broker).committed;
      await broker.start();
      const { plan } = await committed.next({ what: 'a tick fired', matches: (value) => value.schedule === 'every-second' });
      await broker.stop();

      const driver = await context.db.openDriver({ poolSize: 4 });
      const open = (schedulesTable: string) => openDashboard({ database: driver, tables: ['jobs'], schedulesTable, port: 0, refreshMs: 600_000 });
      const [dashboard, withoutTable] = [await open('tq_schedules'), await open('no_such_schedules')];
      try {
        const schedulesOf = async (url: string) => (await (await fetch(`${url}api/schedules`)).json()) as SchedulesBody;
        const shown = await schedulesOf(dashboard.url);
        expect(shown.problem).toBeNull();
        expect(shown.schedules.map((schedule) => schedule.name)).toEqual(['every-second', 'nightly']);
        expect(shown.schedules[0]).toMatchObject({ queue: 'jobs/ticks', cron: EVERY_SECOND, timeZone: 'UTC', missedCount: 0 });
        // The first tick fired, or one fired after it before the broker stopped.
        expect(Date.parse(shown.schedules[0]!.lastTickAt!)).toBeGreaterThanOrEqual(plan.advanceTo.getTime());
        expect(shown.schedules[0]!.firedCount).toBeGreaterThanOrEqual(1);
        expect(shown.schedules[1]).toMatchObject({ queue: 'jobs/reports', cron: '0 3 * * *', timeZone: 'Europe/Berlin', firedCount: 0 });
        expect(Date.parse(shown.schedules[1]!.nextTickAt!)).toBeGreaterThan(Date.now());
        expect((await schedulesOf(withoutTable.url)).problem).toMatch(/^schedules table "no_such_schedules" cannot be read/);
      } finally {
        await dashboard.close();
        await withoutTable.close();
        await driver.close();
      }
      if (context.db.url === undefined) return;
      const listed = await runCliHere(['schedules', '--database', context.db.url, '--schedules-table', 'tq_schedules', '--json']);
      expect(listed.code).toBe(0);
      expect((JSON.parse(listed.stdout) as { name: string }[]).map((schedule) => schedule.name)).toEqual(['every-second', 'nightly']);
    });

    it.skipIf(!stand.capabilities.supportsRowLock)(
      'the guard: of two transactions advancing one schedule from the tick they read, the second waits for the first and changes nothing',
      async () => {
        const statements = createScheduleStatements(stand.ddlDialect);
        const schedules = parseSchedulesTable('tablequeue_schedules', stand.ddlDialect);
        const driver = await context.db.openDriver({ poolSize: 2 });
        const [seen, tick] = [new Date('2026-03-08T06:59:00.000Z'), new Date('2026-03-08T07:00:00.000Z')];
        const definition = {
          'column:name': 'nightly',
          'column:queue_table': 'jobs',
          'column:queue_name': 'reports',
          'column:cron': '0 * * * *',
          'column:time_zone': 'UTC',
        };
        const advance = bindStatement(statements.advance(schedules), {
          ...definition,
          'column:last_tick_at': tick,
          'column:seen_last_tick_at': seen,
          'column:fired_count': 1,
          'column:missed_count': 0,
        });
        const plain = (sql: string) => ({ name: 'test.session', sql, values: [] });
        await driver.execute(plain(statements.createTable(schedules)));
        await driver.execute(bindStatement(statements.register(schedules), { ...definition, 'column:last_tick_at': seen }));
        const [first, second] = [await driver.acquire(), await driver.acquire()];
        try {
          await first.execute(plain('START TRANSACTION'));
          expect((await first.execute(advance)).affectedRows).toBe(1);
          await second.execute(plain('START TRANSACTION'));
          const secondAdvance = second.execute(advance);
          // The second session's wait shows only in the server's own views.
          const waiting =
            stand.kind === 'postgres'
              ? 'SELECT COUNT(*) AS n FROM pg_locks WHERE NOT granted'
              : "SELECT COUNT(*) AS n FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT'";
          await untilWaiting(context.db, waiting);
          await first.execute(plain('COMMIT'));
          expect((await secondAdvance).affectedRows).toBe(0);
          await second.execute(plain('ROLLBACK'));
        } finally {
          first.release();
          second.release();
        }
        const [row] = await context.db.query<{ fired_count: unknown; last_tick_at: unknown }>('SELECT fired_count, last_tick_at FROM tablequeue_schedules');
        expect(Number(row!.fired_count)).toBe(1);
        expect(new Date(row!.last_tick_at as Date).toISOString()).toBe(tick.toISOString());
        await driver.close();
      },
    );

    describe.skipIf(!stand.capabilities.supportsProcesses)('across processes', () => {
      it(
        'three replica processes, two SIGKILLed between ticks and one restarted, write each tick once and none is lost',
        async () => {
          const table = jobsTable({ form: 'lease' });
          await createTable(stand, context.db, table);
          const config = {
            database: context.db.url,
            table: jobsDeclaration({ form: 'lease' }),
            queue: 'ticks',
            schedule: 'every-second',
            // 'all' fires a tick that passed during a kill late rather than counting it missed, so a gap can only be a lost tick.
            options: { cron: EVERY_SECOND, missed: 'all' },
          };
          const replicas: SpawnedScheduleReplica[] = [spawnScheduleReplica(config), spawnScheduleReplica(config), spawnScheduleReplica(config)];
          await Promise.all(replicas.map((replica) => replica.ready));
          // The replicas run in processes of their own: their ticks show only in the database.
          const untilMessages = async (count: number) =>
            waitForDatabase(async () => (await countRows(context.db, 'jobs')) >= count, 10_000, `${count} scheduled messages`);
          await untilMessages(2);
          replicas[0]!.child.kill('SIGKILL');
          await replicas[0]!.exited;
          await untilMessages(4);
          replicas[1]!.child.kill('SIGKILL');
          await replicas[1]!.exited;
          await untilMessages(6);
          const restarted = spawnScheduleReplica(config);
          replicas.push(restarted);
          await restarted.ready;
          await untilMessages((await countRows(context.db, 'jobs')) + 2);
          const running = [replicas[2]!, restarted];
          for (const replica of running) replica.child.kill('SIGTERM');
          await Promise.all(running.map((replica) => replica.exited));

          const ticks = await scheduledAts(context.db);
          expect(new Set(ticks).size).toBe(ticks.length);
          expect(gapsMs(ticks).filter((gap) => gap !== 1_000)).toEqual([]);
          expect(await scheduleRow(context.db)).toEqual({ fired: ticks.length, missed: 0 });
          // Each tick reported by at most one replica (a killed one may have committed a tick it never printed).
          const reported = replicas.flatMap((replica) => replica.fired);
          expect(new Set(reported).size).toBe(reported.length);
          expect(reported.every((tick) => ticks.includes(tick))).toBe(true);
        },
        40_000,
      );
    });
  });
}
