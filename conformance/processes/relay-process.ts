/**
 * An outbox relay in a process of its own, for crash tests. Configured by one JSON argument;
 * prints `ready` once started and `sent <record id>` as its destination writes each record into
 * the received table, and stops gracefully on SIGTERM. With `hangAfter: n` the destination writes
 * n records and then never confirms the send (the parent kills the process mid-batch).
 */
import { Broker, defineOutbox, type OutboxDeclaration, type OutboxRecord } from '../../src/index.js';
import { createDriver } from '../../src/driver/create-driver.js';

interface RelayConfig {
  database: string;
  outbox: OutboxDeclaration;
  /** The insert into the received table: placeholders for record id, name, payload and relay. */
  recordSql: string;
  hangAfter?: number;
  leaseMs: number;
  batch: number;
}

const config = JSON.parse(process.argv[2]!) as RelayConfig;
const recorder = createDriver(config.database, { poolSize: 2 });
await recorder.open();
let written = 0;
const broker = new Broker({ database: config.database, pollIntervalMs: 50, leaseMs: config.leaseMs, stopTimeoutMs: 2_000 });
broker.on('error', (error) => process.stderr.write(`error: ${(error as Error).message}\n`));
broker.relay(
  defineOutbox(config.outbox),
  {
    description: `received table in process ${process.pid}`,
    open: () => Promise.resolve(),
    close: () => Promise.resolve(),
    async send(records: readonly OutboxRecord[]) {
      for (const record of records) {
        if (config.hangAfter !== undefined && written >= config.hangAfter) await new Promise(() => undefined);
        await recorder.execute({
          name: 'test.received',
          sql: config.recordSql,
          values: [record.id, record.name, record.payload.toString('utf8'), `process ${process.pid}`],
        });
        written += 1;
        process.stdout.write(`sent ${record.id}\n`);
      }
    },
  },
  { batch: config.batch },
);
await broker.start();
process.stdout.write('ready\n');
process.on('SIGTERM', () => {
  void broker.stop().then(async () => {
    await recorder.close();
    process.exit(0);
  });
});
