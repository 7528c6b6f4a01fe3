import { randomBytes } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { connect as connectNats } from 'nats';
import { createDriver } from '../../src/driver/create-driver.js';
import type { Driver } from '../../src/driver/driver.js';
import { Broker, defineOutbox, defineTable, NatsDestination, queueDestination } from '../../src/index.js';
import type { OutboxDestination } from '../../src/outbox/destination.js';
import { createBenchDatabase, DEFAULT_MARIADB_URL, DEFAULT_POSTGRES_URL, runSql, type BenchDatabaseName } from '../bench-database.js';
import { readCount, readList, serversFromEnvironment, UsageError } from '../command-line.js';
import { describeMachine } from '../machine.js';
import { median, spread } from '../statistics.js';

const DEFAULT_NATS_URL = 'nats://127.0.0.1:4222';
const RELAY_DATABASES = ['postgres', 'mariadb'] as const satisfies readonly BenchDatabaseName[];
type RelayDatabase = (typeof RELAY_DATABASES)[number];
const DESTINATIONS = ['jetstream', 'queue'] as const;
type DestinationName = (typeof DESTINATIONS)[number];

export const RELAY_USAGE = `usage: npm run bench -- relay [options]

Relays pre-written outbox records and reports records per second from the first batch confirmed
to the last, and the process's CPU time per record (from the broker's start). Destinations: NATS JetStream (a
stream of its own, file storage, deleted afterwards; every PubAck awaited) and, for comparison,
a tablequeue queue on the outbox's own database (exactly once, in the relay's transaction).

  --records N         outbox records per run (default 20000)
  --names N           record names the records spread over, round robin (default 8)
  --batch LIST        the relay's batch sizes (default 100,500)
  --concurrency N     names in work at once (default 4)
  --destination LIST  jetstream,queue (default both)
  --db LIST           postgres,mariadb (default both)
  --rounds N          runs per point (default 3)
  --output FILE       results as JSON (default bench/results/relay.json)

Servers: POSTGRES_URL (default ${DEFAULT_POSTGRES_URL}), MARIADB_URL (default ${DEFAULT_MARIADB_URL})
and NATS_URL (default ${DEFAULT_NATS_URL}, JetStream on). Each run creates its own database and
drops it.`;

const DEFAULT_OUTPUT = fileURLToPath(new URL('../results/relay.json', import.meta.url));
/** Rows per INSERT while filling the outbox: 500 records of two parameters stay under every placeholder limit. */
const FILL_CHUNK = 500;
/** A payload the size of a small event (an id, an amount, a timestamp as JSON). */
const PAYLOAD = Buffer.from(JSON.stringify({ orderId: 123456789, amount: '49.90', at: '2026-12-02T01:00:00.000Z' }));
const RUN_LIMIT_MS = 300_000;

interface RelayPoint {
  readonly database: RelayDatabase;
  readonly destination: DestinationName;
  readonly batch: number;
  readonly recordsPerSecond: number[];
  readonly cpuMicrosecondsPerRecord: number[];
}

