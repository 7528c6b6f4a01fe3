/**
 * A broker in a process of its own that declares one schedule and nothing else, for the
 * replica and crash tests of schedules. Configured by one JSON argument; prints `ready` once
 * started and `fired <instant>` for each tick whose message it committed, and stops gracefully
 * on SIGTERM.
 */
import { Broker, defineTable, type ScheduleOptions, type TableDeclaration } from '../../src/index.js';
import { scheduleTestHooksOf } from '../../src/broker/broker.js';

interface ReplicaConfig {
  database: string;
  table: TableDeclaration;
  queue: string;
  schedule: string;
  options: ScheduleOptions;
}

const config = JSON.parse(process.argv[2]!) as ReplicaConfig;
const table = defineTable(config.table);
const broker = new Broker({ database: config.database, stopTimeoutMs: 2_000, listen: false });
broker.on('error', (error) => process.stderr.write(`error: ${(error as Error).message}\n`));
broker.on('warning', (message) => process.stderr.write(`warning: ${message}\n`));
broker.schedule(config.schedule, table.queue(config.queue), config.options);
const committed = scheduleTestHooksOf(broker).committed;
committed.observe(({ plan }) => {
  for (const tick of plan.fire) process.stdout.write(`fired ${tick.toISOString()}\n`);
  committed.clear();
});
await broker.start();
process.stdout.write('ready\n');
process.on('SIGTERM', () => {
  void broker.stop().then(() => process.exit(0));
});
