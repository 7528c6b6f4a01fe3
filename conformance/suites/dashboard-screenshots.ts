/**
 * `npm run screenshots`: fills an SQLite queue file with a few queues, dead letters and two
 * brokers that drain while more rows arrive, opens the dashboard in headless Chromium and writes
 * the whole page to docs/dashboard.png. Takes about half a minute: the chart needs that long to
 * have a history.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { LAST_ERROR_HEADER } from '../../src/admin/open-queue-inspector.js';
import { openDashboard } from '../../src/dashboard/dashboard.js';
import { createDriver } from '../../src/driver/create-driver.js';
import { Broker, defineOutbox, defineTable, DestinationError, type OutboxDestination, type OutboxRecord } from '../../src/index.js';
import { launchBrowser } from './dashboard-harness.js';

const DOCS = fileURLToPath(new URL('../../docs/', import.meta.url));
const REFRESH_MS = 1_000;
const FEED_ROUNDS = 70;
const FEED_EVERY_MS = 400;
/** Taken in the middle of a burst, so the queues have rows waiting and in work. */
const SCREENSHOT_ROUND = 66;

const table = defineTable({
  table: 'jobs',
  id: 'id',
  group: 'queue',
  priority: 'priority',
  retryAfter: 'retry_after',
  attempt: 'attempt',
  lockedUntil: 'locked_until',
  headers: 'headers',
  payload: 'payload',
});

const outbox = defineOutbox({ table: 'outbox', id: 'id', name: 'name', payload: 'payload', processedAt: 'processed_at', lockedUntil: 'locked_until' });

/** A webhook that takes orders and is down for invoices, so the page shows a relay with a name waiting to retry. */
const billingWebhook: OutboxDestination = {
  description: 'https://billing.example/hooks',
  open: () => Promise.resolve(),
  close: () => Promise.resolve(),
  send: (records: readonly OutboxRecord[]) =>
    records[0]?.name === 'invoices'
      ? Promise.reject(new DestinationError({ destination: 'https://billing.example/hooks', message: 'HTTP 503 Service Unavailable' }))
      : Promise.resolve(),
};

const DEAD_LETTERS = [
  { to: 'ana@example.com', error: 'smtp 550: mailbox unavailable' },
  { to: 'bo@example.org', error: 'timeout after 30000 ms talking to smtp.example.org' },
  { to: 'chen@example.net', error: 'template "welcome-v2" not found' },
];

async function main(): Promise<void> {
  const directory = await mkdtemp(join(tmpdir(), 'tablequeue-screenshots-'));
  // A relative file name, so the page's header shows no path of the machine that took the pictures.
  process.chdir(directory);
  const database = 'sqlite:./queue.db';
  for (const sql of [...table.createTableSql('sqlite'), ...outbox.createTableSql('sqlite')]) await execute(database, sql);

  // Handlers that take as long as real work would: emails drain at about 100 rows a second,
  // webhooks at 40, reports at 4.
  const pause = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
  const emailWorker = new Broker({ database, pollIntervalMs: 100, heartbeat: { intervalMs: 1_000 } });
  emailWorker.subscribe(table.queue('emails'), () => pause(40), { workers: 4 });
  emailWorker.subscribe(table.queue('webhooks'), () => pause(50), { workers: 2 });
  // The relay's failed sends are what the page shows; they need no log line here.
  emailWorker.on('error', () => undefined);
  emailWorker.relay(outbox, billingWebhook, { retryBackoff: { initialMs: 2_000, maxMs: 60_000 } });
  const reportWorker = new Broker({ database, pollIntervalMs: 100, heartbeat: { intervalMs: 1_000 } });
  reportWorker.subscribe(table.queue('reports'), () => pause(250), { workers: 1 });
  await Promise.all([emailWorker.start(), reportWorker.start()]);

  for (const [index, dead] of DEAD_LETTERS.entries()) {
    await emailWorker.publish(table.queue('dead'), { template: 'welcome', to: dead.to, locale: index === 0 ? 'pt-BR' : 'en' }, {
      headers: { [LAST_ERROR_HEADER]: dead.error },
    });
  }
  for (const name of ['orders', 'orders', 'invoices', 'orders']) {
    await execute(database, `INSERT INTO outbox (name, payload) VALUES ('${name}', '{"total": 120}')`);
  }
  // As a subscription with maxAttempts 5 leaves them.
  await execute(database, "UPDATE jobs SET attempt = 5 WHERE queue = 'dead'");
  await emailWorker.publishMany(table.queue('reports'), Array.from({ length: 40 }, (_, n) => ({ payload: { report: n } })));
  await emailWorker.publishMany(
    table.queue('reports'),
    Array.from({ length: 6 }, (_, n) => ({ payload: { report: `nightly-${n}` }, delayMs: 3_600_000 })),
  );

  const dashboard = await openDashboard({
    database,
    tables: ['jobs'],
    deadLetter: { kind: 'group', group: 'dead' },
    allowActions: true,
    port: 0,
    refreshMs: REFRESH_MS,
  });
  const browser = await launchBrowser({ width: 1240, height: 900 });
  try {
    const { page } = browser;
    await page.goto(dashboard.url);
    // Bursts faster than the drain for twelve rounds, then eight quiet ones, so depth rises and falls.
    for (let round = 0; round < FEED_ROUNDS; round += 1) {
      if (round % 20 < 12) {
        await emailWorker.publishMany(table.queue('emails'), Array.from({ length: 50 }, (_, n) => ({ payload: { round, n } })));
        await emailWorker.publishMany(table.queue('webhooks'), Array.from({ length: 10 }, (_, n) => ({ payload: { round, n } })));
      }
      if (round === SCREENSHOT_ROUND) {
        await page.locator('#brokers tr[data-broker]').nth(1).waitFor();
        await page.screenshot({ path: join(DOCS, 'dashboard.png'), fullPage: true });
      }
      await pause(FEED_EVERY_MS);
    }
    console.log(`wrote ${join(DOCS, 'dashboard.png')}`);
  } finally {
    await browser.close();
    await dashboard.close();
    await Promise.all([emailWorker.stop(), reportWorker.stop()]);
    await rm(directory, { recursive: true, force: true });
  }
}

async function execute(database: string, sql: string): Promise<void> {
  const driver = createDriver(database);
  await driver.open();
  try {
    await driver.execute({ name: 'screenshots.setup', sql, values: [] });
  } finally {
    await driver.close();
  }
}

await main();
