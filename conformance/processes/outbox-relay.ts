/**
 * A broker relaying an outbox table to NATS JetStream in a process of its own, for crash tests.
 * Configured by one JSON argument; prints `ready` once started and `confirmed <ids as JSON>`
 * after JetStream acknowledged each send. The send that makes `holdAfterSends` confirmed sends
 * never returns once acknowledged, so the parent can SIGKILL the process with that batch sent but
 * not yet marked processed, while other names' sends are still on the wire.
 */
import { Broker, defineOutbox, NatsDestination, type OutboxDeclaration, type OutboxDestination } from '../../src/index.js';

export interface OutboxRelayConfig {
  database: string;
  outbox: OutboxDeclaration;
  natsServers: string;
  subjectPrefix: string;
  batch: number;
  leaseMs: number;
  holdAfterSends: number;
}

const config = JSON.parse(process.argv[2]!) as OutboxRelayConfig;
const nats = new NatsDestination({ servers: config.natsServers, subjectPrefix: config.subjectPrefix });
let confirmedSends = 0;
const reporting: OutboxDestination = {
  description: nats.description,
  open: () => nats.open(),
  close: () => nats.close(),
  async send(records) {
    await nats.send(records);
    confirmedSends += 1;
    process.stdout.write(`confirmed ${JSON.stringify(records.map((record) => record.id))}\n`);
    if (confirmedSends === config.holdAfterSends) await new Promise(() => undefined);
  },
};

const broker = new Broker({ database: config.database, pollIntervalMs: 50, leaseMs: config.leaseMs, stopTimeoutMs: 2_000 });
broker.on('error', (error) => process.stderr.write(`error: ${(error as Error).message}\n`));
broker.relay(defineOutbox(config.outbox), reporting, { batch: config.batch, concurrency: 4 });
await broker.start();
process.stdout.write('ready\n');
