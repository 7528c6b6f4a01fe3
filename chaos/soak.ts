/**
 * The soak run: `npm run soak [-- --minutes 10 --db postgres|mariadb|sqlite-file --form lease|rowLock --rate 100]`,
 * with `--workers N`, `--sample-seconds N`, `--hold-snapshot-minutes M [--hold-from-minute F]`,
 * `--storage "fillfactor=70, …"` (PostgreSQL: the table's storage parameters, set after it is
 * made), `--backlog N` (rows parked in another queue of the table before the run, which nothing
 * claims: a table that also holds delayed jobs or other queues) and `--output FILE`.
 * One broker publishes a steady stream at the asked rate and drains it, with retries and dead
 * letters mixed in: of every 50 messages, 4 throw on their first attempt (retried after a
 * backoff), 1 asks for a delayed retry on its first attempt, and 1 always throws (dead-lettered
 * at its third attempt). Every sample (10 s by default) reads the process's RSS and heap (after a
 * full collection when Node runs with --expose-gc), the connections the broker holds, the sessions
 * the server shows for the run's database, and the queue table's health (soak-table-health.ts):
 * the claim statement's time, dead rows, sizes and autovacuum runs on PostgreSQL, the history
 * list on MariaDB. With --hold-snapshot-minutes, another session holds a transaction with a
 * snapshot open from minute F (default 1) for M minutes: what stops vacuum and purge.
 * At the end it checks that nothing is lost (published = acked + dead-lettered, and the table
 * agrees) and that memory and connections stayed flat.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { describeMachine } from '../bench/machine.js';
import { mariadbStand } from '../conformance/stands/mariadb-stand.js';
import { postgresStand } from '../conformance/stands/postgres-stand.js';
import { sqliteFileStand } from '../conformance/stands/sqlite-stand.js';
import type { Stand, TestDatabase } from '../conformance/stand.js';
import { Broker, defineTable, Outcome, type Queue, type TableDeclaration } from '../src/index.js';
import { sleep, waitFor, withDatabase } from './chaos-processes.js';
import { ClaimProbe, HeldSnapshot, readTableHealth, type TableHealth } from './soak-table-health.js';

const STANDS: Record<string, Stand> = { postgres: postgresStand, mariadb: mariadbStand, 'sqlite-file': sqliteFileStand };
const PRINT_EVERY_MS = 60_000;
const PUBLISH_EVERY_MS = 100;
const POOL_MAX = 8;
const MAX_ATTEMPTS = 3;
/** Sessions the soak opens beside the broker's: the claim probe's and the held snapshot's. */
const SOAK_OWN_SESSIONS = 2;
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
    workers: { type: 'string', default: '4' },
    'sample-seconds': { type: 'string', default: '10' },
    'hold-snapshot-minutes': { type: 'string', default: '0' },
    'hold-from-minute': { type: 'string', default: '1' },
    storage: { type: 'string' },
    backlog: { type: 'string', default: '0' },
    output: { type: 'string', default: fileURLToPath(new URL('./results/soak.json', import.meta.url)) },
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
  readonly isSnapshotHeld: boolean;
  readonly table: TableHealth | undefined;
  /** The one-minute load average: other processes on the same cores show here and explain a noisy sample. */
  readonly loadAverage: number;
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
const rate = Number(values.rate);
const workers = Number(values.workers);
const sampleEveryMs = Number(values['sample-seconds']) * 1000;
const holdFromMs = Number(values['hold-from-minute']) * 60_000;
const holdForMs = Number(values['hold-snapshot-minutes']) * 60_000;
const backlog = Number(values.backlog);
const BACKLOG_CHUNK = 5_000;
if (holdForMs > 0 && stand.kind === 'sqlite') throw new Error('--hold-snapshot-minutes needs PostgreSQL or MariaDB');
if (values.storage !== undefined && stand.kind !== 'postgres') throw new Error('--storage sets PostgreSQL storage parameters');
const collect = (globalThis as { gc?: () => void }).gc;

