import { Broker } from '../../src/broker/broker.js';
import { createDialect } from '../../src/dialect/create-dialect.js';
import { createDriver } from '../../src/driver/create-driver.js';
import type { Driver } from '../../src/driver/driver.js';
import { bindPositional, bindStatement, type BoundStatement, type Statement } from '../../src/statement.js';
import { runSql, type BenchDatabase } from '../bench-database.js';
import { BENCH_QUEUE_NAME, createBenchTable } from '../partitioning/bench-table.js';
import { settlesWithin } from '../partitioning/drain-watch.js';

/** Items per `publishMany` call: the same calls of 1,000 the peers' bulk inserts are timed with. */
export const PUBLISH_MANY_CALL = 1_000;
/** Rows per multi-row insert statement, as the library's publisher writes them. */
const ROWS_PER_INSERT = 500;
const CLOSE_GRACE_MS = 10_000;

/** How rows are written: the library's publish calls, or the same statements by hand. */
export type PublishVariant = 'service' | 'raw';
/** One message per call, awaited before the next; or `publishMany` in calls of 1,000. */
export type PublishMode = 'one' | 'many';

export interface PublishMeasurement {
  readonly rows: number;
  readonly seconds: number;
  readonly rowsPerSecond: number;
  /** Rows in the table afterwards: equal to `rows` when every write landed once. */
  readonly counted: number;
}

/**
 * Writes `rows` rows into a fresh lease table of `database` and times it. The service publishes
 * through a broker as an application does (on Postgres each write also sends the table's
 * NOTIFY, since listen is on by default for a URL); the raw variant binds the dialect's own
 * insert (and notify) statements and runs them on the same driver, one connection per call.
 */
export async function measurePublish(
  database: BenchDatabase,
  variant: PublishVariant,
  mode: PublishMode,
  rows: number,
): Promise<PublishMeasurement> {
  const table = createBenchTable('lease');
  const setup = createDriver(database.url, { poolSize: 1 });
  await setup.open();
  try {
    for (const sql of table.createTableSql(database.name)) await runSql(setup, sql);
  } finally {
    await setup.close();
  }
  const seconds = variant === 'service' ? await publishWithService(database, mode, rows) : await publishWithRawStatements(database, mode, rows);
  const counter = createDriver(database.url, { poolSize: 1 });
  await counter.open();
  try {
    const [row] = await runSql(counter, `SELECT COUNT(*) AS counted FROM ${table.spec.qualifiedName}`);
    return { rows, seconds, rowsPerSecond: seconds > 0 ? rows / seconds : 0, counted: Number(row?.counted) };
  } finally {
    await counter.close();
  }
}

/** Publishes through a started broker; returns the seconds the publishing took (start and stop not counted). */
async function publishWithService(database: BenchDatabase, mode: PublishMode, rows: number): Promise<number> {
  const broker = new Broker({ database: database.url, pool: { max: 2 } });
  await broker.start();
  try {
    const queue = createBenchTable('lease').queue<{ n: number }>(BENCH_QUEUE_NAME);
    const startedAt = performance.now();
    if (mode === 'one') {
      for (let n = 0; n < rows; n += 1) await broker.publish(queue, { n });
    } else {
      for (let first = 0; first < rows; first += PUBLISH_MANY_CALL) {
        const count = Math.min(PUBLISH_MANY_CALL, rows - first);
        await broker.publishMany(queue, Array.from({ length: count }, (_, index) => ({ payload: { n: first + index } })));
      }
    }
    return (performance.now() - startedAt) / 1000;
  } finally {
    await settlesWithin(broker.stop(), CLOSE_GRACE_MS);
  }
}

/**
 * The publisher's statements by hand: the multi-row insert over the table's retryAfter and
 * payload columns (due now, the payload as JSON bytes), 500 rows per statement, then the
 * table's notification where the database has one; per call, one pooled connection.
 */
async function publishWithRawStatements(database: BenchDatabase, mode: PublishMode, rows: number): Promise<number> {
  const dialect = createDialect(database.name);
  const spec = createBenchTable('lease').spec;
  const columns = [spec.retryAfter!, spec.payload!];
  const notify = dialect.notify && bindStatement(dialect.notify.notify(), { channel: dialect.notify.channel(spec), group: '' });
  const driver = createDriver(database.url, { poolSize: 2 });
  await driver.open();
  const rowValues = (n: number) => [new Date(), Buffer.from(JSON.stringify({ n }))];
  // Rendered once per row count, as the publisher caches its statements.
  const statements = new Map<number, Statement>();
  const insert = (first: number, count: number): BoundStatement => {
    let statement = statements.get(count);
    if (statement === undefined) statements.set(count, (statement = dialect.insert.rows(spec, columns, count)));
    const values = Array.from({ length: count }, (_, index) => rowValues(first + index)).flat();
    return bindPositional(statement, values);
  };
  try {
    const startedAt = performance.now();
    if (mode === 'one') {
      for (let n = 0; n < rows; n += 1) await write(driver, [insert(n, 1)], notify);
    } else {
      for (let first = 0; first < rows; first += PUBLISH_MANY_CALL) {
        const count = Math.min(PUBLISH_MANY_CALL, rows - first);
        const inserts: BoundStatement[] = [];
        for (let offset = 0; offset < count; offset += ROWS_PER_INSERT) {
          inserts.push(insert(first + offset, Math.min(ROWS_PER_INSERT, count - offset)));
        }
        await write(driver, inserts, notify);
      }
    }
    return (performance.now() - startedAt) / 1000;
  } finally {
    await settlesWithin(driver.close(), CLOSE_GRACE_MS);
  }
}

async function write(driver: Driver, statements: readonly BoundStatement[], notify: BoundStatement | undefined): Promise<void> {
  const connection = await driver.acquire();
  try {
    for (const statement of statements) await connection.execute(statement);
    if (notify !== undefined) await connection.execute(notify);
    connection.release();
  } catch (error) {
    connection.destroy();
    throw error;
  }
}
