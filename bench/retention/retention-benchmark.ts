import { parseArgs } from 'node:util';
import { openDialect } from '../../src/broker/open-dialect.js';
import { createDriver } from '../../src/driver/create-driver.js';
import { Broker, defineTable, type Queue } from '../../src/index.js';
import { Pruner } from '../../src/retention/pruner.js';
import { BENCH_DATABASE_NAMES, createBenchDatabase, DEFAULT_MARIADB_URL, DEFAULT_POSTGRES_URL, type BenchDatabaseName } from '../bench-database.js';
import { readCount, readList, serversFromEnvironment, UsageError } from '../command-line.js';
import { describeMachine } from '../machine.js';
import { median, percentile } from '../statistics.js';

export const RETENTION_USAGE = `usage: npm run bench -- retention [options]

Fills a lease table with processed rows two hours old, then prunes them with the retention's own
batches (processed rows older than an hour) at each batch size, while a subscription on the same
table drains messages published one at a time. Reports each batch's time and the claim latency
(publish to handler start) before and during the pruning.

  --rows N          processed rows filled before each batch size's run (default 50000)
  --batch LIST      batch sizes, a run each (default 100,1000,5000)
  --pause-ms N      the pause between batches (default 50)
  --db LIST         postgres,mariadb,sqlite (default all three)

Servers: POSTGRES_URL (default ${DEFAULT_POSTGRES_URL}) and MARIADB_URL
(default ${DEFAULT_MARIADB_URL}); both must be on 127.0.0.1. Each run creates its own database
and drops it; SQLite runs use a new file in the temporary directory.`;

const HOUR_MS = 3_600_000;
const DDL: Record<BenchDatabaseName, 'postgres' | 'mariadb' | 'sqlite'> = { postgres: 'postgres', mariadb: 'mariadb', sqlite: 'sqlite' };

interface RetentionRun {
  readonly database: BenchDatabaseName;
  readonly batchSize: number;
  readonly batches: number;
  readonly batchMs: { readonly median: number; readonly p95: number; readonly max: number };
  readonly rowsPerSecond: number;
  readonly claimMsBefore: { readonly median: number; readonly p95: number; readonly max: number };
  readonly claimMsDuring: { readonly median: number; readonly p95: number; readonly max: number };
}

function summary(values: readonly number[]): { median: number; p95: number; max: number } {
  const round = (value: number | undefined) => Math.round((value ?? Number.NaN) * 10) / 10;
  return { median: round(median(values)), p95: round(percentile(values, 95)), max: round(Math.max(...values)) };
}

/** `npm run bench -- retention …`: argv starts with the word "retention". Returns the exit code. */
export async function runRetentionCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      rows: { type: 'string', default: '50000' },
      batch: { type: 'string', default: '100,1000,5000' },
      'pause-ms': { type: 'string', default: '50' },
      db: { type: 'string', default: BENCH_DATABASE_NAMES.join(',') },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    console.log(RETENTION_USAGE);
    return 0;
  }
  if (positionals.length !== 1) throw new UsageError(`unexpected arguments: ${positionals.slice(1).join(' ')}`);
  const rows = readCount(values.rows, '--rows', 1);
  const batchSizes = values.batch.split(',').map((item) => readCount(item, '--batch', 1));
  const pauseMs = readCount(values['pause-ms'], '--pause-ms', 0);
  const databases = readList(values.db, '--db', BENCH_DATABASE_NAMES);
  const machine = describeMachine();
  console.log(`retention: ${rows} rows per run, batches ${batchSizes.join(', ')}, ${pauseMs} ms apart; ${machine.cpuModel}, ${machine.cpuCount} cores, library from ${machine.library}`);
  const runs: RetentionRun[] = [];
  for (const database of databases) {
    for (const batchSize of batchSizes) {
      const run = await runOnce(database, rows, batchSize, pauseMs);
      runs.push(run);
      console.log(
        `${database} batch ${batchSize}: ${run.batches} batches, batch ms median ${run.batchMs.median} p95 ${run.batchMs.p95} max ${run.batchMs.max}, ` +
          `${run.rowsPerSecond} rows/s; claim ms before median ${run.claimMsBefore.median} p95 ${run.claimMsBefore.p95} max ${run.claimMsBefore.max}, ` +
          `during median ${run.claimMsDuring.median} p95 ${run.claimMsDuring.p95} max ${run.claimMsDuring.max}`,
      );
    }
  }
  console.log('\n| database | batch | batches | batch ms p50 / p95 / max | rows/s | claim ms before p50 / p95 / max | claim ms during p50 / p95 / max |');
  console.log('| --- | ---: | ---: | --- | ---: | --- | --- |');
  for (const run of runs) {
    const triple = (value: { median: number; p95: number; max: number }) => `${value.median} / ${value.p95} / ${value.max}`;
    console.log(
      `| ${run.database} | ${run.batchSize} | ${run.batches} | ${triple(run.batchMs)} | ${run.rowsPerSecond} | ${triple(run.claimMsBefore)} | ${triple(run.claimMsDuring)} |`,
    );
  }
  return 0;
}

