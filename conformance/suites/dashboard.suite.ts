import { Agent, request } from 'node:http';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { LAST_ERROR_HEADER } from '../../src/admin/open-queue-inspector.js';
import type { DeadLettersBody } from '../../src/dashboard/dashboard-api.js';
import { openDashboard } from '../../src/dashboard/dashboard.js';
import type { Connection, Driver } from '../../src/driver/driver.js';
import { createDeferred } from '../../src/internal/deferred.js';
import { Broker, defineOutbox, DestinationError, type OutboxDestination, type QueueTable } from '../../src/index.js';
import type { Dialog } from 'playwright-core';
import { Collector, countRows, createBroker, createTable, jobsTable, placeholder, untilStats, waitForDatabase } from '../fixtures.js';
import { describeWhenLive } from '../require-live.js';
import type { SuiteContext } from '../run-conformance.js';
import type { TestDatabase } from '../stand.js';
import {
  chromiumPath,
  isChromiumInstalled,
  launchBrowser,
  startDashboardProcess,
  type BrowserSession,
  type DashboardProcess,
} from './dashboard-harness.js';

/** The browser's document, as much of it as the conditions below read; the project's types have no DOM. */
declare const document: { querySelector(selector: string): { getAttribute(name: string): string | null } | null };

const HEARTBEAT_TABLE = 'tq_brokers';
/** A name the dashboard with actions is told to answer, as one behind a proxy would be. */
const ALLOWED_HOST = 'dashboard.example';
const REFRESH_MS = '200';
const BULK_ROWS = 400;

/**
 * `tablequeue dashboard` end to end: the command in a process of its own, the page in headless
 * Chromium, rows written by one broker of this process (which also drains and beats). The
 * tests share one database, one browser and one broker, but each begins from the same rows, so
 * any of them runs alone or in any order.
 */