/** `npm run bench -- relay …`: argv starts with the word "relay". Returns the exit code. */
export async function runRelayCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      records: { type: 'string', default: '20000' },
      names: { type: 'string', default: '8' },
      batch: { type: 'string', default: '100,500' },
      concurrency: { type: 'string', default: '4' },
      destination: { type: 'string', default: DESTINATIONS.join(',') },
      db: { type: 'string', default: RELAY_DATABASES.join(',') },
      rounds: { type: 'string', default: '3' },
      output: { type: 'string', default: DEFAULT_OUTPUT },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    console.log(RELAY_USAGE);
    return 0;
  }
  if (positionals.length !== 1) throw new UsageError(`unexpected arguments: ${positionals.slice(1).join(' ')}`);
  const settings = {
    records: readCount(values.records, '--records', 1),
    names: readCount(values.names, '--names', 1),
    batches: values.batch.split(',').map((item) => readCount(item, '--batch', 1)),
    concurrency: readCount(values.concurrency, '--concurrency', 1),
    destinations: readList(values.destination, '--destination', DESTINATIONS),
    databases: readList(values.db, '--db', RELAY_DATABASES),
    rounds: readCount(values.rounds, '--rounds', 1),
  };
  const natsUrl = process.env['NATS_URL'] ?? DEFAULT_NATS_URL;
  const machine = describeMachine();
  const startedAt = new Date();
  console.log(
    `relay: ${settings.records} records over ${settings.names} names, concurrency ${settings.concurrency}, ${settings.rounds} rounds; ` +
      `${machine.cpuModel}, ${machine.cpuCount} cores, load ${machine.loadAverage.join(' ')}, node ${machine.node}, ` +
      `commit ${machine.gitCommit ?? '?'}, library from ${machine.library}`,
  );
  const points: RelayPoint[] = [];
  for (const database of settings.databases) {
    for (const destination of settings.destinations) {
      for (const batch of settings.batches) {
        const point: RelayPoint = { database, destination, batch, recordsPerSecond: [], cpuMicrosecondsPerRecord: [] };
        for (let round = 0; round < settings.rounds; round += 1) {
          const run = await relayOnce({ ...settings, database, destination, batch, natsUrl });
          point.recordsPerSecond.push(run.recordsPerSecond);
          point.cpuMicrosecondsPerRecord.push(run.cpuMicrosecondsPerRecord);
          console.log(
            `${database} → ${destination}, batch ${batch}, round ${round + 1}: ${run.recordsPerSecond} records/s, ` +
              `${run.cpuMicrosecondsPerRecord} µs CPU per record, load ${describeMachine().loadAverage.join(' ')}`,
          );
        }
        points.push(point);
      }
    }
  }
  const results = {
    benchmark: 'relay',
    command: `npm run bench -- ${argv.join(' ')}`.trim(),
    startedAt: startedAt.toISOString(),
    finishedAt: new Date().toISOString(),
    settings,
    machine,
    loadAverageAfter: describeMachine().loadAverage,
    points,
  };
  const output = resolve(values.output);
  await mkdir(dirname(output), { recursive: true });
  await writeFile(output, `${JSON.stringify(results, null, 2)}\n`);
  console.log('\n| database | destination | batch | records/s median (min–max) | CPU µs/record median |');
  console.log('| --- | --- | --: | --: | --: |');
  for (const point of points) {
    const range = spread(point.recordsPerSecond)!;
    console.log(
      // The median of an even count is a mean of two: rounded as the runs are.
      `| ${point.database} | ${point.destination} | ${point.batch} | ${Math.round(median(point.recordsPerSecond)!)} (${range.min}–${range.max}) | ` +
        `${median(point.cpuMicrosecondsPerRecord)!.toFixed(1)} |`,
    );
  }
  console.log(`\nresults: ${output}`);
  return 0;
}

interface RelayRun {
  readonly records: number;
  readonly names: number;
  readonly concurrency: number;
  readonly database: RelayDatabase;
  readonly destination: DestinationName;
  readonly batch: number;
  readonly natsUrl: string;
}

