// PostgreSQL with the application's own pg.Pool: the broker borrows its connections and never
// closes it. A publish inside the application's transaction commits or rolls back with it.
import pg from 'pg';
import { Broker, defineTable, Outcome } from 'tablequeue';

const pool = new pg.Pool({
  connectionString: process.env.POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
  max: 5,
});

// A table of its own for every run, dropped at the end. Without lockedUntil, PostgreSQL claims
// rows with SELECT … FOR UPDATE SKIP LOCKED and keeps the transaction open while the handler runs.
const table = `invoice_jobs_${process.pid}`;
const invoiceJobs = defineTable({
  table,
  id: 'id',
  group: 'queue',
  retryAfter: 'retry_after',
  attempt: 'attempt',
  payload: 'payload',
});
for (const statement of invoiceJobs.createTableSql('postgres')) await pool.query(statement);

try {
  // listen: true wakes subscriptions in every process at once through LISTEN/NOTIFY. It is on by
  // default when the broker opens its own pool from a URL, off for a pool you pass in.
  const broker = new Broker({ database: pool, listen: true });
  const invoices = invoiceJobs.queue<{ invoice: number }>('send');

  const seen: number[] = [];
  let allSent = (): void => undefined;
  const allDone = new Promise<void>((resolve) => (allSent = resolve));
  broker.subscribe(
    invoices,
    async (message, context) => {
      // context.query runs on a pool connection of its own, beside the claim's transaction.
      const [row] = await context.query<{ now: Date }>('SELECT now() AS now');
      console.log(`invoice ${message.payload.invoice} sent at ${row?.now.toISOString()}`);
      seen.push(message.payload.invoice);
      if (seen.length === 2) allSent();
      return Outcome.ack();
    },
    { workers: 2 },
  );
  await broker.start();

  // Committed with the application's transaction: the row is handled.
  const committed = await pool.connect();
  try {
    await committed.query('BEGIN');
    await broker.publish(invoices, { invoice: 1 }, { tx: committed });
    await committed.query('COMMIT');
  } finally {
    committed.release();
  }

  // Rolled back with it: the row never existed.
  const rolledBack = await pool.connect();
  try {
    await rolledBack.query('BEGIN');
    await broker.publish(invoices, { invoice: 99 }, { tx: rolledBack });
    await rolledBack.query('ROLLBACK');
  } finally {
    rolledBack.release();
  }

  await broker.publish(invoices, { invoice: 2 });
  await allDone;
  await broker.stop();

  const { rows } = await pool.query<{ count: string }>(`SELECT count(*) AS count FROM ${table}`);
  console.log(`sent invoices ${[...seen].sort().join(', ')}; rows left in the table: ${rows[0]?.count}`);
  if (seen.includes(99)) throw new Error('a row published in a rolled-back transaction was handled');
} finally {
  await pool.query(`DROP TABLE IF EXISTS ${table}`);
  await pool.end();
}
