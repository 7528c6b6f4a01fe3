/**
 * A broker in a process of its own whose subscription declares `rate`, for the rate limit's
 * replica test. Configured by one JSON argument; prints `ready` once started and `handling <id>`
 * as each handler begins. Each handler records (id, process id, the host's now in milliseconds)
 * in the handled table, then acks. Stops gracefully on SIGTERM.
 */
import { Broker, defineTable, type TableDeclaration } from '../../src/index.js';

interface RateLimitedReplicaConfig {
  database: string;
  table: TableDeclaration;
  queue: string;
  workers: number;
  rate: { limit: number; perMs: number; key?: boolean };
  /** The insert into the handled table: placeholders for the id, the process id and the time. */
  recordSql: string;
}

const config = JSON.parse(process.argv[2]!) as RateLimitedReplicaConfig;
const table = defineTable(config.table);
const broker = new Broker({
  database: config.database,
  pollIntervalMs: 50,
  pool: { max: config.workers + 2 },
  stopTimeoutMs: 2_000,
});
broker.on('error', (error) => process.stderr.write(`error: ${(error as Error).message}\n`));
broker.subscribe(
  table.queue(config.queue),
  async (message, context) => {
    const handledAt = Date.now();
    process.stdout.write(`handling ${message.id}\n`);
    await context.query(config.recordSql, [message.id, process.pid, handledAt]);
  },
  { workers: config.workers, rate: config.rate },
);
await broker.start();
process.stdout.write('ready\n');
process.on('SIGTERM', () => {
  void broker.stop().then(() => process.exit(0));
});
