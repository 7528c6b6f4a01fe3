import pg from 'pg';
import { createDialect } from '../../src/dialect/create-dialect.js';
import { createDriver } from '../../src/driver/create-driver.js';
import type { Driver } from '../../src/driver/driver.js';
import type { Stand, TestDatabase } from '../stand.js';
import { createTestDatabaseName, urlWithDatabase } from './test-database-name.js';

export const POSTGRES_URL_VARIABLE = 'POSTGRES_URL';
const DEFAULT_POSTGRES_URL = 'postgres://postgres@127.0.0.1:5432/postgres';
const REACH_TIMEOUT_MS = 2_000;

/** A Postgres server where each test gets a database of its own, dropped afterwards. */
export function createPostgresStand(serverUrl: string): Stand {
  return {
    name: 'postgres',
    kind: 'postgres',
    ddlDialect: 'postgres',
    capabilities: { ...createDialect('postgres').capabilities, supportsProcesses: true },
    async isReachable() {
      const client = new pg.Client({ connectionString: serverUrl, connectionTimeoutMillis: REACH_TIMEOUT_MS });
      try {
        await client.connect();
        return true;
      } catch {
        return false;
      } finally {
        await client.end().catch(() => undefined);
      }
    },
    async createDatabase() {
      const name = createTestDatabaseName();
      await withServerClient(serverUrl, (server) => server.query(`CREATE DATABASE ${name}`));
      const url = urlWithDatabase(serverUrl, name);
      const admin = await connect(url);
      return openTestDatabase({ serverUrl, name, url, admin });
    },
  };
}

export const postgresStand = createPostgresStand(process.env[POSTGRES_URL_VARIABLE] ?? DEFAULT_POSTGRES_URL);

function openTestDatabase(options: { serverUrl: string; name: string; url: string; admin: pg.Client }): TestDatabase {
  const { serverUrl, name, url, admin } = options;
  const drivers: Driver[] = [];
  return {
    brokerDatabase: url,
    url,
    async exec(sql) {
      // The simple query protocol runs several statements in one text.
      await admin.query(sql);
    },
    async query<Row>(sql: string, params: readonly unknown[] = []) {
      const result = await admin.query(sql, [...params]);
      return result.rows as Row[];
    },
    async openDriver(driverOptions) {
      const driver = createDriver(url, { poolSize: driverOptions?.poolSize });
      drivers.push(driver);
      await driver.open();
      return driver;
    },
    async drop() {
      await Promise.allSettled(drivers.map((driver) => driver.close()));
      await admin.end().catch(() => undefined);
      await withServerClient(serverUrl, async (server) => {
        // Sessions a test left behind (a killed driver, a child process) would block the drop.
        await server.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1', [name]);
        await server.query(`DROP DATABASE IF EXISTS ${name}`);
      });
    },
  };
}

async function connect(url: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url });
  // A test that terminates sessions may end this one too; its next query reports that.
  client.on('error', () => undefined);
  await client.connect();
  return client;
}

async function withServerClient<T>(serverUrl: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = await connect(serverUrl);
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}