export function dashboardSuite(context: SuiteContext): void {
  const { stand } = context;
  dashboardReadsSuite(context);
  // The dashboard reads the database from a process of its own.
  if (!stand.capabilities.supportsProcesses) return;
  const missingBrowser = isChromiumInstalled()
    ? undefined
    : `Chromium is not at ${chromiumPath()}; install Debian's chromium or set CHROMIUM_PATH`;
  describeWhenLive('dashboard', missingBrowser, () => {
    const table: QueueTable = jobsTable({ form: 'lease' });
    const gate = createDeferred();
    let db: TestDatabase;
    let driver: Driver;
    let broker: Broker;
    let browser: BrowserSession;
    let readOnly: DashboardProcess;
    let withActions: DashboardProcess;
    /** The dead letters every test begins with (see `beforeEach`). */
    let deadIds: string[];
    const commonFlags = () => ['--database', db.url!, '--dead-letter-group', 'dead', '--refresh-ms', REFRESH_MS];

    // The browser, the two dashboard processes and the beating broker take seconds to start, so
    // the tests share them; each test starts from the same rows (beforeEach), and a test that
    // stops a process or needs a history of its own starts its own.
    beforeAll(async () => {
      db = await stand.createDatabase();
      await createTable(stand, db, table);
      driver = await db.openDriver({ poolSize: 2 });
      broker = beatingBroker(db, HEARTBEAT_TABLE);
      // Reads the table but never "emails", whose ready rows are therefore unread.
      broker.subscribe(table.queue('bulk'), () => gate.promise, { workers: 4, concurrency: { global: 3 } });
      await broker.start();
      const flags = [...commonFlags(), '--table', 'jobs', '--heartbeat-table', HEARTBEAT_TABLE];
      [browser, readOnly, withActions] = await Promise.all([
        launchBrowser(),
        startDashboardProcess(flags),
        startDashboardProcess([...flags, '--allow-actions', '--allowed-host', ALLOWED_HOST]),
      ]);
    });

    afterAll(async () => {
      gate.resolve();
      await Promise.allSettled([browser?.close(), readOnly?.stop(), withActions?.stop(), broker?.stop()]);
      await driver?.close();
      await db?.drop();
    });

    /**
     * Every test begins with the same rows in "emails": three ready, one held by a live lease (as
     * a broker of another process would hold it), two delayed by an hour; and two dead letters
     * whose last errors hold markup. Both dashboards have sampled them before the test begins.
     */
    beforeEach(async () => {
      await db.exec('DELETE FROM jobs');
      const emails = table.queue('emails');
      const ids = await Promise.all([1, 2, 3, 4].map((n) => broker.publish(emails, { n })));
      await broker.publish(emails, { n: 5 }, { delayMs: 3_600_000 });
      await broker.publish(emails, { n: 6 }, { delayMs: 3_600_000 });
      const leaseSql = `UPDATE jobs SET locked_until = ${placeholder(stand, 1)} WHERE id = ${placeholder(stand, 2)}`;
      await driver.execute({ name: 'test.lease', sql: leaseSql, values: [new Date(Date.now() + 3_600_000), ids[0]] });
      deadIds = [];
      for (const n of [1, 2]) {
        const headers = { [LAST_ERROR_HEADER]: `smtp refused <${n}>` };
        deadIds.push(await broker.publish(table.queue('dead'), { n, to: '<b>ops</b>' }, { headers }));
      }
      // The dashboards sample in processes of their own: ask each until its latest round (which
      // reads counts and dead letters together) lists these dead letters.
      const expected = JSON.stringify([...deadIds].sort());
      for (const dashboard of [readOnly, withActions]) {
        await waitForDatabase(
          async () => JSON.stringify(deadLetterIdsOf((await sendRaw(`${dashboard.url}api/dead-letters`)).body).sort()) === expected,
          10_000,
          'the dashboard to sample the rows',
        );
      }
    });

    it('lists a queue with its ready, delayed, in-work and dead counts', async () => {
      const { page } = browser;
      await page.goto(readOnly.url);
      const row = '[data-table="jobs"] tr[data-queue="emails"]';
      await waitForText(page, `${row} [data-count="ready"]`, '3');
      await waitForText(page, `${row} [data-count="delayed"]`, '2');
      await waitForText(page, `${row} [data-count="inWork"]`, '1');
      await waitForText(page, '[data-table="jobs"] [data-dead-count]', 'dead letters 2');
      // The broker reads only "bulk": nothing reads the ready rows of "emails".
      await page.locator(`${row} [data-unread]`).waitFor();
      // The dead-letter group is a place, not a queue.
      expect(await page.locator('[data-table="jobs"] tr[data-queue="dead"]').count()).toBe(0);
      // "bulk" is read under a concurrency limit, and the table was made without the in-work index.
      const advice = await page.locator('[data-table="jobs"] [data-unindexed]').textContent();
      expect(advice).toContain('No in-work index: bulk (a concurrency limit) counts the rows in work on every claim');
      expect(advice).toContain(table.createTableSql(stand.ddlDialect, { inWorkIndex: true }).at(-1)!);
      // Text from the database is shown as text: the markup in it never becomes elements.
      await waitForText(page, '[data-dead-table="jobs"] tr[data-dead-id] [data-last-error]', 'smtp refused <1>');
      expect(await page.locator('[data-dead-table="jobs"] b').count()).toBe(0);
    });

    it('refuses a requeue without --allow-actions, and its page offers none', async () => {
      const { page } = browser;
      await page.goto(readOnly.url);
      await page.locator('[data-dead-table="jobs"] tr[data-dead-id]').nth(1).waitFor();
      const buttons = page.locator('button[data-action="requeue"], button[data-action="requeue-all"]');
      expect(await buttons.count()).toBe(3);
      for (const button of await buttons.all()) expect(await button.isDisabled()).toBe(true);

      const answer = await fetch(`${readOnly.url}api/requeue`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ table: 'jobs', toGroup: 'emails' }),
      });
      expect(answer.status).toBe(403);
      expect(((await answer.json()) as { error: string }).error).toMatch(/--allow-actions/);
      expect(await countRows(db, 'jobs', "queue = 'dead'")).toBe(2);
    });

    it('refuses a request addressed to a name not on its list (DNS rebinding), for reads and actions alike', async () => {
      const port = new URL(withActions.url).port;
      const attacker = `rebind.attacker.example:${port}`;
      const requeueBody = JSON.stringify({ table: 'jobs', toGroup: 'emails' });
      const asAttacker = { host: attacker, origin: `http://${attacker}` };
      const [read, action] = await Promise.all([
        sendRaw(`${withActions.url}api/dead-letters`, { headers: asAttacker }),
        sendRaw(`${withActions.url}api/requeue`, { method: 'POST', headers: { ...asAttacker, 'content-type': 'application/json' }, body: requeueBody }),
      ]);
      expect(read.status).toBe(421);
      expect(read.body).not.toContain('smtp refused');
      expect(action.status).toBe(421);
      expect(await countRows(db, 'jobs', "queue = 'dead'")).toBe(2);

      const asAllowed = { host: `${ALLOWED_HOST}:${port}`, origin: `http://${ALLOWED_HOST}:${port}` };
      const allowedRead = await sendRaw(`${withActions.url}api/dead-letters`, { headers: asAllowed });
      expect(allowedRead.status).toBe(200);
      expect(allowedRead.body).toContain('smtp refused');
    });

    it('moves a dead letter back to its queue with --allow-actions', async () => {
      const { page } = browser;
      await page.goto(withActions.url);
      const card = '[data-dead-table="jobs"]';
      await page.locator(`${card} tr[data-dead-id]`).nth(1).waitFor();
      // Rows in a dead-letter group no longer say where they came from: the page names no queue for them.
      expect(await page.locator(`${card} input`).inputValue()).toBe('');
      await page.locator(`${card} tr[data-dead-id] button[data-action="requeue"]`).first().click();
      await waitForText(page, '.notice', 'name the queue to move the dead letters into');
      expect(await countRows(db, 'jobs', "queue = 'dead'")).toBe(2);
      await page.locator(`${card} input`).fill('emails');
      await page.locator(`${card} tr[data-dead-id] button[data-action="requeue"]`).first().click();

      await waitForText(page, '[data-table="jobs"] [data-dead-count]', 'dead letters 1');
      await waitForText(page, '[data-table="jobs"] tr[data-queue="emails"] [data-count="ready"]', '4');
      expect(await countRows(db, 'jobs', "queue = 'dead'")).toBe(1);
      expect(await countRows(db, 'jobs', "queue = 'emails'")).toBe(7);
    });

    it('keeps its buttons through refreshes that change nothing, so a click is never lost to a redraw', async () => {
      const { page } = browser;
      await page.goto(withActions.url);
      const card = '[data-dead-table="jobs"]';
      await page.locator(`${card} tr[data-dead-id]`).nth(1).waitFor();
      const button = await page.locator(`${card} tr[data-dead-id] button[data-action="requeue"]`).first().elementHandle();
      // Two more reads of the dead letters, each drawn (or not) before the next one begins.
      for (const _read of [1, 2]) await page.waitForResponse((response) => response.url().endsWith('/api/dead-letters'));
      await page.locator('#status[data-state="live"]').waitFor();
      expect(await button!.evaluate((node) => node.isConnected)).toBe(true);
    });

    it('leaves the dead-letter card alone while the operator types in it, and draws what changed once they leave it', async () => {
      const { page } = browser;
      await page.goto(withActions.url);
      const card = '[data-dead-table="jobs"]';
      await page.locator(`${card} tr[data-dead-id]`).nth(1).waitFor();
      await page.locator(`${card} input`).focus();
      await db.exec(`DELETE FROM jobs WHERE id = ${Number(deadIds[0])}`);
      for (const _read of [1, 2]) await page.waitForResponse((response) => response.url().endsWith('/api/dead-letters'));
      expect(await page.locator(`${card} tr[data-dead-id]`).count()).toBe(2);
      await page.locator('h1').click();
      await page.locator(`${card} tr[data-dead-id]`).nth(1).waitFor({ state: 'detached' });
      expect(await page.locator(`${card} tr[data-dead-id]`).count()).toBe(1);
    });

    it('pauses and resumes a queue from the page with --allow-actions; the read-only page offers no control', async () => {
      const { page } = browser;
      const row = '[data-table="jobs"] tr[data-queue="emails"]';
      await page.goto(readOnly.url);
      await page.locator(row).waitFor();
      expect(await page.locator('button[data-action="pause"], button[data-action="resume"]').count()).toBe(0);

      await page.goto(withActions.url);
      await page.locator(`${row} button[data-action="pause"]`).click();
      await page.locator(`${row} [data-paused]`).waitFor();
      expect(await broker.isPaused(table.queue('emails'))).toBe(true);
      await page.locator(`${row} button[data-action="resume"]`).click();
      await page.locator(`${row} button[data-action="pause"]`).waitFor();
      expect(await page.locator(`${row} [data-paused]`).count()).toBe(0);
      expect(await broker.isPaused(table.queue('emails'))).toBe(false);
    });

    it('asks before "requeue all", stating how many dead letters would move', async () => {
      const { page } = browser;
      await page.goto(withActions.url);
      const card = '[data-dead-table="jobs"]';
      await page.locator(`${card} tr[data-dead-id]`).nth(1).waitFor();
      await page.locator(`${card} input`).fill('emails');
      const questions = new Collector<string>();
      let answer = false;
      const onDialog = (dialog: Dialog) => {
        questions.push(dialog.message());
        void (answer ? dialog.accept() : dialog.dismiss());
      };
      page.on('dialog', onDialog);
      try {
        await page.locator(`${card} button[data-action="requeue-all"]`).click();
        await questions.waitFor(1, 10_000);
        expect(questions.items).toEqual(['Move all 2 dead letters of jobs to queue "emails"?']);
        expect(await countRows(db, 'jobs', "queue = 'dead'")).toBe(2);

        answer = true;
        await page.locator(`${card} button[data-action="requeue-all"]`).click();
        await waitForText(page, '[data-table="jobs"] [data-dead-count]', 'dead letters 0');
        expect(questions.items).toHaveLength(2);
        expect(await countRows(db, 'jobs', "queue = 'dead'")).toBe(0);
        expect(await countRows(db, 'jobs', "queue = 'emails'")).toBe(8);
      } finally {
        page.off('dialog', onDialog);
      }
    });

    it('lists the brokers that beat, with their subscriptions and the limits they declare', async () => {
      const { page } = browser;
      await page.goto(readOnly.url);
      const subscription = page.locator('#brokers tr[data-broker] li[data-subscription="jobs/bulk"]');
      await subscription.waitFor();
      expect(await page.locator('#brokers tr[data-broker]').count()).toBe(1);
      expect(await subscription.textContent()).toContain('at most 3 in work');
    });

    it('lists the outbox relays a broker runs, with the names they wait to send again and the last error', async () => {
      const outbox = defineOutbox({ table: 'relayed_outbox', id: 'id', name: 'name', payload: 'payload', processedAt: 'processed_at', lockedUntil: 'locked_until' });
      for (const sql of outbox.createTableSql(stand.ddlDialect)) await db.exec(sql);
      const relaying = beatingBroker(db, 'tq_relaying_brokers');
      const failedSends = new Collector<unknown>();
      relaying.on('error', (error, detail) => {
        if (detail['phase'] === 'send') failedSends.push(error);
      });
      const unreachable: OutboxDestination = {
        description: 'billing webhook',
        open: () => Promise.resolve(),
        close: () => Promise.resolve(),
        send: () => Promise.reject(new DestinationError({ destination: 'billing webhook', message: 'HTTP 503 <from billing>' })),
      };
      relaying.relay(outbox, unreachable, { retryBackoff: { initialMs: 600_000, maxMs: 600_000 } });
      await relaying.start();
      // The outbox's records per name beside the queues: its group column has a name of its own.
      const tables = ['--table', 'jobs', '--table', 'relayed_outbox', '--column', 'relayed_outbox:group=name'];
      const dashboard = await startDashboardProcess([...commonFlags(), ...tables, '--heartbeat-table', 'tq_relaying_brokers']);
      try {
        const insert = `INSERT INTO relayed_outbox (name, payload) VALUES ('invoices', ${placeholder(stand, 1)})`;
        await driver.execute({ name: 'test.outbox', sql: insert, values: [Buffer.from('{"n":1}')] });
        await failedSends.waitFor(1);
        const { page } = browser;
        await page.goto(dashboard.url);
        const waiting = page.locator('#brokers li[data-relay="relayed_outbox"] li[data-waiting-name="invoices"]');
        await waiting.waitFor();
        const relayText = await page.locator('#brokers li[data-relay="relayed_outbox"]').textContent();
        expect(relayText).toContain('→ billing webhook');
        expect(relayText).toContain('1 waiting to retry');
        expect(await waiting.textContent()).toMatch(/1 failed send in a row · again in \d+ min/);
        // The error is shown as text: its markup is not the page's.
        expect(await waiting.locator('.error').textContent()).toBe('DestinationError: HTTP 503 <from billing>');
        // Its record, in work while it waits out the backoff, under the outbox's card; the queues' card reads "queue" still.
        await page.locator('[data-table="relayed_outbox"] tr[data-queue="invoices"]').waitFor();
        await page.locator('[data-table="jobs"] tr[data-queue="emails"]').waitFor();
      } finally {
        await Promise.allSettled([dashboard.stop(), relaying.stop()]);
      }
    });

    it('updates the throughput chart while a broker drains', async () => {
      // A history of its own: a table, a broker and a dashboard that have seen nothing else drain.
      const drainTable = jobsTable({ form: 'lease', name: 'drain_jobs' });
      await createTable(stand, db, drainTable);
      const drained = createDeferred();
      const drainer = beatingBroker(db, 'tq_drain_brokers');
      drainer.subscribe(drainTable.queue('bulk'), () => drained.promise, { workers: 4 });
      await drainer.start();
      const dashboard = await startDashboardProcess([...commonFlags(), '--table', 'drain_jobs', '--heartbeat-table', 'tq_drain_brokers']);
      try {
        const { page } = browser;
        await page.goto(dashboard.url);
        await drainer.publishMany(
          drainTable.queue('bulk'),
          Array.from({ length: BULK_ROWS }, (_, n) => ({ payload: { n } })),
        );
        await waitForChart(page, 'data-depth', { atLeast: BULK_ROWS });
        expect(await page.locator('#throughput-chart').getAttribute('data-peak-drained')).toBe('0');

        drained.resolve();
        await waitForChart(page, 'data-peak-drained', { above: 0 });
        await waitForChart(page, 'data-depth', { below: BULK_ROWS });
        await untilStats(drainer, drainTable.queue('bulk'), (stats) => stats.acked === BULK_ROWS, 'the bulk queue to drain', 30_000);
        expect(await page.locator('#throughput-chart polyline.drained').count()).toBe(1);
      } finally {
        drained.resolve();
        await Promise.allSettled([dashboard.stop(), drainer.stop()]);
      }
    });

    it('drops a broker from the list when it stops, and the command exits 0 on SIGTERM', async () => {
      // Its own heartbeat table, broker and dashboard: this test stops both.
      const leaving = beatingBroker(db, 'tq_leaving_brokers');
      leaving.subscribe(table.queue('bulk'), () => undefined);
      await leaving.start();
      const dashboard = await startDashboardProcess([...commonFlags(), '--table', 'jobs', '--heartbeat-table', 'tq_leaving_brokers']);
      try {
        const { page } = browser;
        await page.goto(dashboard.url);
        await page.locator('#brokers tr[data-broker]').waitFor();
        await leaving.stop();
        await page.locator('#brokers tr[data-broker]').waitFor({ state: 'detached' });
        expect(await dashboard.stop()).toBe(0);
      } finally {
        await Promise.allSettled([dashboard.stop(), leaving.stop()]);
      }
    });
  });
}

