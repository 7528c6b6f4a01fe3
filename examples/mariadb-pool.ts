// MariaDB (or MySQL) with the application's own mysql2 pool, in the lease form: a claim stamps
// locked_until and commits at once, so a handler holds no connection while it runs. A message
// that keeps failing moves to a dead-letter queue after maxAttempts.
import mysql from 'mysql2/promise';
import { Broker, defineTable, Outcome } from 'tablequeue';

const pool = mysql.createPool({ uri: process.env.MARIADB_URL ?? 'mysql://root@127.0.0.1:3306/test', connectionLimit: 5 });

// A table of its own for every run, dropped at the end.
const table = `shipment_jobs_${process.pid}`;
const shipmentJobs = defineTable({
  table,
  id: 'id',
  group: 'queue',
  priority: 'priority',        // smaller first
  retryAfter: 'retry_after',
  attempt: 'attempt',
  lockedUntil: 'locked_until',
  headers: 'headers',
  payload: 'payload',
});
for (const statement of shipmentJobs.createTableSql('mariadb')) await pool.query(statement);

try {
  const broker = new Broker({ database: pool });
  const shipments = shipmentJobs.queue<{ parcel: string }>('ship');

  const maxAttempts = 3;
  const shipped: string[] = [];
  let lostParcelAttempts = 0;
  let finish = (): void => undefined;
  const finished = new Promise<void>((resolve) => (finish = resolve));
  broker.subscribe(
    shipments,
    (message) => {
      if (message.payload.parcel === 'lost') {
        lostParcelAttempts = message.attempt;
        console.log(`parcel lost, attempt ${message.attempt} of ${maxAttempts}`);
        if (shipped.length === 3 && lostParcelAttempts === maxAttempts) finish();
        return Outcome.retryAfter(50);  // at the last attempt the row moves to 'ship.dead' instead
      }
      shipped.push(message.payload.parcel);
      console.log(`shipped ${message.payload.parcel}`);
      if (shipped.length === 3 && lostParcelAttempts === maxAttempts) finish();
      return Outcome.ack();
    },
    { workers: 4, maxAttempts, deadLetter: 'ship.dead' },
  );
  await broker.start();

  await broker.publishMany(shipments, [
    { payload: { parcel: 'books' } },
    { payload: { parcel: 'lamp' }, priority: -1 },  // claimed before rows of the default priority 0
    { payload: { parcel: 'lost' } },
  ]);

  // The application's own transaction on one of its pool's connections.
  const connection = await pool.getConnection();
  try {
    await connection.beginTransaction();
    await broker.publish(shipments, { parcel: 'chair' }, { tx: connection });
    await connection.commit();
  } finally {
    connection.release();
  }

  // stop() lets the last outcomes settle: the lost parcel's move to the dead-letter queue too.
  await finished;
  await broker.stop();
  const [rows] = await pool.query(`SELECT COUNT(*) AS n FROM ${table} WHERE queue = 'ship.dead'`);
  const deadLetters = Number((rows as { n: number }[])[0]?.n);
  console.log(`shipped ${shipped.sort().join(', ')}; dead letters: ${deadLetters}`);
  if (deadLetters !== 1) throw new Error(`expected the lost parcel in 'ship.dead', found ${deadLetters} rows there`);
} finally {
  await pool.query(`DROP TABLE IF EXISTS ${table}`);
  await pool.end();
}
