// A transactional handler on PostgreSQL: its writes through context.tx and the message's ack
// commit together, and a throw rolls them back before the message is retried. Each payment
// therefore changes the balance exactly once, even the one whose first attempt fails half-way.
import pg from 'pg';
import { Broker, defineTable, Outcome } from 'tablequeue';

const pool = new pg.Pool({ connectionString: process.env.POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres' });

// Tables of their own for every run, dropped at the end.
const accounts = `accounts_${process.pid}`;
const table = `payment_jobs_${process.pid}`;
const jobs = defineTable({
  table,
  id: 'id',
  group: 'queue',
  retryAfter: 'retry_after',
  attempt: 'attempt',
  payload: 'payload',
});
await pool.query(`CREATE TABLE ${accounts} (id integer PRIMARY KEY, balance integer NOT NULL)`);
await pool.query(`INSERT INTO ${accounts} (id, balance) VALUES (1, 100)`);
for (const statement of jobs.createTableSql('postgres')) await pool.query(statement);

try {
  const broker = new Broker({ database: pool });
  const payments = jobs.queue<{ account: number; amount: number }>('payments');
  const receipts = jobs.queue<{ account: number; amount: number }>('receipts');

  let hasFailedOnce = false;
  let receiptCount = 0;
  let allReceipted = (): void => undefined;
  const allDone = new Promise<void>((resolve) => (allReceipted = resolve));

  broker.subscribe(
    payments,
    async (message, { tx, publish }) => {
      const { account, amount } = message.payload;
      await tx!.query(`UPDATE ${accounts} SET balance = balance - $1 WHERE id = $2`, [amount, account]);
      await publish(receipts, message.payload, { tx });  // written only if this transaction commits
      if (amount === 30 && !hasFailedOnce) {
        hasFailedOnce = true;
        throw new Error('the card network timed out');  // rolls back the update and the receipt
      }
      return Outcome.ack();                             // commits them with the ack
    },
    { transactional: true, workers: 2, retryBackoff: { initialMs: 100 } },
  );
  broker.subscribe(receipts, (message) => {
    console.log(`receipt: ${message.payload.amount} from account ${message.payload.account}`);
    receiptCount += 1;
    if (receiptCount === 3) allReceipted();
  });
  // A handler that throws is reported here (or to the logger when nobody listens) and retried.
  broker.on('error', (error) => {
    console.log(`a handler failed and will be retried: ${error instanceof Error ? error.message : String(error)}`);
  });
  await broker.start();

  await broker.publishMany(payments, [
    { payload: { account: 1, amount: 10 } },
    { payload: { account: 1, amount: 20 } },
    { payload: { account: 1, amount: 30 } },
  ]);
  await allDone;
  await broker.stop();

  const { rows } = await pool.query<{ balance: number }>(`SELECT balance FROM ${accounts} WHERE id = 1`);
  const balance = rows[0]?.balance;
  console.log(`balance: ${balance} (100 - 10 - 20 - 30), receipts: ${receiptCount}`);
  if (balance !== 40 || receiptCount !== 3) throw new Error('a payment was applied twice or not at all');
} finally {
  await pool.query(`DROP TABLE IF EXISTS ${table}, ${accounts}`);
  await pool.end();
}
