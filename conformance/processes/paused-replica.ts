/**
 * A broker in a process of its own for the pause suite: one subscription with quick polls.
 * Configured by one JSON argument; prints `ready` once started, then one `event` line for each of
 * its claim loop's claims started (`event claim <Date.now()>`), claims skipped because the queue is paused
 * (`event paused`) and handlers begun (`event handling <id>`), and stops gracefully on SIGTERM.
 */
import { testHooksOf } from '../../src/broker/broker.js';
import { Broker, defineTable, type TableDeclaration } from '../../src/index.js';

interface ReplicaConfig {
  database: string;
  table: TableDeclaration;
  queue: string;
  pollIntervalMs: number;
}

const config = JSON.parse(process.argv[2]!) as ReplicaConfig;
const queue = defineTable(config.table).queue(config.queue);
const broker = new Broker({ database: config.database, pollIntervalMs: config.pollIntervalMs, pool: { max: 3 }, stopTimeoutMs: 2_000 });
broker.on('error', (error) => process.stderr.write(`error: ${error.message}\n`));
broker.on('warning', (message) => process.stderr.write(`warning: ${message}\n`));
broker.subscribe(queue, (message) => {
  process.stdout.write(`event handling ${message.id}\n`);
});
const loop = testHooksOf(broker, queue).loop;
loop.claimStarted.observe(() => process.stdout.write(`event claim ${Date.now()}\n`));
loop.pausedNoClaim.observe(() => process.stdout.write('event paused\n'));
await broker.start();
process.stdout.write('ready\n');
process.on('SIGTERM', () => {
  void broker.stop().then(() => process.exit(0));
});