/** A broker over `db` with quick polls that beats into `heartbeatTable` every 200 ms. */
function beatingBroker(db: TestDatabase, heartbeatTable: string): Broker {
  return new Broker({
    database: db.brokerDatabase as string,
    pollIntervalMs: 50,
    stopTimeoutMs: 5_000,
    heartbeat: { table: heartbeatTable, intervalMs: 200 },
  });
}

function deadLetterIdsOf(body: string): string[] {
  return (JSON.parse(body) as DeadLettersBody).tables.flatMap((table) => table.rows.map((row) => row.id));
}

/**
 * The dashboard in this process over a driver that counts the statements it runs: its API
 * answers from the sampler's latest round, so requests add no statement however many come.
 */
function dashboardReadsSuite(context: SuiteContext): void {
  describe('dashboard reads', () => {
    it('answers any number of API requests from one sample per refresh, running no statement of their own', async () => {
      const table = jobsTable({ form: 'lease' });
      await createTable(context.stand, context.db, table);
      const broker = createBroker(context.db, context.brokers);
      await broker.start();
      await broker.publish(table.queue('emails'), { n: 1 });
      await broker.publish(table.queue('dead'), { n: 2 }, { headers: { [LAST_ERROR_HEADER]: 'smtp refused' } });
      const counted = countingDriver(await context.db.openDriver({ poolSize: 4 }));
      // A refresh longer than the test: after the first round, no round runs while the requests do.
      const dashboard = await openDashboard({
        database: counted.driver,
        tables: ['jobs'],
        deadLetter: { kind: 'group', group: 'dead' },
        port: 0,
        refreshMs: 600_000,
      });
      // As browsers do: a few kept-alive connections, well within the server's cap.
      const agent = new Agent({ keepAlive: true, maxSockets: 8 });
      try {
        const before = counted.statements();
        expect(before).toBeGreaterThan(0);
        const paths = ['api/queues', 'api/throughput', 'api/dead-letters', 'api/brokers'];
        const answers = await Promise.all(
          Array.from({ length: REQUESTS_AT_ONCE }, (_, index) => sendRaw(`${dashboard.url}${paths[index % paths.length]!}`, { agent })),
        );
        expect(answers.every((answer) => answer.status === 200)).toBe(true);
        expect(answers.find((answer) => answer.body.includes('smtp refused'))).toBeDefined();
        expect(counted.statements() - before).toBe(0);
      } finally {
        agent.destroy();
        await dashboard.close();
        await counted.driver.close();
      }
    });

    it('reads each table\'s dead letters where that table keeps them', async () => {
      const jobs = jobsTable({ form: 'lease' });
      const mail = jobsTable({ form: 'lease', name: 'mail' });
      for (const table of [jobs, mail]) await createTable(context.stand, context.db, table);
      const broker = createBroker(context.db, context.brokers);
      await broker.start();
      const failed = { headers: { [LAST_ERROR_HEADER]: 'smtp refused' } };
      await broker.publish(jobs.queue('dead'), { n: 1 }, failed);
      await broker.publish(mail.queue('mail.failed'), { n: 2 }, failed);
      // A queue of the mail table that only shares its name with the jobs table's dead letters.
      await broker.publish(mail.queue('dead'), { n: 3 });
      const driver = await context.db.openDriver({ poolSize: 4 });
      const dashboard = await openDashboard({
        database: driver,
        tables: ['jobs', 'mail'],
        deadLetter: { kind: 'group', group: 'dead' },
        deadLetterByTable: new Map([['mail', { kind: 'group', group: 'mail.failed' }]]),
        port: 0,
        refreshMs: 600_000,
      });
      try {
        const body = JSON.parse((await sendRaw(`${dashboard.url}api/dead-letters`)).body) as DeadLettersBody;
        expect(body.tables.map((table) => [table.table, table.location, table.deadLettered, table.rows.length])).toEqual([
          ['jobs', 'group:dead', 1, 1],
          ['mail', 'group:mail.failed', 1, 1],
        ]);
      } finally {
        await dashboard.close();
        await driver.close();
      }
    });

    it('flags a queue with ready rows that no reporting broker reads, and shows the attempts a dead letter had', async () => {
      const table = jobsTable({ form: 'lease' });
      await createTable(context.stand, context.db, table);
      const broker = createBroker(context.db, context.brokers, { heartbeat: { table: HEARTBEAT_TABLE, intervalMs: 1_000 } });
      broker.on('error', () => undefined);
      const emails = table.queue('emails');
      broker.subscribe(
        emails,
        () => {
          throw new Error('smtp down');
        },
        { maxAttempts: 2, deadLetter: 'dead', retryBackoff: { initialMs: 10 } },
      );
      await broker.start();
      // A publisher's typo: no subscription reads "emial".
      await broker.publishMany(table.queue('emial'), [{ payload: { n: 1 } }, { payload: { n: 2 } }]);
      await broker.publish(emails, { n: 3 });
      await untilStats(broker, emails, (stats) => stats.deadLettered === 1, 'the dead letter');
      const driver = await context.db.openDriver({ poolSize: 4 });
      const open = (heartbeatTable: string) =>
        openDashboard({ database: driver, tables: ['jobs'], deadLetter: { kind: 'group', group: 'dead' }, heartbeatTable, port: 0, refreshMs: 600_000 });
      const [reported, unreported] = [await open(HEARTBEAT_TABLE), await open('no_such_brokers')];
      try {
        const queuesOf = async (url: string) =>
          (JSON.parse((await sendRaw(`${url}api/queues`)).body) as { tables: { readers: unknown; groups: { group: string; ready: number }[] }[] }).tables[0]!;
        const queues = await queuesOf(reported.url);
        expect(queues.readers).toEqual({
          brokers: 1,
          unreadGroups: ['emial'],
          reported: [{ group: 'emails', limits: [], countsRowsInWork: null, timedOut: 0, cancelled: 0 }],
        });
        expect(queues.groups.map((group) => [group.group, group.ready])).toEqual([['emial', 2]]);
        expect((await queuesOf(unreported.url)).readers).toBeNull();
        const deadLetters = JSON.parse((await sendRaw(`${reported.url}api/dead-letters`)).body) as {
          tables: { rows: { attemptsMade: number; attempt: number }[] }[];
        };
        // Two attempts made; the column holds the third, which the move kept from happening.
        expect(deadLetters.tables[0]!.rows.map((row) => [row.attemptsMade, row.attempt])).toEqual([[2, 3]]);
      } finally {
        await reported.close();
        await unreported.close();
        await driver.close();
      }
    });
  });
}

