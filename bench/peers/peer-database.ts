import { runSql, type BenchDatabase } from '../bench-database.js';
import { createDriver } from '../../src/driver/create-driver.js';

/**
 * Reads one number from the run's database through the library's driver (never the peer's own
 * connection): how many of a peer's jobs are left, checked the same way for every peer.
 */
export async function readCount(database: BenchDatabase, sql: string): Promise<number> {
  const [row] = await queryOnce(database, sql);
  return Number(Object.values(row ?? {})[0]);
}

export async function readServerVersion(database: BenchDatabase): Promise<string> {
  const sql = database.name === 'sqlite' ? 'SELECT sqlite_version() AS version' : 'SELECT VERSION() AS version';
  const [row] = await queryOnce(database, sql);
  return String(row?.version);
}

async function queryOnce(database: BenchDatabase, sql: string): Promise<Record<string, unknown>[]> {
  const driver = createDriver(database.url, { poolSize: 1 });
  await driver.open();
  try {
    return await runSql(driver, sql);
  } finally {
    await driver.close();
  }
}

/** Runs administration SQL (a growth backlog's fill) on the run's database, one statement after another. */
export async function runOnPeerDatabase(database: BenchDatabase, statements: readonly string[]): Promise<void> {
  const driver = createDriver(database.url, { poolSize: 1 });
  await driver.open();
  try {
    for (const sql of statements) await runSql(driver, sql);
  } finally {
    await driver.close();
  }
}

/** The SQLite file behind a run's `sqlite:<path>` URL. */
export function sqliteFileOf(database: BenchDatabase): string {
  return database.url.replace(/^sqlite:/, '');
}

/** How long a peer may take to record the last completions after its last handler call. */
const COMPLETION_GRACE_MS = 10_000;
const COMPLETION_POLL_MS = 50;

/**
 * Waits, before the peer is stopped, until `countSql` reads zero (or the grace runs out): a peer
 * records a completion after its handler returns, and stopping it at the last handler call could
 * cut off the last completions. The drain's timing ends at the last handler call regardless.
 */
export async function untilNoneLeft(database: BenchDatabase, countSql: string): Promise<void> {
  const driver = createDriver(database.url, { poolSize: 1 });
  await driver.open();
  try {
    const deadline = performance.now() + COMPLETION_GRACE_MS;
    while (performance.now() < deadline) {
      const [row] = await runSql(driver, countSql);
      if (Number(Object.values(row ?? {})[0]) === 0) return;
      await new Promise((resolve) => setTimeout(resolve, COMPLETION_POLL_MS));
    }
  } finally {
    await driver.close();
  }
}
