import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Broker } from '../broker/broker.js';
import { defineTable } from '../definition/define-table.js';
import { runCliHere } from './run-cli.fixture.js';

const folder = mkdtempSync(join(tmpdir(), 'tablequeue-schedules-cli-'));
afterAll(() => rmSync(folder, { recursive: true, force: true }));
let files = 0;
const newDatabase = () => `sqlite:${join(folder, `schedules-${(files += 1)}.db`)}`;

const table = defineTable({ table: 'jobs', id: 'id', group: 'queue', retryAfter: 'retry_after', attempt: 'attempt', lockedUntil: 'locked_until', headers: 'headers', payload: 'payload' });

describe('tablequeue init --schedules', () => {
  it('prints the schedules table for the URL scheme, under the name asked for', async () => {
    const printed = await runCliHere(['init', '--database', 'mariadb://localhost/app', '--schedules', '--schedules-table', 'ops.schedules', '--print']);
    expect(printed.code).toBe(0);
    expect(printed.stdout).toMatch(/^CREATE TABLE IF NOT EXISTS `ops`.`schedules` \(\n {2}`name` varchar\(200\) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL PRIMARY KEY,/);
    expect(printed.stdout).toMatch(/`updated_at` datetime\(6\) NOT NULL\n\);\n$/);
  });

  it('creates it, twice without harm, and refuses the queue table flags beside --schedules', async () => {
    const database = newDatabase();
    const [first, second] = [await runCliHere(['init', '--database', database, '--schedules']), await runCliHere(['init', '--database', database, '--schedules'])];
    expect(first).toEqual({ code: 0, stdout: 'created tablequeue_schedules if it did not exist\n', stderr: '' });
    expect(second.code).toBe(0);
    const listed = await runCliHere(['schedules', '--database', database]);
    expect(listed.stdout).toBe('tablequeue_schedules  0 schedules\n(none declared yet)\n');

    const mixed = await runCliHere(['init', '--database', database, '--schedules', '--lease']);
    expect(mixed.code).toBe(2);
    expect(mixed.stderr).toMatch(/--schedules creates the schedules table only; drop --lease/);
    const alone = await runCliHere(['init', '--database', database, '--table', 'jobs', '--schedules-table', 'x']);
    expect(alone.code).toBe(2);
  });
});

describe('tablequeue schedules', () => {
  it('lists each schedule with its queue, cron, zone, last and next tick and counts, as text and JSON', async () => {
    const database = newDatabase();
    expect((await runCliHere(['init', '--database', database, '--table', 'jobs', '--lease'])).code).toBe(0);
    const broker = new Broker({ database });
    broker.schedule('nightly-report', table.queue('reports'), { cron: '30 2 * * *', timezone: 'America/New_York' });
    await broker.start();
    await broker.stop();

    const json = await runCliHere(['schedules', '--database', database, '--json']);
    expect(json.code).toBe(0);
    const [listed] = JSON.parse(json.stdout) as Record<string, unknown>[];
    expect(listed).toMatchObject({
      name: 'nightly-report',
      queue: 'jobs/reports',
      cron: '30 2 * * *',
      timeZone: 'America/New_York',
      firedCount: 0,
      missedCount: 0,
    });
    // Registered at its latest tick, which it never fires; the next is a day on, 02:30 New York time.
    const lastTickMs = Date.parse(String(listed!['lastTickAt']));
    expect(Date.parse(String(listed!['nextTickAt'])) - lastTickMs).toBeGreaterThanOrEqual(23 * 3_600_000);
    expect(new Date(lastTickMs).toLocaleTimeString('en-US', { timeZone: 'America/New_York', hour12: false })).toBe('02:30:00');

    const text = await runCliHere(['schedules', '--database', database]);
    const lines = text.stdout.trimEnd().split('\n');
    expect(lines[0]).toBe('tablequeue_schedules  1 schedule');
    expect(lines[1]).toMatch(/^name\s+queue\s+cron\s+zone\s+last tick\s+next tick\s+fired\s+missed\s+declared$/);
    expect(lines[2]).toContain(`nightly-report  jobs/reports  30 2 * * *  America/New_York  ${String(listed!['lastTickAt'])}  ${String(listed!['nextTickAt'])}`);
  });

  it('answers --help', async () => {
    const help = await runCliHere(['schedules', '--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/^usage: tablequeue schedules --database URL/);
  });

  it('fails with exit code 1 and says how to create a missing table', async () => {
    const result = await runCliHere(['schedules', '--database', newDatabase(), '--schedules-table', 'nowhere']);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/schedules table "nowhere" cannot be read .*; start a broker with a schedule, or run tablequeue init --schedules, to create it/);
  });
});
