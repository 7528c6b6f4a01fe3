/**
 * Publishes from a process of its own, for wake-up tests across processes. Configured by one
 * JSON argument; prints `published <id> <epoch ms>` for each row as its publish returns, then
 * stops its broker and exits.
 */
import { Broker, defineTable, type TableDeclaration } from '../../src/index.js';

interface PublisherConfig {
  database: string;
  table: TableDeclaration;
  queue: string;
  payloads: unknown[];
}

const config = JSON.parse(process.argv[2]!) as PublisherConfig;
const queue = defineTable(config.table).queue(config.queue);
const broker = new Broker({ database: config.database, pool: { max: 2 } });
broker.on('error', (error) => process.stderr.write(`error: ${(error as Error).message}\n`));
await broker.start();
for (const payload of config.payloads) {
  const id = await broker.publish(queue, payload);
  process.stdout.write(`published ${id} ${Date.now()}\n`);
}
await broker.stop();