/** One relay of `records` pre-written records on a fresh database; checks that the destination holds them all. */
async function relayOnce(run: RelayRun): Promise<{ recordsPerSecond: number; cpuMicrosecondsPerRecord: number }> {
  const bench = await createBenchDatabase(run.database, serversFromEnvironment());
  const suffix = randomBytes(4).toString('hex');
  const outbox = defineOutbox({ table: 'bench_outbox', id: 'id', name: 'name', payload: 'payload', headers: 'headers', lockedUntil: 'locked_until' });
  const jobs = defineTable({ table: 'bench_jobs', id: 'id', group: 'queue', lockedUntil: 'locked_until', headers: 'headers', payload: 'payload' });
  const stream = `TQ_BENCH_RELAY_${suffix}`;
  const subjectPrefix = `tq_bench_relay_${suffix}.`;
  const destination: OutboxDestination =
    run.destination === 'jetstream'
      ? new NatsDestination({ servers: run.natsUrl, subjectPrefix, ensureStream: { name: stream } })
      : queueDestination(jobs);
  const broker = new Broker({ database: bench.url, pool: { max: run.concurrency + 4 } });
  try {
    const driver = createDriver(bench.url, { poolSize: 1 });
    await driver.open();
    try {
      for (const sql of [...outbox.createTableSql(run.database), ...jobs.createTableSql(run.database)]) await runSql(driver, sql);
      await fill(driver, run.database, run.records, run.names);
    } finally {
      await driver.close();
    }
    const relay = broker.relay(outbox, destination, { batch: run.batch, concurrency: run.concurrency });
    const cpuBefore = process.cpuUsage();
    const startedAt = performance.now();
    await broker.start();
    // Timed from the first batch confirmed to the last, as the drains are: the start (pools, the
    // destination's connection, the stream's creation) is not the relay's throughput.
    let first: { at: number; relayed: number } | undefined;
    while (relay.stats().relayed < run.records) {
      const { relayed } = relay.stats();
      if (first === undefined && relayed > 0) first = { at: performance.now(), relayed };
      if (performance.now() - startedAt > RUN_LIMIT_MS) throw new Error(`the relay sent ${relayed} of ${run.records} records in ${RUN_LIMIT_MS} ms`);
      await new Promise((done) => setTimeout(done, 2));
    }
    const finishedAt = performance.now();
    const cpuUsed = process.cpuUsage(cpuBefore);
    const timed = first ?? { at: startedAt, relayed: 0 };
    const delivered = run.destination === 'jetstream' ? await streamMessages(run.natsUrl, stream) : await queueRows(bench.url);
    if (delivered !== run.records) throw new Error(`${run.destination} holds ${delivered} messages of ${run.records} records relayed`);
    return {
      recordsPerSecond: Math.round(((run.records - timed.relayed) / (finishedAt - timed.at)) * 1000),
      cpuMicrosecondsPerRecord: Math.round(((cpuUsed.user + cpuUsed.system) / run.records) * 10) / 10,
    };
  } finally {
    await broker.stop();
    if (run.destination === 'jetstream') await deleteStream(run.natsUrl, stream);
    await bench.drop();
  }
}

/** The records, round robin over `names` names ("n0", "n1", …), inserted in chunks. */
async function fill(driver: Driver, database: RelayDatabase, records: number, names: number): Promise<void> {
  for (let done = 0; done < records; done += FILL_CHUNK) {
    const count = Math.min(FILL_CHUNK, records - done);
    const rows = Array.from({ length: count }, (_, index) =>
      database === 'postgres' ? `($${2 * index + 1}, $${2 * index + 2})` : '(?, ?)',
    );
    const values = Array.from({ length: count }, (_, index) => [`n${(done + index) % names}`, PAYLOAD]).flat();
    await driver.execute({ name: `bench.fill.${count}`, sql: `INSERT INTO bench_outbox (name, payload) VALUES ${rows.join(', ')}`, values });
  }
}

async function streamMessages(natsUrl: string, stream: string): Promise<number> {
  const connection = await connectNats({ servers: natsUrl });
  try {
    return (await (await connection.jetstreamManager()).streams.info(stream)).state.messages;
  } finally {
    await connection.close();
  }
}

async function deleteStream(natsUrl: string, stream: string): Promise<void> {
  const connection = await connectNats({ servers: natsUrl });
  try {
    await (await connection.jetstreamManager()).streams.delete(stream).catch(() => false);
  } finally {
    await connection.close();
  }
}

async function queueRows(url: string): Promise<number> {
  const driver = createDriver(url, { poolSize: 1 });
  await driver.open();
  try {
    const [row] = await runSql(driver, 'SELECT COUNT(*) AS n FROM bench_jobs');
    return Number(Object.values(row ?? {})[0]);
  } finally {
    await driver.close();
  }
}
