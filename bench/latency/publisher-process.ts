/**
 * The publisher of the across-processes runs, started by the benchmark as a child process:
 * `node --import tsx publisher-process.ts '<PublisherOrder as JSON>'`. Exits 0 once every
 * message is published, 1 on a failure (printed to stderr), and stops early on SIGTERM.
 */
import { Broker } from '../../src/broker/broker.js';
import { BENCH_QUEUE_NAME, createBenchTable, type BenchForm } from '../partitioning/bench-table.js';
import { growthTable } from '../growth/growth-table.js';
import { publishAtSteadyRate, type LatencyPayload } from './steady-publishing.js';

export interface PublisherOrder {
  readonly databaseUrl: string;
  readonly form: BenchForm;
  readonly messages: number;
  readonly intervalMs: number;
  /** The growth benchmark's table of many queues (lease form), publishing to its `bench` queue. */
  readonly isGroupedTable?: boolean;
}

async function publishOrder(order: PublisherOrder): Promise<void> {
  const stopping = new AbortController();
  process.once('SIGTERM', () => stopping.abort());
  // No subscription: on Postgres the broker still sends NOTIFY after each publish (listen is on
  // by default for a URL), but opens no LISTEN session.
  const broker = new Broker({ database: order.databaseUrl, pool: { max: 2 } });
  const table = order.isGroupedTable === true ? growthTable('grouped') : createBenchTable(order.form);
  const queue = table.queue<LatencyPayload>(BENCH_QUEUE_NAME);
  await broker.start();
  try {
    await publishAtSteadyRate((payload) => broker.publish(queue, payload), { ...order, signal: stopping.signal });
  } finally {
    await broker.stop();
  }
}

publishOrder(JSON.parse(process.argv[2] ?? '') as PublisherOrder).then(
  () => (process.exitCode = 0),
  (error: unknown) => {
    console.error('latency publisher:', error);
    process.exitCode = 1;
  },
);
