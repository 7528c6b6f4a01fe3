import { parseArgs } from 'node:util';
import { createDriver } from '../../src/driver/create-driver.js';
import { Broker, defineTable } from '../../src/index.js';
import { BENCH_DATABASE_NAMES, createBenchDatabase, DEFAULT_MARIADB_URL, DEFAULT_POSTGRES_URL, type BenchDatabaseName } from '../bench-database.js';
import { readCount, readList, serversFromEnvironment, UsageError } from '../command-line.js';
import { describeMachine } from '../machine.js';
import { median, spread } from '../statistics.js';

export const EVENTS_USAGE = `usage: npm run bench -- events [options]

Drains pre-inserted no-op messages from a lease table twice per round: with no lifecycle listener,
and with a no-op broker.on('settled') listener (every settlement builds and emits its event).
The two alternate, the first of each round swapping, and the table reports the median msg/s of
each and their ratio, and the process's CPU time per message (user and system, from the start of
the subscribing broker to the last message), which a loaded machine disturbs far less than msg/s.

  --messages N      rows per drain (default 10000)
  --workers N       the subscription's workers (default 4)
  --rounds N        rounds, each one drain of both (default 3)
  --db LIST         postgres,mariadb,sqlite (default all three)

Servers: POSTGRES_URL (default ${DEFAULT_POSTGRES_URL}) and MARIADB_URL
(default ${DEFAULT_MARIADB_URL}); both must be on 127.0.0.1. Each drain creates its own database
and drops it; SQLite drains use a new file in the temporary directory.`;

const DDL: Record<BenchDatabaseName, 'postgres' | 'mariadb' | 'sqlite'> = { postgres: 'postgres', mariadb: 'mariadb', sqlite: 'sqlite' };

type Listening = 'none' | 'settled';

/** `npm run bench -- events …`: argv starts with the word "events". Returns the exit code. */
export async function runEventsCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      messages: { type: 'string', default: '10000' },
      workers: { type: 'string', default: '4' },
      rounds: { type: 'string', default: '3' },
      db: { type: 'string', default: BENCH_DATABASE_NAMES.join(',') },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    console.log(EVENTS_USAGE);
    return 0;
  }
  if (positionals.length !== 1) throw new UsageError(`unexpected arguments: ${positionals.slice(1).join(' ')}`);
  const messages = readCount(values.messages, '--messages', 2);
  const workers = readCount(values.workers, '--workers', 1);
  const rounds = readCount(values.rounds, '--rounds', 1);
  const databases = readList(values.db, '--db', BENCH_DATABASE_NAMES);
  const machine = describeMachine();
  console.log(
    `events: ${messages} messages, ${workers} workers, ${rounds} rounds; ${machine.cpuModel}, ${machine.cpuCount} cores, ` +
      `load ${machine.loadAverage.join(' ')}, node ${machine.node}, commit ${machine.gitCommit ?? '?'}, library from ${machine.library}`,
  );
  const rows: string[] = [];
  for (const database of databases) {
    const rates: Record<Listening, number[]> = { none: [], settled: [] };
    const cpu: Record<Listening, number[]> = { none: [], settled: [] };
    for (let round = 0; round < rounds; round += 1) {
      const order: Listening[] = round % 2 === 0 ? ['none', 'settled'] : ['settled', 'none'];
      for (const listening of order) {
        const drain = await drainOnce(database, messages, workers, listening);
        rates[listening].push(drain.rate);
        cpu[listening].push(drain.cpuMicrosecondsPerMessage);
        console.log(`${database} round ${round + 1} ${listening}: ${drain.rate} msg/s, ${drain.cpuMicrosecondsPerMessage} µs CPU per message`);
      }
    }
    const none = median(rates.none)!;
    const settled = median(rates.settled)!;
    const cpuNone = median(cpu.none)!;
    const cpuSettled = median(cpu.settled)!;
    const range = (values: number[]) => `${spread(values)!.min}–${spread(values)!.max}`;
    rows.push(
      `| ${database} | ${none} (${range(rates.none)}) | ${settled} (${range(rates.settled)}) | ${(settled / none).toFixed(3)} | ` +
        `${cpuNone} (${range(cpu.none)}) | ${cpuSettled} (${range(cpu.settled)}) |`,
    );
  }
  const perEvent = measureEventPath();
  console.log(
    `\nthe event path alone, ${EVENT_PATH_ROUNDS} settlements: ${perEvent.none} ns CPU each with no listener, ${perEvent.settled} ns CPU with a no-op 'settled' listener`,
  );
  console.log(`load after: ${describeMachine().loadAverage.join(' ')}`);
  console.log(
    '\n| database | no listener msg/s (min–max) | no-op settled listener msg/s (min–max) | ratio | CPU µs/msg, no listener | CPU µs/msg, settled listener |',
  );
  console.log('| --- | ---: | ---: | ---: | ---: | ---: |');
  for (const row of rows) console.log(row);
  return 0;
}

