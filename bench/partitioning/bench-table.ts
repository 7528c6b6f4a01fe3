import { Broker } from '../../src/broker/broker.js';
import { createDriver } from '../../src/driver/create-driver.js';
import type { Driver } from '../../src/driver/driver.js';
import { defineTable, type QueueTable } from '../../src/definition/define-table.js';
import { runSql, type BenchDatabase, type BenchDatabaseName } from '../bench-database.js';

export type BenchForm = 'rowLock' | 'lease';

export const BENCH_FORMS: readonly BenchForm[] = ['rowLock', 'lease'];

export const BENCH_QUEUE_NAME = 'bench';

const TABLE_NAME = 'bench_jobs';

/** Rows per publishMany call while filling (the publisher splits each into inserts of 500 rows). */
const FILL_CHUNK = 5_000;

/**
 * The table every run drains: the roles a typical service declares (delays, attempts, a
 * payload) and, for the lease form, `lockedUntil`. No group: one queue per table. `isKeyed` adds
 * the `dedupeKey` column (unique messages), whose unique index `createTableSql` renders too.
 */
export function createBenchTable(form: BenchForm, options: { readonly isKeyed?: boolean } = {}): QueueTable {
  return defineTable({
    table: TABLE_NAME,
    id: 'id',
    retryAfter: 'retry_after',
    attempt: 'attempt',
    ...(form === 'lease' ? { lockedUntil: 'locked_until' } : {}),
    payload: 'payload',
    ...(options.isKeyed === true ? { dedupeKey: 'dedupe_key' } : {}),
  });
}

export function isFormAvailable(database: BenchDatabaseName, form: BenchForm): boolean {
  return form === 'lease' || database !== 'sqlite';
}

/**
 * Creates the table with its own DDL, publishes `messages` rows through the library and updates
 * the planner's statistics, so every run starts from the same state. Returns the server version.
 */
export async function fillBenchTable(database: BenchDatabase, table: QueueTable, messages: number): Promise<string> {
  const version = await withSetupDriver(database, async (driver) => {
    for (const sql of table.createTableSql(database.name)) await runSql(driver, sql);
    return readServerVersion(driver, database.name);
  });
  const publisher = new Broker({ database: database.url, pool: { max: 2 } });
  await publisher.start();
  try {
    const queue = table.queue<{ n: number }>(BENCH_QUEUE_NAME);
    for (let first = 0; first < messages; first += FILL_CHUNK) {
      const count = Math.min(FILL_CHUNK, messages - first);
      await publisher.publishMany(
        queue,
        Array.from({ length: count }, (_, index) => ({ payload: { n: first + index } })),
      );
    }
  } finally {
    await publisher.stop();
  }
  await withSetupDriver(database, async (driver) => {
    for (const sql of settleStatements(database.name)) await runSql(driver, sql);
  });
  return version;
}

/** Rows still in the table: zero after a complete drain, since every settlement deletes. */
export async function countRemainingRows(database: BenchDatabase): Promise<number> {
  return withSetupDriver(database, async (driver) => {
    const [row] = await runSql(driver, `SELECT COUNT(*) AS remaining FROM ${TABLE_NAME}`);
    return Number(row?.remaining);
  });
}

/**
 * Fresh statistics so the claim's plan does not change when autoanalyze happens to run in the
 * middle of one drain; on Postgres a checkpoint also writes out the fill, so that no drain
 * pays for it.
 */
function settleStatements(database: BenchDatabaseName): string[] {
  switch (database) {
    case 'postgres':
      return [`ANALYZE ${TABLE_NAME}`, 'CHECKPOINT'];
    case 'mariadb':
      return [`ANALYZE TABLE ${TABLE_NAME}`];
    case 'sqlite':
      return ['ANALYZE'];
  }
}

async function readServerVersion(driver: Driver, database: BenchDatabaseName): Promise<string> {
  const sql = database === 'sqlite' ? 'SELECT sqlite_version() AS version' : 'SELECT VERSION() AS version';
  const [row] = await runSql(driver, sql);
  return String(row?.version);
}

async function withSetupDriver<T>(database: BenchDatabase, work: (driver: Driver) => Promise<T>): Promise<T> {
  const driver = createDriver(database.url, { poolSize: 1 });
  await driver.open();
  try {
    return await work(driver);
  } finally {
    await driver.close();
  }
}
