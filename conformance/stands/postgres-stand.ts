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
  const { serverUrl, name, url } = options;
  const admin = new AdminSessions(url, options.admin);
  const drivers: Driver[] = [];
  return {
    brokerDatabase: url,
    url,
    async exec(sql) {
      // The simple query protocol runs several statements in one text.
      await admin.run((client) => client.query(sql));
    },
    async query<Row>(sql: string, params: readonly unknown[] = []) {
      const result = await admin.run((client) => client.query(sql, [...params]));
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
      await admin.end();
      await withServerClient(serverUrl, async (server) => {
        // Sessions a test left behind (a killed driver, a child process) would block the drop.
        await server.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1', [name]);
        await server.query(`DROP DATABASE IF EXISTS ${name}`);
      });
    },
  };
}

/**
 * The test's admin sessions. Queries one after another share one kept session, so "every session
 * but the admin's own" (`pid <> pg_backend_pid()`) still means the sessions under test; a query
 * that arrives while that session is busy (a handler's query beside the test's) gets a session of
 * its own, ended after it: pg 8 deprecates queueing a query behind another on one client, and
 * pg 9 refuses it.
 */
class AdminSessions {
  readonly #url: string;
  readonly #kept: pg.Client;
  #isKeptBusy = false;

  constructor(url: string, kept: pg.Client) {
    this.#url = url;
    this.#kept = kept;
  }

  async run<T>(work: (client: pg.Client) => Promise<T>): Promise<T> {
    if (!this.#isKeptBusy) {
      this.#isKeptBusy = true;
      try {
        return await work(this.#kept);
      } finally {
        this.#isKeptBusy = false;
      }
    }
    const own = await connect(this.#url);
    try {
      return await work(own);
    } finally {
      await own.end().catch(() => undefined);
    }
  }

  async end(): Promise<void> {
    await this.#kept.end().catch(() => undefined);
  }
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
