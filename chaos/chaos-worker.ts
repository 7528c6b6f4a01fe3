/**
 * One replica in a chaos run: drains a queue and records each message it handles in the effects
 * table, then acks. Configured by one JSON argument; prints `ready` once started.
 */
import { Broker, defineTable, type TableDeclaration } from '../src/index.js';

interface ChaosWorkerConfig {
  readonly database: string;
  readonly table: TableDeclaration;
  readonly queue: string;
  readonly workers: number;
  readonly leaseMs: number;
  /** The insert into the effects table, with placeholders for the message id and the process id. */
  readonly recordSql: string;
}

const config = JSON.parse(process.argv[2]!) as ChaosWorkerConfig;
const broker = new Broker({
  database: config.database,
  pollIntervalMs: 100,
  leaseMs: config.leaseMs,
  pool: { max: config.workers + 2 },
  stopTimeoutMs: 2_000,
});
// Killed connections and restarts are the point of the run: errors are expected and counted by
// the invariants afterwards, not here.
broker.on('error', () => undefined);
broker.subscribe(
  defineTable(config.table).queue(config.queue),
  async (_message, context) => {
    await context.query(config.recordSql, [_message.id, process.pid]);
  },
  { workers: config.workers },
);
await broker.start();
process.stdout.write('ready\n');
process.on('SIGTERM', () => void broker.stop().then(() => process.exit(0)));
