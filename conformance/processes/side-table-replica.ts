/**
 * A broker in a process of its own for the side tables suite: it declares every side table
 * (suites/side-table-brokers.ts), prints `ready`, and starts when the test writes `go` to its
 * stdin, so it starts at the same moment as the test's own brokers. Then it prints one `event`
 * line for each of: `started` or `failed <message>`, `warning <message>`, `error <message>`,
 * `handling <id>`, `aborted <id> <code>` (the abort reason's error code). Stops on SIGTERM.
 */
import { createInterface } from 'node:readline';
import { Broker, defineTable, QueueError } from '../../src/index.js';
import { declareEverySideTable, SIDE_TABLE_BROKER_OPTIONS, SIDE_TABLE_JOBS } from '../suites/side-table-brokers.js';

interface ReplicaConfig {
  database: string;
  group: string;
}

const config = JSON.parse(process.argv[2]!) as ReplicaConfig;
const report = (line: string) => process.stdout.write(`event ${line.replaceAll('\n', ' ')}\n`);
const table = defineTable(SIDE_TABLE_JOBS);
const broker = new Broker({ database: config.database, ...SIDE_TABLE_BROKER_OPTIONS, pool: { max: 4 } });
broker.on('warning', (message) => report(`warning ${message}`));
broker.on('error', (error) => report(`error ${error.message}`));
declareEverySideTable(broker, table, config.group, {
  onHandling: (id) => report(`handling ${id}`),
  onAborted: (id, reason) => report(`aborted ${id} ${reason instanceof QueueError ? reason.code : String(reason)}`),
});
process.on('SIGTERM', () => {
  void broker.stop().then(() => process.exit(0));
});
const lines = createInterface({ input: process.stdin });
const told = new Promise<void>((resolve) => lines.on('line', (line) => line === 'go' && resolve()));
process.stdout.write('ready\n');
await told;
try {
  await broker.start();
  report('started');
} catch (error) {
  report(`failed ${error instanceof Error ? error.message : String(error)}`);
}