await withDatabase(stand, async (db) => {
  const table = defineTable(declaration);
  for (const sql of table.createTableSql(stand.ddlDialect)) await db.exec(sql);
  if (values.storage !== undefined) await db.exec(`ALTER TABLE soak_jobs SET (${values.storage})`);
  const queue = table.queue<{ n: number }>('soak');
  if (backlog > 0) await park(stand, db, table.queue<{ n: number }>('parked'), backlog);
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
    { workers, maxAttempts: MAX_ATTEMPTS, deadLetter: 'dead', retryBackoff: { initialMs: 200, maxMs: 2_000 } },
  );
  await broker.start();
  const probe = stand.kind === 'sqlite' ? undefined : await ClaimProbe.start(stand, db, table, 'soak');
  let snapshot: HeldSnapshot | undefined;
  let published = 0;
  const startedAt = Date.now();
  const samples: Sample[] = [];
  let lastPrintedAt = -Infinity;
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
      isSnapshotHeld: snapshot !== undefined,
      table: probe === undefined ? undefined : await readTableHealth(stand, db, 'soak_jobs', probe),
      loadAverage: Math.round(loadavg()[0]! * 100) / 100,
    };
    samples.push(entry);
    if (entry.atSeconds * 1000 - lastPrintedAt >= PRINT_EVERY_MS) {
      lastPrintedAt = entry.atSeconds * 1000;
      printRow(entry);
    }
  };
  printHeader();
  await sample();
  const sampler = setInterval(() => void sample(), sampleEveryMs);
  let snapshotEnded = holdForMs === 0;
  while (Date.now() - startedAt < durationMs) {
    const elapsedMs = Date.now() - startedAt;
    if (!snapshotEnded && snapshot === undefined && elapsedMs >= holdFromMs) {
      snapshot = await HeldSnapshot.open(stand, db, 'soak_jobs');
      console.log(`-- a transaction holds a snapshot open in another session from minute ${(elapsedMs / 60_000).toFixed(1)}`);
    } else if (snapshot !== undefined && elapsedMs >= holdFromMs + holdForMs) {
      await snapshot.release();
      snapshot = undefined;
      snapshotEnded = true;
      console.log(`-- the snapshot's transaction ended at minute ${(elapsedMs / 60_000).toFixed(1)}`);
    }
    // Published by the clock, not per tick: the publish's own time would otherwise come off the rate.
    const due = Math.min(Math.floor((elapsedMs * rate) / 1000) - published, Math.ceil(rate / 2));
    if (due > 0) {
      await broker.publishMany(
        queue,
        Array.from({ length: due }, (_, index) => ({ payload: { n: published + index } })),
      );
      published += due;
    }
    await sleep(PUBLISH_EVERY_MS);
  }
  await snapshot?.release();
  snapshot = undefined;
  const drained = await waitFor(async () => (await count(db, "SELECT COUNT(*) AS n FROM soak_jobs WHERE queue = 'soak'")) === 0, {
    everyMs: 500,
    limitMs: DRAIN_LIMIT_MS,
  });
  clearInterval(sampler);
  await sample();
  printRow(samples.at(-1)!);
  const final = broker.stats().subscriptions[0]!;
  await broker.stop();
  await probe?.stop();
  const deadRows = await count(db, "SELECT COUNT(*) AS n FROM soak_jobs WHERE queue = 'dead'");
  const expectedDead = Math.ceil(published / 50);
  // A run whose drain limit passed still holds rows: those are queued, not lost.
  const queuedAtEnd = await count(db, "SELECT COUNT(*) AS n FROM soak_jobs WHERE queue = 'soak'");
  const lost = published - final.acked - final.deadLettered - queuedAtEnd;
  const summary = {
    command: `npm run soak -- ${process.argv.slice(2).join(' ')}`.trim(),
    date: new Date().toISOString(),
    machine: describeMachine(),
    database: stand.name,
    form: values.form,
    minutes: Number(values.minutes),
    rate,
    workers,
    storage: values.storage,
    backlog,
    heldSnapshot: holdForMs === 0 ? undefined : { fromMinute: holdFromMs / 60_000, minutes: holdForMs / 60_000 },
    published,
    acked: final.acked,
    deadLettered: final.deadLettered,
    deadRows,
    expectedDead,
    retried: final.retried,
    handlerErrors: final.handlerErrors,
    errors,
    drained,
    queuedAtEnd,
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
    areConnectionsBounded: samples.every(
      (entry) => entry.poolOpen <= POOL_MAX && entry.serverSessions <= POOL_MAX + 1 + (probe === undefined ? 0 : SOAK_OWN_SESSIONS),
    ),
    samples,
  };
  console.log(`published ${published}, acked ${final.acked}, dead-lettered ${final.deadLettered} (table: ${deadRows}), retried ${final.retried}`);
  console.log(`lost ${lost}; the queue ${drained ? 'drained' : `did NOT drain (${queuedAtEnd} still queued)`}`);
  console.log(formatSpan('rss MB', summary.memory.rss, mb), `flat: ${summary.isRssFlat}`);
  console.log(formatSpan('heap MB', summary.memory.heapUsed, mb), `flat: ${summary.isHeapFlat}`);
  console.log(formatSpan('pool held', summary.connections.poolHeld, String));
  console.log(formatSpan('pool open', summary.connections.poolOpen, String));
  console.log(formatSpan('server sessions', summary.connections.serverSessions, String), `bounded: ${summary.areConnectionsBounded}`);
  const output = resolve(values.output);
  mkdirSync(dirname(output), { recursive: true });
  writeFileSync(output, `${JSON.stringify(summary, null, 2)}\n`);
  console.log(`results: ${output}`);
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