async function runOnce(database: BenchDatabaseName, rows: number, batchSize: number, pauseMs: number): Promise<RetentionRun> {
  const bench = await createBenchDatabase(database, serversFromEnvironment());
  const table = defineTable({
    table: 'bench_jobs',
    id: 'id',
    group: 'queue',
    retryAfter: 'retry_after',
    attempt: 'attempt',
    processedAt: 'processed_at',
    lockedUntil: 'locked_until',
    payload: 'payload',
  });
  const driver = createDriver(bench.url, { poolSize: 2 });
  const broker = new Broker({ database: bench.url, pollIntervalMs: 1000 });
  try {
    await driver.open();
    for (const sql of table.createTableSql(DDL[database])) await driver.execute({ name: 'bench.create', sql, values: [] });
    const latencies: number[] = [];
    let onHandled: () => void = () => undefined;
    broker.subscribe(table.queue('work'), (message) => {
      latencies.push(Date.now() - (message.payload as { at: number }).at);
      onHandled();
    }, { workers: 4 });
    await broker.start();
    for (let done = 0; done < rows; done += 5_000) {
      const count = Math.min(5_000, rows - done);
      await broker.publishMany(table.queue('done'), Array.from({ length: count }, () => ({ payload: { filler: 'x'.repeat(100) } })));
    }
    const placeholder = database === 'postgres' ? '$1' : '?';
    await driver.execute({
      name: 'bench.age',
      sql: `UPDATE bench_jobs SET processed_at = ${placeholder} WHERE queue = 'done'`,
      values: [new Date(Date.now() - 2 * HOUR_MS)],
    });
    const ping = (queue: Queue<unknown>) =>
      new Promise<void>((resolve, reject) => {
        onHandled = resolve;
        broker.publish(queue, { at: Date.now() }).catch(reject);
      });
    for (let index = 0; index < 200; index += 1) await ping(table.queue('work'));
    const before = latencies.splice(0);

    const dialect = await openDialect(driver);
    const pruner = new Pruner({ driver, dialect, spec: table.spec });
    const deletedAt: number[] = [];
    const startedAt = Date.now();
    let isPruning = true;
    const pruning = pruner
      .prune({ target: { kind: 'processed' }, olderThanMs: HOUR_MS, batchSize, pauseMs, onDeleted: () => deletedAt.push(Date.now()) })
      .finally(() => (isPruning = false));
    while (isPruning) await ping(table.queue('work'));
    const deleted = await pruning;
    const elapsedMs = Date.now() - startedAt;
    if (deleted !== rows) throw new Error(`${database}: pruned ${deleted} rows of ${rows}`);
    const batchMs = deletedAt.map((at, index) => (index === 0 ? at - startedAt : at - deletedAt[index - 1]! - pauseMs));
    return {
      database,
      batchSize,
      batches: deletedAt.length,
      batchMs: summary(batchMs),
      rowsPerSecond: Math.round((rows / elapsedMs) * 1000),
      claimMsBefore: summary(before),
      claimMsDuring: summary(latencies),
    };
  } finally {
    await broker.stop();
    await driver.close();
    await bench.drop();
  }
}
