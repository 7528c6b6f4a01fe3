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
/**
 * The key of the one untimed publish every keyed run starts with: the first keyed publish of a
 * broker also checks the table's unique index (MySQL and MariaDB read information_schema, once
 * per table), which is no part of a publish's steady cost. The duplicates repeat this key.
 */
const FIRST_KEY = 'first';

/**
 * How rows are written: the library's publish calls (`service`); the same into a table with a
 * dedupe key column, every row with a key of its own (`keyed`); every publish with the key a row
 * already holds, so each is a duplicate and writes nothing (`keyedDuplicate`, one at a time
 * only); or the plain publish's statements by hand (`raw`).
 */
export type PublishVariant = 'service' | 'keyed' | 'keyedDuplicate' | 'raw';
/**
 * One message per call, awaited before the next; `PUBLISHES_AT_ONCE` such callers at once (an
 * HTTP service whose requests each publish); or `publishMany` in calls of 1,000.
 */
export type PublishMode = 'one' | 'atOnce' | 'many';

/** Callers publishing one message at a time side by side in the `atOnce` mode. */
export const PUBLISHES_AT_ONCE = 64;

/** How reports and progress lines name each mode. */
export const PUBLISH_MODE_LABELS: Readonly<Record<PublishMode, string>> = {
  one: 'one at a time',
  atOnce: `one at a time, ${PUBLISHES_AT_ONCE} callers at once`,
  many: 'publishMany, calls of 1,000',
};

/** Runs `publish(n)` for n from 0 to `rows - 1` from `PUBLISHES_AT_ONCE` callers, each awaiting its last. */
async function publishAtOnce(rows: number, publish: (n: number) => Promise<unknown>): Promise<void> {
  let next = 0;
  const caller = async (): Promise<void> => {
    for (let n = next++; n < rows; n = next++) await publish(n);
  };
  await Promise.all(Array.from({ length: PUBLISHES_AT_ONCE }, caller));
}

/** How reports and progress lines name each variant. */
export const PUBLISH_VARIANT_LABELS: Readonly<Record<PublishVariant, string>> = {
  service: 'tablequeue',
  keyed: 'tablequeue, keyed (a key per row)',
  keyedDuplicate: 'tablequeue, keyed, one held key (duplicates)',
  raw: 'raw statements',
};

export interface PublishMeasurement {
  /** Publishes timed: rows written, or for `keyedDuplicate` duplicates answered. */
  readonly rows: number;
  readonly seconds: number;
  readonly rowsPerSecond: number;
  /** Rows in the table afterwards. */
  readonly counted: number;
  /**
   * Rows the table holds when every publish did what it should: `rows`, one more for the keyed
   * run's first publish, or that one alone for the duplicates.
   */
  readonly expected: number;
}

/**
 * Writes `rows` rows into a fresh lease table of `database` and times it. The service publishes
 * through a broker as an application does (on Postgres each write also sends the table's
 * NOTIFY, since listen is on by default for a URL); the raw variant binds the dialect's own
 * insert (and notify) statements and runs them on the same driver, one connection per call.
 * The keyed variants publish into the same table with a `dedupeKey` column and its unique index.
 */
export async function measurePublish(
  database: BenchDatabase,
  variant: PublishVariant,
  mode: PublishMode,
  rows: number,
): Promise<PublishMeasurement> {
  if (variant === 'keyedDuplicate' && mode !== 'one') throw new Error('duplicates are measured one publish at a time');
  if (isKeyedVariant(variant) && mode === 'atOnce') throw new Error('keyed publishes are measured one at a time and through publishMany');
  const table = createBenchTable('lease', { isKeyed: isKeyedVariant(variant) });
  const setup = createDriver(database.url, { poolSize: 1 });
  await setup.open();
  try {
    for (const sql of table.createTableSql(database.name)) await runSql(setup, sql);
  } finally {
    await setup.close();
  }
  const seconds = variant === 'raw' ? await publishWithRawStatements(database, mode, rows) : await publishWithService(database, variant, mode, rows);
  const counter = createDriver(database.url, { poolSize: 1 });
  await counter.open();
  try {
    const [row] = await runSql(counter, `SELECT COUNT(*) AS counted FROM ${table.spec.qualifiedName}`);
    const expected = variant === 'keyedDuplicate' ? 1 : variant === 'keyed' ? rows + 1 : rows;
    return { rows, seconds, rowsPerSecond: seconds > 0 ? rows / seconds : 0, counted: Number(row?.counted), expected };
  } finally {
    await counter.close();
  }
}

function isKeyedVariant(variant: PublishVariant): boolean {
  return variant === 'keyed' || variant === 'keyedDuplicate';
}

/**
 * Publishes through a started broker; returns the seconds the publishing took (start and stop not
 * counted). Keyed runs start with one untimed publish of `FIRST_KEY`; then `keyed` publishes
 * `rows` rows with keys `k0`, `k1`, …, and `keyedDuplicate` publishes `FIRST_KEY` `rows` times
 * more. Each answer is checked, so a run counts only when every publish said what it should.
 */
async function publishWithService(database: BenchDatabase, variant: PublishVariant, mode: PublishMode, rows: number): Promise<number> {
  const broker = new Broker({ database: database.url, pool: { max: 2 } });
  await broker.start();
  try {
    const queue = createBenchTable('lease', { isKeyed: isKeyedVariant(variant) }).queue<{ n: number }>(BENCH_QUEUE_NAME);
    const holder = isKeyedVariant(variant) ? await broker.publish(queue, { n: -1 }, { dedupeKey: FIRST_KEY }) : undefined;
    if (holder !== undefined && holder.status !== 'published') throw new Error(`the first publish of key ${FIRST_KEY} said ${holder.status}, not published`);
    const startedAt = performance.now();
    if (mode === 'one' && variant === 'service') {
      for (let n = 0; n < rows; n += 1) await broker.publish(queue, { n });
    } else if (mode === 'atOnce') {
      await publishAtOnce(rows, (n) => broker.publish(queue, { n }));
    } else if (mode === 'one' && variant === 'keyed') {
      for (let n = 0; n < rows; n += 1) {
        const result = await broker.publish(queue, { n }, { dedupeKey: `k${n}` });
        if (result.status !== 'published') throw new Error(`publish of key k${n} said ${result.status}, not published`);
      }
    } else if (mode === 'one') {
      for (let n = 1; n <= rows; n += 1) {
        const result = await broker.publish(queue, { n }, { dedupeKey: FIRST_KEY });
        if (result.status !== 'duplicate' || result.id !== holder?.id) {
          throw new Error(`publish ${n} of the held key ${FIRST_KEY} said ${result.status} with id ${result.id}, not a duplicate of ${holder?.id}`);
        }
      }
    } else {
      const isKeyed = variant === 'keyed';
      for (let first = 0; first < rows; first += PUBLISH_MANY_CALL) {
        const count = Math.min(PUBLISH_MANY_CALL, rows - first);
        const items = Array.from({ length: count }, (_, index) => ({
          payload: { n: first + index },
          ...(isKeyed ? { dedupeKey: `k${first + index}` } : {}),
        }));
        const written = await broker.publishMany(queue, items);
        if (written !== count) throw new Error(`publishMany wrote ${written} of ${count} rows`);
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
    } else if (mode === 'atOnce') {
      await publishAtOnce(rows, (n) => write(driver, [insert(n, 1)], notify));
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
