import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import Database from 'better-sqlite3';
import { createDialect } from '../../src/dialect/create-dialect.js';
import { createDriver } from '../../src/driver/create-driver.js';
import type { Driver } from '../../src/driver/driver.js';
import type { Stand, TestDatabase } from '../stand.js';

const BUSY_RETRY_MS = 2;
const BUSY_GIVE_UP_MS = 10_000;

/** A fresh database file in the temporary directory per test; other processes can open it. */
export const sqliteFileStand: Stand = {
  name: 'sqlite-file',
  kind: 'sqlite',
  ddlDialect: 'sqlite',
  capabilities: { ...createDialect('sqlite').capabilities, supportsProcesses: true },
  isReachable: () => Promise.resolve(true),
  async createDatabase() {
    const directory = await mkdtemp(join(tmpdir(), 'tq-test-'));
    const file = join(directory, 'queue.db');
    const url = `sqlite:${file}`;
    // The admin handle waits for locks the way the driver does: asynchronously, so that a
    // broker in this process can commit what it holds.
    const admin = new Database(file, { timeout: 0 });
    admin.pragma('journal_mode = WAL');
    return openTestDatabase({
      brokerDatabase: url,
      url,
      admin,
      createDriver: (poolSize) => createDriver(url, { poolSize }),
      removeFiles: () => rm(directory, { recursive: true, force: true }),
    });
  },
};

/** One in-memory handle per test, shared by the broker and the admin queries. */
export const sqliteMemoryStand: Stand = {
  name: 'sqlite-memory',
  kind: 'sqlite',
  ddlDialect: 'sqlite',
  capabilities: { ...createDialect('sqlite').capabilities, supportsProcesses: false },
  isReachable: () => Promise.resolve(true),
  async createDatabase() {
    const handle = new Database(':memory:');
    return openTestDatabase({
      brokerDatabase: handle,
      url: undefined,
      admin: handle,
      createDriver: () => createDriver(handle),
      removeFiles: () => Promise.resolve(),
    });
  },
};

function openTestDatabase(options: {
  brokerDatabase: unknown;
  url: string | undefined;
  admin: Database.Database;
  createDriver: (poolSize: number | undefined) => Driver;
  removeFiles: () => Promise<void>;
}): TestDatabase {
  const { admin } = options;
  const drivers: Driver[] = [];
  return {
    brokerDatabase: options.brokerDatabase,
    url: options.url,
    async exec(sql) {
      await whileBusy(() => admin.exec(sql));
    },
    async query<Row>(sql: string, params: readonly unknown[] = []) {
      const values = params.map(toSqliteValue);
      return whileBusy(() => {
        const statement = admin.prepare(sql);
        if (statement.reader) return statement.all(values) as Row[];
        statement.run(values);
        return [];
      });
    },
    async openDriver(driverOptions) {
      const driver = options.createDriver(driverOptions?.poolSize);
      drivers.push(driver);
      await driver.open();
      return driver;
    },
    async drop() {
      await Promise.allSettled(drivers.map((driver) => driver.close()));
      admin.close();
      await options.removeFiles();
    },
  };
}

/** Times are stored as fixed-width UTC text (the layout of strftime('%Y-%m-%dT%H:%M:%f+00:00')). */
function toSqliteValue(value: unknown): unknown {
  if (value instanceof Date) return value.toISOString().replace('Z', '+00:00');
  if (typeof value === 'boolean') return value ? 1 : 0;
  return value ?? null;
}

async function whileBusy<T>(attempt: () => T): Promise<T> {
  const startedAt = Date.now();
  for (;;) {
    try {
      return attempt();
    } catch (error) {
      const code = (error as { code?: unknown }).code;
      const isBusy = typeof code === 'string' && code.startsWith('SQLITE_BUSY');
      if (!isBusy || Date.now() - startedAt > BUSY_GIVE_UP_MS) throw error;
    }
    await delay(BUSY_RETRY_MS);
  }
}
