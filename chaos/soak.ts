/**
 * The soak run: `npm run soak [-- --minutes 10 --db postgres|mariadb|sqlite-file --form lease|rowLock --rate 100]`.
 * One broker publishes a steady stream and drains it, with retries and dead letters mixed in:
 * of every 50 messages, 4 throw on their first attempt (retried after a backoff), 1 asks for a
 * delayed retry on its first attempt, and 1 always throws (dead-lettered at its third attempt).
 * Every 5 s it samples the process's RSS and heap (after a full collection when Node runs with
 * --expose-gc), the connections the broker holds and the sessions the server shows for the
 * run's database. At the end it checks that nothing is lost (published = acked + dead-lettered,
 * and the table agrees) and that memory and connections stayed flat.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { mariadbStand } from '../conformance/stands/mariadb-stand.js';
import { postgresStand } from '../conformance/stands/postgres-stand.js';
import { sqliteFileStand } from '../conformance/stands/sqlite-stand.js';
import type { Stand, TestDatabase } from '../conformance/stand.js';
import { Broker, defineTable, Outcome, type TableDeclaration } from '../src/index.js';
import { sleep, waitFor, withDatabase } from './chaos-processes.js';

const STANDS: Record<string, Stand> = { postgres: postgresStand, mariadb: mariadbStand, 'sqlite-file': sqliteFileStand };
const SAMPLE_EVERY_MS = 5_000;
const PRINT_EVERY_SAMPLES = 12;
const PUBLISH_EVERY_MS = 100;
const WORKERS = 4;
const POOL_MAX = 8;
const MAX_ATTEMPTS = 3;
const DRAIN_LIMIT_MS = 3 * 60_000;
/**
 * Flat: the median of the last quarter of the samples is within this factor (plus 4 MB of
 * slack) of the median of the second quarter, after the first quarter's warm-up.
 */
const FLAT_FACTOR = 1.2;
const FLAT_SLACK_BYTES = 4 * 1024 * 1024;

const { values } = parseArgs({
  options: {
    minutes: { type: 'string', default: '10' },
    db: { type: 'string', default: 'postgres' },
    form: { type: 'string', default: 'lease' },
    rate: { type: 'string', default: '100' },
  },
});

interface Sample {
  readonly atSeconds: number;
  readonly rssBytes: number;
  readonly heapUsedBytes: number;
  readonly poolHeld: number;
  readonly poolOpen: number;
  readonly serverSessions: number;
  readonly published: number;
  readonly acked: number;
  readonly deadLettered: number;
  readonly retried: number;
  readonly queued: number;
}

const stand = STANDS[values.db];
if (stand === undefined) throw new Error(`unknown database "${values.db}": ${Object.keys(STANDS).join(', ')}`);
if (values.form !== 'lease' && values.form !== 'rowLock') throw new Error('--form is lease or rowLock');
const declaration: TableDeclaration = {
  table: 'soak_jobs',
  id: 'id',
  group: 'queue',
  retryAfter: 'retry_after',
  attempt: 'attempt',
  payload: 'payload',
  ...(values.form === 'lease' ? { lockedUntil: 'locked_until' } : {}),
};
const durationMs = Number(values.minutes) * 60_000;
const perTick = Math.max(1, Math.round((Number(values.rate) * PUBLISH_EVERY_MS) / 1000));
const collect = (globalThis as { gc?: () => void }).gc;

