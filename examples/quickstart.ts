import Database from 'better-sqlite3';
import { Broker, defineTable, Outcome } from 'tablequeue';

// 1. Describe the table: which column plays which role. Only `table` and `id` are required.
const emailJobs = defineTable({
  table: 'email_jobs',
  id: 'id',
  group: 'queue',              // one table, many queues
  retryAfter: 'retry_after',   // delays and delayed retries
  attempt: 'attempt',          // needed for maxAttempts
  lockedUntil: 'locked_until', // the lease form (the only form on SQLite)
  headers: 'headers',
  payload: 'payload',
});

// 2. The table belongs to your service: create it with your migrations. createTableSql renders
//    the DDL and the claim-order index for 'postgres', 'mysql', 'mariadb' or 'sqlite'.
const file = process.env.QUICKSTART_DB ?? 'quickstart.db';
const db = new Database(file);                  // your service's own connection
db.exec('DROP TABLE IF EXISTS email_jobs');     // this example starts afresh on every run
for (const statement of emailJobs.createTableSql('sqlite')) db.exec(statement);

// 3. What the handler calls: your own code. This one only says what it would send.
async function sendWelcomeMail(to: string): Promise<void> {
  console.log(`welcome mail to ${to}`);
}

// 4. Subscribe and start.
const broker = new Broker({ database: `sqlite:${file}` });
const welcome = emailJobs.queue<{ to: string }>('welcome');

const published = 4;
let handled = 0;
let allHandled = (): void => undefined;
const allDone = new Promise<void>((resolve) => (allHandled = resolve));

broker.subscribe(
  welcome,
  async (message) => {
    await sendWelcomeMail(message.payload.to);
    handled += 1;
    if (handled === published) allHandled();
    return Outcome.ack();                 // or retry(), retryAfter(ms), drop(); nothing returned acks
  },
  { workers: 4, maxAttempts: 5, deadLetter: 'welcome.failed' },
);
await broker.start();                     // checks the table, prepares every statement

// 5. Publish: one message, several at once, and one inside your own transaction.
await broker.publish(welcome, { to: 'ada@example.com' });
await broker.publishMany(welcome, [
  { payload: { to: 'grace@example.com' } },
  { payload: { to: 'alan@example.com' }, delayMs: 1_000 },  // an item is a payload and publish options
]);
db.exec('BEGIN');
// … your own writes on `db` …
await broker.publish(welcome, { to: 'edsger@example.com' }, { tx: db }); // commits or rolls back with them
db.exec('COMMIT');

// 6. Wait until every message was handled, then stop.
await allDone;
await broker.stop();                      // graceful: handlers finish, waiting rows go back
console.log(`handled ${handled} messages`);
db.exec('DROP TABLE email_jobs');
db.close();
