/**
 * A broker in a process of its own whose subscription declares `concurrency`, for the limits'
 * replica tests. Configured by one JSON argument; prints `ready` once started and `handling <id>`
 * as each handler begins. Each handler records (id, partition key, process id, 'start') in the
 * effects table, works for `handlerMs` (a stand-in for a call to a rate-limited service, so rows
 * overlap in work), records the same with 'end', then acks. Stops gracefully on SIGTERM; the
 * crash tests SIGKILL it.
 */
import { Broker, defineTable, type TableDeclaration } from '../../src/index.js';

interface LimitedReplicaConfig {
  database: string;
  table: TableDeclaration;
  queue: string;
  workers: number;
  concurrency: { global?: number; perKey?: number };
  /** The insert into the effects table: placeholders for the id, the partition key, the process id and the phase. */
  recordSql: string;
  handlerMs: number;
  leaseMs?: number;
}

const config = JSON.parse(process.argv[2]!) as LimitedReplicaConfig;
const table = defineTable(config.table);
const broker = new Broker({
  database: config.database,
  pollIntervalMs: 50,
  leaseMs: config.leaseMs ?? 30_000,
  pool: { max: config.workers + 2 },
  stopTimeoutMs: 2_000,
});
broker.on('error', (error) => process.stderr.write(`error: ${(error as Error).message}\n`));
broker.subscribe(
  table.queue(config.queue),
  async (message, context) => {
    process.stdout.write(`handling ${message.id}\n`);
    await context.query(config.recordSql, [message.id, message.partitionKey ?? null, process.pid, 'start']);
    await new Promise((resolve) => setTimeout(resolve, config.handlerMs));
    await context.query(config.recordSql, [message.id, message.partitionKey ?? null, process.pid, 'end']);
  },
  { workers: config.workers, concurrency: config.concurrency },
);
await broker.start();
process.stdout.write('ready\n');
process.on('SIGTERM', () => {
  void broker.stop().then(() => process.exit(0));
});
