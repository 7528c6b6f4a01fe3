/**
 * A broker in a process of its own, for replica and crash tests. Configured by one JSON
 * argument; prints `ready` once started and `handling <id>` as each handler begins, and stops
 * gracefully on SIGTERM.
 *
 * Modes: `record` inserts each message id into the effects table and acks; `hang` never
 * returns from the handler (the parent kills the process).
 */
import { Broker, defineTable, type TableDeclaration } from '../../src/index.js';

interface WorkerConfig {
  database: string;
  table: TableDeclaration;
  queue: string;
  workers: number;
  mode: 'record' | 'hang';
  /** The insert into the effects table, with one placeholder for the message id. */
  recordSql: string;
  leaseMs?: number;
}

const config = JSON.parse(process.argv[2]!) as WorkerConfig;
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
    if (config.mode === 'hang') await new Promise(() => undefined);
    await context.query(config.recordSql, [message.id]);
  },
  { workers: config.workers },
);
await broker.start();
process.stdout.write('ready\n');
process.on('SIGTERM', () => {
  void broker.stop().then(() => process.exit(0));
});
