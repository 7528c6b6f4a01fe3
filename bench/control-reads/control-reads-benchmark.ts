import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { parseArgs } from 'node:util';
import { createDriver } from '../../src/driver/create-driver.js';
import { Broker, defineTable } from '../../src/index.js';
import { createBenchDatabase, DEFAULT_MARIADB_URL, DEFAULT_POSTGRES_URL } from '../bench-database.js';
import { readCount, readList, serversFromEnvironment, UsageError } from '../command-line.js';
import { describeMachine } from '../machine.js';

export const CONTROL_READS_USAGE = `usage: npm run bench -- control-reads [options]

What a busy broker's reads of its pause state and its cancellations cost while deliveries are in
work. "broker": a broker with --queues subscriptions, each with 2 rows in work that its handlers hold
and --idle-workers more workers that find nothing to claim (pollIntervalMs --poll-ms); once the
rows are in work, the statements it sends are counted by what they read, for --seconds, with their
mean round trip (claims are "other"). "statements": each read
alone, --repeats times on one connection: the round trip and the server's CPU time for it (the
Postgres backend's or the MariaDB thread's, from /proc), per statement.

  --part LIST       broker,statements (default both)
  --db LIST         postgres,mariadb (default both)
  --queues N        subscriptions of the broker (default 1)
  --idle-workers N  workers of each subscription beyond the 2 in work (default 2; 0: a full one)
  --poll-ms N       pollIntervalMs (default 50)
  --seconds N       how long the broker's statements are counted (default 10)
  --repeats N       runs of each statement alone per round, in 5 interleaved rounds (default 2000)

Servers: POSTGRES_URL (default ${DEFAULT_POSTGRES_URL}) and MARIADB_URL
(default ${DEFAULT_MARIADB_URL}); both must be on 127.0.0.1.`;

type ServerName = 'postgres' | 'mariadb';
type Part = 'broker' | 'statements';
type ReadKind = 'pause read' | 'cancellations read' | 'one read of both' | 'other';

const COUNTED: readonly ReadKind[] = ['pause read', 'cancellations read', 'one read of both', 'other'];

/** `npm run bench -- control-reads …`: argv starts with the word "control-reads". Returns the exit code. */
export async function runControlReadsCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      part: { type: 'string', default: 'broker,statements' },
      db: { type: 'string', default: 'postgres,mariadb' },
      queues: { type: 'string', default: '1' },
      'idle-workers': { type: 'string', default: '2' },
      'poll-ms': { type: 'string', default: '50' },
      seconds: { type: 'string', default: '10' },
      repeats: { type: 'string', default: '2000' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    console.log(CONTROL_READS_USAGE);
    return 0;
  }
  if (positionals.length !== 1) throw new UsageError(`unexpected arguments: ${positionals.slice(1).join(' ')}`);
  const parts = readList<Part>(values.part, '--part', ['broker', 'statements']);
  const databases = readList<ServerName>(values.db, '--db', ['postgres', 'mariadb']);
  const queues = readCount(values.queues, '--queues', 1);
  const idleWorkers = readCount(values['idle-workers'], '--idle-workers', 0);
  const pollIntervalMs = readCount(values['poll-ms'], '--poll-ms', 1);
  const seconds = readCount(values.seconds, '--seconds', 1);
  const repeats = readCount(values.repeats, '--repeats', 10);
  const machine = describeMachine();
  console.log(`${machine.cpuCount} × ${machine.cpuModel}, ${machine.os}, Node ${machine.node}, commit ${machine.gitCommit ?? '?'}, library from ${machine.library}`);
  console.log(`load average at start: ${machine.loadAverage.join(' ')}; ${new Date().toISOString()}`);
  await countClientStatements();
  for (const database of databases) {
    if (parts.includes('broker')) await brokerPart(database, { queues, idleWorkers, pollIntervalMs, seconds });
    if (parts.includes('statements')) {
      // The statements part reads the folded statement, which only the tree that has it can import.
      const { statementsPart } = await import('./control-read-statements-cost.js');
      await statementsPart(database, repeats);
    }
  }
  return 0;
}

interface Tally {
  count: number;
  milliseconds: number;
}

const tallies = new Map<ReadKind, Tally>();

function kindOf(sql: string): ReadKind {
  const readsControls = sql.includes('tablequeue_queue_controls');
  const readsCancellations = sql.includes('tablequeue_cancellations');
  if (readsControls && readsCancellations) return 'one read of both';
  if (readsControls) return 'pause read';
  if (readsCancellations) return 'cancellations read';
  return 'other';
}

function tally(sql: unknown, startedAt: number): void {
  const kind = kindOf(typeof sql === 'string' ? sql : '');
  const entry = tallies.get(kind) ?? { count: 0, milliseconds: 0 };
  entry.count += 1;
  entry.milliseconds += performance.now() - startedAt;
  tallies.set(kind, entry);
}