/**
 * `rows` rows in a queue no one subscribes to, published before the run; then (PostgreSQL) a
 * VACUUM ANALYZE, so that every run starts from the same statistics and visibility map.
 */
async function park(of: Stand, db: TestDatabase, parked: Queue<{ n: number }>, rows: number): Promise<void> {
  const publisher = new Broker({ database: db.brokerDatabase as string });
  await publisher.start();
  try {
    for (let done = 0; done < rows; done += BACKLOG_CHUNK) {
      const count = Math.min(BACKLOG_CHUNK, rows - done);
      await publisher.publishMany(parked, Array.from({ length: count }, (_, index) => ({ payload: { n: done + index } })));
    }
  } finally {
    await publisher.stop();
  }
  if (of.kind === 'postgres') await db.exec('VACUUM ANALYZE soak_jobs');
  console.log(`-- ${rows} rows parked in queue "parked"`);
}

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
  console.log(
    '| minute | published | acked | dead-lettered | retried | queued | RSS MB | heap MB | pool held/open | server sessions | ' +
      'snapshot held | claim p50/p99 ms | claim pages | dead rows | table/index MB | autovacuums | history list | load |',
  );
  console.log('| --: | --: | --: | --: | --: | --: | --: | --: | --: | --: | --- | --: | --: | --: | --: | --: | --: | --: |');
}

function printRow(entry: Sample): void {
  const health = entry.table;
  const show = (value: number | undefined) => (value === undefined ? '–' : String(value));
  console.log(
    `| ${(entry.atSeconds / 60).toFixed(1)} | ${entry.published} | ${entry.acked} | ${entry.deadLettered} | ${entry.retried} | ` +
      `${entry.queued} | ${mb(entry.rssBytes)} | ${mb(entry.heapUsedBytes)} | ${entry.poolHeld}/${entry.poolOpen} | ${entry.serverSessions} | ` +
      `${entry.isSnapshotHeld ? 'yes' : 'no'} | ${show(health?.claimP50Ms)}/${show(health?.claimP99Ms)} | ${show(health?.claimPagesP50)} | ` +
      `${show(health?.deadRows)} | ${health === undefined ? '–' : mb(health.tableBytes)}/${health?.indexBytes === undefined ? '–' : mb(health.indexBytes)} | ` +
      `${show(health?.autovacuumRuns)} | ${show(health?.historyListLength)} | ${entry.loadAverage} |`,
  );
}
