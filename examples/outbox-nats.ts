// A transactional outbox on PostgreSQL relayed to NATS JetStream: the application writes an
// order and its "created" event in one transaction; the relay publishes committed events only,
// each with its record id as JetStream's message id (resends within the window are dropped).
import { connect, StorageType } from 'nats';
import pg from 'pg';
import { Broker, defineOutbox, NatsDestination, OUTBOX_RECORD_ID_HEADER } from 'tablequeue';

const pool = new pg.Pool({ connectionString: process.env.POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres' });
const natsServer = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';

// Tables, subjects and a stream of their own for every run, all removed at the end.
const orders = `orders_${process.pid}`;
const outboxTable = `outbox_${process.pid}`;
const stream = `ORDERS_${process.pid}`;
const subjectPrefix = `orders_${process.pid}.`;

const outbox = defineOutbox({
  table: outboxTable,
  id: 'id',                       // generated: records of one name go out in id order
  name: 'name',                   // here the end of the subject: "created" → orders_<pid>.created
  payload: 'payload',
  headers: 'headers',
  lockedUntil: 'locked_until',    // the relay's lease
});
await pool.query(`CREATE TABLE ${orders} (id integer PRIMARY KEY, item text NOT NULL)`);
for (const statement of outbox.createTableSql('postgres')) await pool.query(statement);

// The stream that takes the events. The destination's ensureStream option can create it instead.
const nats = await connect({ servers: natsServer });
const manager = await nats.jetstreamManager();
await manager.streams.add({ name: stream, subjects: [`${subjectPrefix}>`], storage: StorageType.Memory });
try {
  const broker = new Broker({ database: pool });
  broker.relay(outbox, new NatsDestination({ servers: natsServer, subjectPrefix }));
  const events = broker.outbox(outbox);
  await broker.start();

  // The order and its event commit together…
  const placeOrder = async (id: number, item: string, outcome: 'COMMIT' | 'ROLLBACK'): Promise<void> => {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      await client.query(`INSERT INTO ${orders} (id, item) VALUES ($1, $2)`, [id, item]);
      await events.write(client, 'created', { order: id, item });
      await client.query(outcome);
    } finally {
      client.release();
    }
  };
  await placeOrder(1, 'kettle', 'COMMIT');
  await placeOrder(2, 'teapot', 'ROLLBACK');   // …or neither exists: this event is never sent
  await placeOrder(3, 'cups', 'COMMIT');

  // Read the stream as another service would, until both committed orders arrived.
  const consumer = await nats.jetstream().consumers.get(stream);
  const received: { order: number; item: string }[] = [];
  while (received.length < 2) {
    const message = await consumer.next({ expires: 5_000 });
    if (message === null) throw new Error('no event arrived within 5 s');
    const event = message.json<{ order: number; item: string }>();
    console.log(`${message.subject}: order ${event.order} (${event.item}), record ${message.headers?.get(OUTBOX_RECORD_ID_HEADER)}`);
    received.push(event);
  }
  await broker.stop();   // lets sends in flight finish and be marked, then closes the destination
  if (received.some((event) => event.order === 2)) throw new Error('an event of a rolled-back order was sent');
} finally {
  await manager.streams.delete(stream);
  await nats.close();
  await pool.query(`DROP TABLE IF EXISTS ${orders}, ${outboxTable}`);
  await pool.end();
}
