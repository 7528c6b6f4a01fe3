import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { Broker, scheduleTestHooksOf } from '../broker/broker.js';
import { defineTable } from '../definition/define-table.js';
import { createDriver } from '../driver/create-driver.js';
import type { Driver } from '../driver/driver.js';
import { DeclarationError } from '../errors.js';
import { ManualClock } from '../internal/manual-clock.fixture.js';
import { SCHEDULED_AT_HEADER, type ScheduleOptions } from './schedule-options.js';

const table = defineTable({ table: 'jobs', id: 'id', group: 'queue', retryAfter: 'retry_after', attempt: 'attempt', lockedUntil: 'locked_until', headers: 'headers', payload: 'payload' });
const reports = table.queue('reports');
const MINUTE = 60_000;

const folder = mkdtempSync(join(tmpdir(), 'tablequeue-scheduler-'));
let files = 0;
const brokers: Broker[] = [];
const readers: Driver[] = [];
afterEach(async () => {
  await Promise.all(brokers.splice(0).map((broker) => broker.stop()));
  await Promise.all(readers.splice(0).map((reader) => reader.close()));
});
afterAll(() => rmSync(folder, { recursive: true, force: true }));

/**
 * A broker over a database file of its own, whose schedule runs on a clock the test moves, and a
 * second handle on the file that reads what it wrote.
 */
async function scheduledBroker(options: ScheduleOptions, onFile?: string) {
  const url = onFile ?? `sqlite:${join(folder, `schedules-${(files += 1)}.db`)}`;
  const reader = createDriver(url);
  readers.push(reader);
  await reader.open();
  if (onFile === undefined) {
    for (const sql of table.createTableSql('sqlite')) await reader.execute({ name: 'test.createTable', sql, values: [] });
  }
  const broker = new Broker({ database: url });
  brokers.push(broker);
  broker.schedule('report', reports, options);
  const hooks = scheduleTestHooksOf(broker);
  const clock = new ManualClock();
  // Just past the start of a minute: the clock runs on with the host's, and a run that took the
  // last second of a minute (a slow one, under load) crossed into the minute after the tick the
  // test expects, where the scheduler rightly fired the later tick.
  clock.advance(MINUTE - (clock.now().getTime() % MINUTE) + 100);
  hooks.clock = clock;
  hooks.committed.turnOn();
  hooks.sleeping.turnOn();
  const ticksWritten = async () =>
    (await reader.execute({ name: 'test.ticks', sql: 'SELECT headers FROM jobs ORDER BY id', values: [] })).rows.map(
      (row) => (JSON.parse(String(row['headers'])) as Record<string, string>)[SCHEDULED_AT_HEADER],
    );
  const scheduleRow = async () =>
    (await reader.execute({ name: 'test.schedule', sql: 'SELECT * FROM tablequeue_schedules', values: [] })).rows[0];
  const exec = (sql: string) => reader.execute({ name: 'test.exec', sql, values: [] });
  return { url, broker, hooks, clock, ticksWritten, scheduleRow, exec };
}

/** The minute tick at or before `ms`, as the header spells it. */
const minuteAt = (ms: number) => new Date(Math.floor(ms / MINUTE) * MINUTE).toISOString();

