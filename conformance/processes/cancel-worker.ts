/**
 * A broker in a process of its own whose handler works until its signal aborts, for cancels of
 * a message in work from another process. Configured by one JSON argument; prints `ready` once
 * started, then `event handling <id>` as a handler begins, `event aborted <id> <code>` when its
 * signal aborts (the reason's error code), and `event settled <id> cancelled=<n> leasesLost=<m>`
 * once the delivery settled, with the subscription's counts. Stops gracefully on SIGTERM. It does
 * not LISTEN, so a cancel reaches it by its poll or its lease renewal, never by a notification.
 */
import { testHooksOf } from '../../src/broker/broker.js';
import { Broker, defineTable, QueueError, type TableDeclaration } from '../../src/index.js';

interface CancelWorkerConfig {
  database: string;
  table: TableDeclaration;
  queue: string;
  leaseMs: number;
  /** How often the broker polls, and so reads the cancellations of its messages in work. */
  pollIntervalMs: number;
}

const config = JSON.parse(process.argv[2]!) as CancelWorkerConfig;
const queue = defineTable(config.table).queue(config.queue);
const broker = new Broker({ database: config.database, pollIntervalMs: config.pollIntervalMs, leaseMs: config.leaseMs, listen: false, stopTimeoutMs: 2_000 });
broker.on('error', (error) => process.stderr.write(`error: ${error.message}\n`));
broker.subscribe(queue, async (message, context) => {
  process.stdout.write(`event handling ${message.id}\n`);
  await new Promise((resolve) => context.signal.addEventListener('abort', resolve, { once: true }));
  const reason: unknown = context.signal.reason;
  process.stdout.write(`event aborted ${message.id} ${reason instanceof QueueError ? reason.code : String(reason)}\n`);
  // An ack, which a cancelled message must not be settled as.
});
const settled = testHooksOf(broker, queue).runner.settled.turnOn();
process.on('SIGTERM', () => {
  void broker.stop().then(() => process.exit(0));
});
await broker.start();
process.stdout.write('ready\n');
for (;;) {
  const id = await settled.next({ timeoutMs: 120_000, what: 'a settlement' });
  const stats = broker.stats().subscriptions.find((subscription) => subscription.queue === queue.label);
  process.stdout.write(`event settled ${id} cancelled=${stats?.cancelled ?? 0} leasesLost=${stats?.leasesLost ?? 0}\n`);
}
