import mysql from 'mysql2/promise';
import { createDialect } from '../../src/dialect/create-dialect.js';
import { createDriver } from '../../src/driver/create-driver.js';
import { parseDatabaseUrl } from '../../src/driver/database-url.js';
import type { Driver } from '../../src/driver/driver.js';
import type { Stand, TestDatabase } from '../stand.js';
import { createTestDatabaseName, urlWithDatabase } from './test-database-name.js';

export interface MysqlFamilyStandOptions {
  /** `galera`: MariaDB nodes of a Galera cluster. */
  readonly name: 'mysql' | 'mariadb' | 'galera';
  /** A server URL (`mysql://…` or `mariadb://…`); its database only serves to connect. */
  readonly serverUrl: string;
  /** Where the stand's brokers cannot do what the dialect can (a Galera node's session locks). */
  readonly capabilities?: Partial<Stand['capabilities']>;
  /** What every broker of the stand declares (see `TestDatabase.brokerOptions`). */
  readonly brokerOptions?: TestDatabase['brokerOptions'];
}

const REACH_TIMEOUT_MS = 2_000;

/**
 * A MySQL or MariaDB server where each test gets a database of its own. A MySQL stand is this
 * factory with `name: 'mysql'` and a MySQL 8 URL.
 */
export function createMysqlFamilyStand(options: MysqlFamilyStandOptions): Stand {
  const { name, serverUrl, brokerOptions } = Object.freeze({ ...options });
  const flavor = name === 'mysql' ? 'mysql' : 'mariadb';
  return {
    name,
    kind: 'mysql',
    ddlDialect: flavor,
    capabilities: { ...createDialect(flavor).capabilities, supportsProcesses: true, ...options.capabilities },
    async isReachable() {
      try {
        const connection = await connect(serverUrl, { connectTimeout: REACH_TIMEOUT_MS });
        await connection.end();
        return true;
      } catch {
        return false;
      }
    },
    async createDatabase() {
      const database = createTestDatabaseName();
      await withServerConnection(serverUrl, (server) => server.query(`CREATE DATABASE ${database}`));
      const url = urlWithDatabase(serverUrl, database);
      const admin = await connect(url, { multipleStatements: true });
      return openTestDatabase({ serverUrl, database, url, admin, brokerOptions });
    },
  };
}

function openTestDatabase(options: {
  serverUrl: string;
  database: string;
  url: string;
  admin: mysql.Connection;
  brokerOptions: TestDatabase['brokerOptions'];
}): TestDatabase {
  const { serverUrl, database, url, admin, brokerOptions } = options;
  const drivers: Driver[] = [];
  return {
    brokerDatabase: url,
    url,
    ...(brokerOptions === undefined ? {} : { brokerOptions }),
    async exec(sql) {
      await admin.query(sql);
    },
    async query<Row>(sql: string, params: readonly unknown[] = []) {
      const [rows] = await admin.query(sql, [...params]);
      return (Array.isArray(rows) ? rows : []) as Row[];
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
      await withServerConnection(serverUrl, async (server) => {
        // Sessions a test left behind would hold metadata locks that block the drop.
        const [sessions] = await server.query(
          'SELECT ID AS id FROM information_schema.PROCESSLIST WHERE DB = ? AND ID <> CONNECTION_ID()',
          [database],
        );
        for (const { id } of sessions as { id: number | string }[]) {
          await server.query(`KILL ${Number(id)}`).catch(() => undefined);
        }
        await server.query(`DROP DATABASE IF EXISTS ${database}`);
      });
    },
  };
}

/** An admin connection that reads values the way the driver does (UTC, big numbers as text). */
async function connect(
  url: string,
  extra: { connectTimeout?: number; multipleStatements?: boolean } = {},
): Promise<mysql.Connection> {
  const location = parseDatabaseUrl(url);
  if (location.kind !== 'mysql') throw new Error(`not a mysql URL: ${location.kind}`);
  const connection = await mysql.createConnection({
    host: location.host,
    port: location.port,
    user: location.user,
    password: location.password,
    database: location.database,
    timezone: 'Z',
    supportBigNumbers: true,
    bigNumberStrings: true,
    dateStrings: false,
    ...extra,
  });
  // A test that kills sessions may end this one too; its next query reports that.
  connection.on('error', () => undefined);
  return connection;
}

async function withServerConnection<T>(serverUrl: string, work: (server: mysql.Connection) => Promise<T>): Promise<T> {
  const server = await connect(serverUrl);
  try {
    return await work(server);
  } finally {
    await server.end();
  }
}