const EVENT_PATH_ROUNDS = 1_000_000;

/**
 * What the runner does per settlement for the events, alone and in a loop, on a broker that is not
 * started: ask whether anyone listens to `settled` and to `retrying`, and with a listener build
 * the event as the runner does (one literal, its duration read from the clock) and emit it. CPU nanoseconds per settlement (user and system, so
 * other processes on the cores count less than in wall time), the best of three runs.
 */
function measureEventPath(): { none: number; settled: number } {
  const broker = new Broker({ database: 'sqlite::memory:' });
  const ids = Array.from({ length: EVENT_PATH_ROUNDS }, (_, index) => String(index));
  const measure = (): number => {
    let best = Number.POSITIVE_INFINITY;
    for (let run = 0; run < 3; run += 1) {
      const startedAt = performance.now();
      const cpuBefore = process.cpuUsage();
      for (let index = 0; index < EVENT_PATH_ROUNDS; index += 1) {
        const wantsSettled = broker.listenerCount('settled') > 0;
        if (!wantsSettled && broker.listenerCount('retrying') === 0) continue;
        if (wantsSettled) {
          broker.emit('settled', { queue: 'bench_jobs/work', id: ids[index]!, attempt: 1, durationMs: performance.now() - startedAt, outcome: 'ack' });
        }
      }
      const cpuUsed = process.cpuUsage(cpuBefore);
      best = Math.min(best, ((cpuUsed.user + cpuUsed.system) * 1e3) / EVENT_PATH_ROUNDS);
    }
    return Math.round(best * 10) / 10;
  };
  const none = measure();
  broker.on('settled', () => undefined);
  const settled = measure();
  return { none, settled };
}

/**
 * One drain of `messages` pre-inserted rows on a fresh database: msg/s from the first handled
 * message to the last, and the process's CPU time per message from the broker's start.
 */
async function drainOnce(
  database: BenchDatabaseName,
  messages: number,
  workers: number,
  listening: Listening,
): Promise<{ rate: number; cpuMicrosecondsPerMessage: number }> {
  const bench = await createBenchDatabase(database, serversFromEnvironment());
  const table = defineTable({
    table: 'bench_jobs',
    id: 'id',
    group: 'queue',
    retryAfter: 'retry_after',
    attempt: 'attempt',
    lockedUntil: 'locked_until',
    payload: 'payload',
  });
  const queue = table.queue('work');
  const filler = new Broker({ database: bench.url });
  const broker = new Broker({ database: bench.url, pool: { max: workers + 2 } });
  try {
    const driver = createDriver(bench.url, { poolSize: 1 });
    try {
      await driver.open();
      for (const sql of table.createTableSql(DDL[database])) await driver.execute({ name: 'bench.create', sql, values: [] });
    } finally {
      await driver.close();
    }
    await filler.start();
    for (let done = 0; done < messages; done += 5_000) {
      const count = Math.min(5_000, messages - done);
      await filler.publishMany(queue, Array.from({ length: count }, () => ({ payload: {} })));
    }
    await filler.stop();
    if (listening === 'settled') broker.on('settled', () => undefined);
    let handled = 0;
    let firstAt = 0;
    let lastAt = 0;
    let finish: () => void = () => undefined;
    const drained = new Promise<void>((resolve) => (finish = resolve));
    broker.subscribe(
      queue,
      () => {
        const now = performance.now();
        if (handled === 0) firstAt = now;
        handled += 1;
        lastAt = now;
        if (handled === messages) finish();
      },
      { workers },
    );
    const cpuBefore = process.cpuUsage();
    await broker.start();
    await drained;
    const cpuUsed = process.cpuUsage(cpuBefore);
    return {
      rate: Math.round(((messages - 1) / (lastAt - firstAt)) * 1000),
      cpuMicrosecondsPerMessage: Math.round(((cpuUsed.user + cpuUsed.system) / messages) * 10) / 10,
    };
  } finally {
    await broker.stop();
    await filler.stop();
    await bench.drop();
  }
}