await withDatabase(stand, async (db) => {
  const table = defineTable(declaration);
  for (const sql of table.createTableSql(stand.ddlDialect)) await db.exec(sql);
  const queue = table.queue<{ n: number }>('soak');
  const broker = new Broker({ database: db.brokerDatabase as string, pool: { max: POOL_MAX }, pollIntervalMs: 100, leaseMs: 5_000 });
  const errors: Record<string, number> = {};
  broker.on('error', (_error: unknown, detail: { phase?: string } = {}) => {
    errors[detail.phase ?? 'other'] = (errors[detail.phase ?? 'other'] ?? 0) + 1;
  });
  broker.subscribe(
    queue,
    (message) => {
      const kind = message.payload.n % 50;
      if (kind === 0) throw new Error('a message that always fails');
      if (kind <= 4 && message.attempt === 1) throw new Error('a transient failure');
      if (kind === 5 && message.attempt === 1) return Outcome.retryAfter(500);
      return Outcome.ack();
    },
    { workers: WORKERS, maxAttempts: MAX_ATTEMPTS, deadLetter: 'dead', retryBackoff: { initialMs: 200, maxMs: 2_000 } },
  );
  await broker.start();
  let published = 0;
  const startedAt = Date.now();
  const samples: Sample[] = [];
  const sample = async () => {
    collect?.();
    const memory = process.memoryUsage();
    const stats = broker.stats();
    const subscription = stats.subscriptions[0]!;
    const entry: Sample = {
      atSeconds: Math.round((Date.now() - startedAt) / 1000),
      rssBytes: memory.rss,
      heapUsedBytes: memory.heapUsed,
      poolHeld: stats.pool.held,
      poolOpen: stats.pool.held + stats.pool.idle,
      serverSessions: await serverSessions(stand, db),
      published,
      acked: subscription.acked,
      deadLettered: subscription.deadLettered,
      retried: subscription.retried,
      queued: await count(db, "SELECT COUNT(*) AS n FROM soak_jobs WHERE queue = 'soak'"),
    };
    samples.push(entry);
    if ((samples.length - 1) % PRINT_EVERY_SAMPLES === 0) printRow(entry);
  };
  printHeader();
  await sample();
  const sampler = setInterval(() => void sample(), SAMPLE_EVERY_MS);
  while (Date.now() - startedAt < durationMs) {
    await broker.publishMany(
      queue,
      Array.from({ length: perTick }, (_, index) => ({ payload: { n: published + index } })),
    );
    published += perTick;
    await sleep(PUBLISH_EVERY_MS);
  }
  const drained = await waitFor(async () => (await count(db, "SELECT COUNT(*) AS n FROM soak_jobs WHERE queue = 'soak'")) === 0, {
    everyMs: 500,
    limitMs: DRAIN_LIMIT_MS,
  });
  clearInterval(sampler);
  await sample();
  printRow(samples.at(-1)!);
  const final = broker.stats().subscriptions[0]!;
  await broker.stop();
  const deadRows = await count(db, "SELECT COUNT(*) AS n FROM soak_jobs WHERE queue = 'dead'");
  const expectedDead = Math.ceil(published / 50);
  const lost = published - final.acked - final.deadLettered;
  const summary = {
    date: new Date().toISOString(),
    database: stand.name,
    form: values.form,
    minutes: Number(values.minutes),
    published,
    acked: final.acked,
    deadLettered: final.deadLettered,
    deadRows,
    expectedDead,
    retried: final.retried,
    handlerErrors: final.handlerErrors,
    errors,
    drained,
    lost,
    memory: {
      rss: span(samples, (entry) => entry.rssBytes),
      heapUsed: span(samples, (entry) => entry.heapUsedBytes),
    },
    connections: {
      poolHeld: span(samples, (entry) => entry.poolHeld),
      poolOpen: span(samples, (entry) => entry.poolOpen),
      serverSessions: span(samples, (entry) => entry.serverSessions),
    },
    isHeapFlat: isFlat(samples.map((entry) => entry.heapUsedBytes)),
    isRssFlat: isFlat(samples.map((entry) => entry.rssBytes)),
    areConnectionsBounded: samples.every((entry) => entry.poolOpen <= POOL_MAX && entry.serverSessions <= POOL_MAX + 1),
    samples,
  };
  console.log(`published ${published}, acked ${final.acked}, dead-lettered ${final.deadLettered} (table: ${deadRows}), retried ${final.retried}`);
  console.log(`lost ${lost}; the queue ${drained ? 'drained' : 'did NOT drain'}`);
  console.log(formatSpan('rss MB', summary.memory.rss, mb), `flat: ${summary.isRssFlat}`);
  console.log(formatSpan('heap MB', summary.memory.heapUsed, mb), `flat: ${summary.isHeapFlat}`);
  console.log(formatSpan('pool held', summary.connections.poolHeld, String));
  console.log(formatSpan('pool open', summary.connections.poolOpen, String));
  console.log(formatSpan('server sessions', summary.connections.serverSessions, String), `bounded: ${summary.areConnectionsBounded}`);
  mkdirSync(new URL('./results/', import.meta.url), { recursive: true });
  writeFileSync(new URL('./results/soak.json', import.meta.url), `${JSON.stringify(summary, null, 2)}\n`);
  const isHealthy =
    lost === 0 &&
    drained &&
    deadRows === final.deadLettered &&
    final.deadLettered === expectedDead &&
    summary.isHeapFlat &&
    summary.areConnectionsBounded;
  console.log(isHealthy ? 'soak passed' : 'SOAK FAILED');
  process.exitCode = isHealthy ? 0 : 1;
});

/** Sessions the server shows on the run's database, leaving out the admin session that asks. */
async function serverSessions(of: Stand, db: TestDatabase): Promise<number> {
  if (of.kind === 'sqlite') return 0;
  const sql =
    of.kind === 'postgres'
      ? 'SELECT COUNT(*) AS n FROM pg_stat_activity WHERE datname = current_database()'
      : 'SELECT COUNT(*) AS n FROM information_schema.processlist WHERE db = DATABASE()';
  return (await count(db, sql)) - 1;
}

async function count(db: TestDatabase, sql: string): Promise<number> {
  const [row] = await db.query(sql);
  return Number(Object.values(row ?? {})[0] ?? 0);
}

function span(samples: Sample[], read: (entry: Sample) => number): { start: number; peak: number; end: number } {
  const readings = samples.map(read);
  return { start: readings[0] ?? 0, peak: Math.max(...readings), end: readings.at(-1) ?? 0 };
}

function isFlat(readings: number[]): boolean {
  const quarter = Math.floor(readings.length / 4);
  if (quarter === 0) return true;
  const early = median(readings.slice(quarter, 2 * quarter));
  const late = median(readings.slice(-quarter));
  return late <= early * FLAT_FACTOR + FLAT_SLACK_BYTES;
}

function median(readings: number[]): number {
  const sorted = [...readings].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? 0;
}

function mb(bytes: number): string {
  return (bytes / 1024 / 1024).toFixed(1);
}

function formatSpan(label: string, value: { start: number; peak: number; end: number }, format: (n: number) => string): string {
  return `${label.padEnd(16)} start ${format(value.start)}, peak ${format(value.peak)}, end ${format(value.end)}`;
}

function printHeader(): void {
  console.log('| minute | published | acked | dead-lettered | retried | queued | RSS MB | heap MB | pool held/open | server sessions |');
  console.log('| --: | --: | --: | --: | --: | --: | --: | --: | --: | --: |');
}

function printRow(entry: Sample): void {
  console.log(
    `| ${(entry.atSeconds / 60).toFixed(1)} | ${entry.published} | ${entry.acked} | ${entry.deadLettered} | ${entry.retried} | ` +
      `${entry.queued} | ${mb(entry.rssBytes)} | ${mb(entry.heapUsedBytes)} | ${entry.poolHeld}/${entry.poolOpen} | ${entry.serverSessions} |`,
  );
}