/**
 * Counts every statement the process sends, in the client libraries themselves: the broker opens
 * its own pool from the URL, so the count sees exactly what goes to the server, prepared or not.
 */
async function countClientStatements(): Promise<void> {
  // Resolved from the library's drivers, not from bench/, whose own node_modules may hold other copies.
  const require = createRequire(new URL('../../src/driver/client-library.ts', import.meta.url));
  const pg = require('pg') as { Client: { prototype: { query: (...args: unknown[]) => unknown } } };
  const pgQuery = pg.Client.prototype.query;
  pg.Client.prototype.query = function (this: unknown, ...args: unknown[]) {
    const first = args[0] as { text?: string } | string;
    const sql = typeof first === 'string' ? first : first?.text;
    const startedAt = performance.now();
    const result = pgQuery.apply(this, args);
    if (result instanceof Promise) void result.then(() => tally(sql, startedAt), () => tally(sql, startedAt));
    return result;
  };
  // Set on Connection, the prototype of every pool's connections, above the methods it inherits.
  const base = (require('mysql2') as { Connection: { prototype: Record<'query' | 'execute', (...args: unknown[]) => unknown> } }).Connection;
  for (const method of ['query', 'execute'] as const) {
    const original = base.prototype[method];
    base.prototype[method] = function (this: unknown, ...args: unknown[]) {
      const first = args[0] as { sql?: string } | string;
      const sql = typeof first === 'string' ? first : first?.sql;
      const startedAt = performance.now();
      const last = args.length - 1;
      const callback = args[last];
      if (typeof callback === 'function') {
        args[last] = (...results: unknown[]) => {
          tally(sql, startedAt);
          return (callback as (...values: unknown[]) => unknown)(...results);
        };
      }
      return original.apply(this, args);
    };
  }
}

async function brokerPart(database: ServerName, settings: { queues: number; idleWorkers: number; pollIntervalMs: number; seconds: number }): Promise<void> {
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
  const queues = Array.from({ length: settings.queues }, (_, index) => table.queue(`q${index}`));
  const inWorkPerQueue = 2;
  const workers = inWorkPerQueue + settings.idleWorkers;
  const broker = new Broker({ database: bench.url, pollIntervalMs: settings.pollIntervalMs, pool: { max: settings.queues * workers + 4 } });
  let release: () => void = () => undefined;
  const released = new Promise<void>((resolve) => (release = resolve));
  let entered = 0;
  let allInWork: () => void = () => undefined;
  const inWork = new Promise<void>((resolve) => (allInWork = resolve));
  try {
    const driver = createDriver(bench.url, { poolSize: 1 });
    try {
      await driver.open();
      for (const sql of table.createTableSql(database)) await driver.execute({ name: 'bench.create', sql, values: [] });
    } finally {
      await driver.close();
    }
    for (const queue of queues) {
      broker.subscribe(
        queue,
        async () => {
          entered += 1;
          if (entered === queues.length * inWorkPerQueue) allInWork();
          await released;
        },
        { workers, leaseMs: 120_000 },
      );
    }
    await broker.start();
    for (const queue of queues) await broker.publishMany(queue, Array.from({ length: inWorkPerQueue }, () => ({ payload: {} })));
    await inWork;
    tallies.clear();
    const startedAt = performance.now();
    await new Promise((resolve) => setTimeout(resolve, settings.seconds * 1000));
    const elapsedSeconds = (performance.now() - startedAt) / 1000;
    const counted = new Map(tallies);
    console.log(
      `\n${database} broker: ${settings.queues} subscription(s), ${inWorkPerQueue} rows in work and ${settings.idleWorkers} idle workers each, pollIntervalMs ${settings.pollIntervalMs}, ${elapsedSeconds.toFixed(1)} s`,
    );
    for (const kind of COUNTED) {
      const entry = counted.get(kind);
      if (entry === undefined) continue;
      console.log(
        `  ${kind.padEnd(20)} ${(entry.count / elapsedSeconds).toFixed(1).padStart(7)} statements/s, mean round trip ${((entry.milliseconds / entry.count) * 1000).toFixed(0)} µs`,
      );
    }
  } finally {
    release();
    await broker.stop({ timeoutMs: 5_000 });
    await bench.drop();
  }
}

/** The CPU time a thread or process has used, in milliseconds (user and system; /proc ticks are 10 ms). */
export function cpuMillisecondsOf(statPath: string): number {
  const stat = readFileSync(statPath, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // After the command: state is field 3, utime field 14 and stime field 15 (1-based).
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

/** The MariaDB server's process id, for its threads' /proc entries. */
export function mariadbProcessId(): number {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const command = readFileSync(`/proc/${entry}/comm`, 'utf8').trim();
      if (command === 'mariadbd' || command === 'mysqld') return Number(entry);
    } catch {
      // A process that ended while the list was read.
    }
  }
  throw new Error('no mariadbd process on this machine: the statements part reads its thread CPU time from /proc');
}