const REQUESTS_AT_ONCE = 200;

/**
 * The driver as it is, with every statement run through it or a connection it lent counted.
 * Properties are read from the driver itself, so getters over its private fields still work.
 */
function countingDriver(driver: Driver): { driver: Driver; statements: () => number } {
  let statements = 0;
  const countedConnection = (connection: Connection): Connection =>
    new Proxy(connection, {
      get(target, property) {
        if (property === 'execute') {
          return (...args: Parameters<Connection['execute']>) => {
            statements += 1;
            return target.execute(...args);
          };
        }
        const value: unknown = Reflect.get(target, property);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
  const counted = new Proxy(driver, {
    get(target, property) {
      if (property === 'execute') {
        return (...args: Parameters<Driver['execute']>) => {
          statements += 1;
          return target.execute(...args);
        };
      }
      if (property === 'acquire') return async () => countedConnection(await target.acquire());
      const value: unknown = Reflect.get(target, property);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  return { driver: counted, statements: () => statements };
}

/** node:http rather than fetch, which would not send a Host or Origin header of the test's choosing. */
function sendRaw(
  url: string,
  options: { method?: string; headers?: Record<string, string>; body?: string; agent?: Agent } = {},
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const outgoing = request(url, { method: options.method ?? 'GET', headers: options.headers ?? {}, agent: options.agent }, (response) => {
      let body = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (body += chunk));
      response.on('end', () => resolve({ status: response.statusCode ?? 0, body }));
    });
    outgoing.on('error', reject);
    outgoing.end(options.body);
  });
}

/**
 * The page's script runs under a policy without `eval`, so the condition is a function with its
 * bounds as arguments rather than an expression in a string.
 */
async function waitForChart(
  page: BrowserSession['page'],
  attribute: 'data-depth' | 'data-peak-drained',
  bounds: { atLeast?: number; above?: number; below?: number },
): Promise<void> {
  const { atLeast = -Infinity, above = -Infinity, below = Infinity } = bounds;
  await page.waitForFunction(
    ([name, min, over, under]) => {
      const value = Number(document.querySelector('#throughput-chart')?.getAttribute(name));
      return value >= min && value > over && value < under;
    },
    [attribute, atLeast, above, below] as const,
  );
}

/** Waits until the element's whole text is `text`, as the page polls and redraws. */
async function waitForText(page: BrowserSession['page'], selector: string, text: string): Promise<void> {
  await page.locator(selector).filter({ hasText: new RegExp(`^${escapeRegExp(text)}$`) }).first().waitFor();
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