describe('the scheduler on a test clock', () => {
  it('registers a new schedule at its latest tick without firing it, then fires each tick as the clock reaches it', async () => {
    const { broker, hooks, clock, ticksWritten, scheduleRow } = await scheduledBroker({ cron: '* * * * *', payload: { report: 'usage' } });
    const startedMs = clock.now().getTime();
    await broker.start();
    await hooks.sleeping.next({ what: 'the loop asleep until the next minute' });
    expect(await ticksWritten()).toEqual([]);
    expect(await scheduleRow()).toMatchObject({ name: 'report', queue_table: 'jobs', queue_name: 'reports', cron: '* * * * *', time_zone: 'UTC', fired_count: 0, missed_count: 0 });
    expect(clock.timersSet).toBe(1);

    clock.advance(MINUTE);
    const first = await hooks.committed.next({ what: 'the first tick fired' });
    expect(first.plan.fire.map((tick) => tick.toISOString())).toEqual([minuteAt(startedMs + MINUTE)]);
    expect(await ticksWritten()).toEqual([minuteAt(startedMs + MINUTE)]);
    expect(broker.stats().schedules[0]).toMatchObject({ name: 'report', queue: 'jobs/reports', fired: 1, missed: 0, lastTickAt: minuteAt(startedMs + MINUTE) });
    expect(broker.metrics()).toContain('tablequeue_schedule_fires_total{schedule="report"} 1');
  });

  it("fires the ticks a paused process missed by the policy: 'all' writes each, oldest first", async () => {
    const { broker, hooks, clock, ticksWritten, scheduleRow } = await scheduledBroker({ cron: '* * * * *', missed: 'all' });
    const startedMs = clock.now().getTime();
    await broker.start();
    await hooks.sleeping.next();
    clock.advance(3 * MINUTE);
    await hooks.committed.next({ what: 'the three missed ticks fired together' });
    expect(await ticksWritten()).toEqual([1, 2, 3].map((minutes) => minuteAt(startedMs + minutes * MINUTE)));
    expect(await scheduleRow()).toMatchObject({ fired_count: 3, missed_count: 0, last_tick_at: minuteAt(startedMs + 3 * MINUTE).replace('Z', '+00:00') });
  });

  it("'skip' fires only the latest missed tick within the grace and counts the rest", async () => {
    const { broker, hooks, clock, ticksWritten, scheduleRow } = await scheduledBroker({ cron: '* * * * *' });
    const startedMs = clock.now().getTime();
    await broker.start();
    await hooks.sleeping.next();
    clock.advance(3 * MINUTE);
    await hooks.committed.next();
    expect(await ticksWritten()).toEqual([minuteAt(startedMs + 3 * MINUTE)]);
    expect(await scheduleRow()).toMatchObject({ fired_count: 1, missed_count: 2 });
    expect(broker.metrics()).toContain('tablequeue_schedule_missed_total{schedule="report"} 2');
  });

  it('a failed firing is reported and tried again after a backoff, and its tick still fires', async () => {
    const { broker, hooks, clock, ticksWritten, exec } = await scheduledBroker({ cron: '* * * * *' });
    const errors: Record<string, unknown>[] = [];
    broker.on('error', (_error, detail) => errors.push(detail));
    const startedMs = clock.now().getTime();
    await broker.start();
    await hooks.sleeping.next();
    // The table out of reach stands in for a database that does not answer.
    await exec('ALTER TABLE tablequeue_schedules RENAME TO parked_schedules');
    hooks.sleeping.clear();
    clock.advance(MINUTE);
    const retryInMs = await hooks.sleeping.next({ what: 'the loop asleep until the retry' });
    expect(errors).toEqual([{ schedule: 'report', phase: 'schedule', retryInMs: 1_000 }]);
    expect(retryInMs).toBeGreaterThan(900);
    expect(retryInMs).toBeLessThanOrEqual(1_000);
    await exec('ALTER TABLE parked_schedules RENAME TO tablequeue_schedules');
    clock.advance(1_000);
    await hooks.committed.next({ what: 'the tick fired on the retry' });
    expect(await ticksWritten()).toEqual([minuteAt(startedMs + MINUTE)]);
  });

  it('a changed definition takes over from its next tick; a broker still on the old one fires nothing and warns once', async () => {
    const old = await scheduledBroker({ cron: '* * * * *' });
    const warnings: string[] = [];
    old.broker.on('warning', (message) => warnings.push(message));
    await old.broker.start();
    await old.hooks.sleeping.next();
    const newer = await scheduledBroker({ cron: '0 * * * *' }, old.url);
    await newer.broker.start();
    await newer.hooks.sleeping.next();
    expect(await newer.scheduleRow()).toMatchObject({ cron: '0 * * * *', last_tick_at: new Date(Math.floor(newer.clock.now().getTime() / 3_600_000) * 3_600_000).toISOString().replace('Z', '+00:00') });

    for (const minutes of [1, 2]) {
      old.hooks.sleeping.clear();
      old.clock.advance(MINUTE);
      await old.hooks.sleeping.next({ what: `the old broker's wake ${minutes}` });
    }
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/^schedule "report": the schedules table holds cron "0 \* \* \* \*", declared by another broker since this one started; this broker fires none of its ticks/);
    expect(await old.ticksWritten()).toEqual([]);

    const hourMs = Math.floor(newer.clock.now().getTime() / 3_600_000) * 3_600_000 + 3_600_000;
    newer.clock.advance(hourMs - newer.clock.now().getTime() + 10);
    await newer.hooks.committed.next({ what: 'the hourly tick of the new definition' });
    expect(await newer.ticksWritten()).toEqual([new Date(hourMs).toISOString()]);
  });

  it('stop() ends the timer: a stopped broker fires nothing more', async () => {
    const { broker, hooks, clock, ticksWritten } = await scheduledBroker({ cron: '* * * * *' });
    await broker.start();
    await hooks.sleeping.next();
    await broker.stop();
    expect(clock.timersSet).toBe(0);
    clock.advance(MINUTE);
    expect(await ticksWritten()).toEqual([]);
  });
});

describe('broker.schedule', () => {
  it('refuses a second schedule of one name, a declaration after start, and what is not a queue', async () => {
    const broker = new Broker({ database: 'sqlite::memory:' });
    brokers.push(broker);
    broker.schedule('report', reports, { cron: '@daily' });
    expect(() => broker.schedule('report', reports, { cron: '@hourly' })).toThrow('schedule "report" is already declared on this broker');
    expect(() => broker.schedule('other', {} as typeof reports, { cron: '@hourly' })).toThrow(DeclarationError);
    await broker.stop();
    expect(() => broker.schedule('late', reports, { cron: '@hourly' })).toThrow('declare schedules before broker.start()');
  });
});
