/**
 * A broker in a process of its own, for replica and crash tests. Configured by one JSON
 * argument; prints `ready` once started and `handling <id>` as each handler begins, and stops
 * gracefully on SIGTERM.
 *
 * Modes: `record` inserts each message id into the effects table and acks; `hang` never
 * returns from the handler (the parent kills the process); `sequence` inserts a `start` and then
 * an `end` row of (group, payload, phase) around each handler, for ordering and overlap checks;
 * `keyed` reads with keyed lanes (`workersByKey`) and inserts (partition key, payload, process id).
 */
import { Broker, defineTable, type TableDeclaration } from '../../src/index.js';

interface WorkerConfig {
  database: string;
  table: TableDeclaration;
  queue: string;
  /** Every queue to read, each with `workers`; defaults to `[queue]`. */
  queues?: string[];
  workers: number;
  mode: 'record' | 'hang' | 'sequence' | 'keyed';
  /**
   * The insert into the effects table: one placeholder for the message id, or in `sequence`
   * mode three, for the group, the payload and the phase.
   */
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
for (const queue of config.queues ?? [config.queue]) {
  broker.subscribe(
    table.queue(queue),
    async (message, context) => {
      process.stdout.write(`handling ${message.id}\n`);
      if (config.mode === 'hang') await new Promise(() => undefined);
      if (config.mode === 'keyed') {
        await context.query(config.recordSql, [message.partitionKey, message.payload, process.pid]);
        return;
      }
      if (config.mode === 'sequence') {
        await context.query(config.recordSql, [message.group, message.payload, 'start']);
        await context.query(config.recordSql, [message.group, message.payload, 'end']);
        return;
      }
      await context.query(config.recordSql, [message.id]);
    },
    config.mode === 'keyed' ? { workersByKey: config.workers } : { workers: config.workers },
  );
}
await broker.start();
process.stdout.write('ready\n');
process.on('SIGTERM', () => {
  void broker.stop().then(() => process.exit(0));
});
