import pg from 'pg';
import { createDialect } from '../../src/dialect/create-dialect.js';
import { createDriver } from '../../src/driver/create-driver.js';
import type { Driver, PoolerMode } from '../../src/driver/driver.js';
import type { Stand, TestDatabase } from '../stand.js';
import { postgresStand } from './postgres-stand.js';
import { urlWithDatabase } from './test-database-name.js';

export const PGBOUNCER_TRANSACTION_URL_VARIABLE = 'PGBOUNCER_TRANSACTION_URL';
export const PGBOUNCER_SESSION_URL_VARIABLE = 'PGBOUNCER_SESSION_URL';
/** The ports .ci/run starts PgBouncer on, in front of the Postgres stand's server. */
const DEFAULT_TRANSACTION_URL = 'postgres://postgres@127.0.0.1:6442/postgres';
const DEFAULT_SESSION_URL = 'postgres://postgres@127.0.0.1:6443/postgres';
const REACH_TIMEOUT_MS = 2_000;

/**
 * The Postgres stand's server through PgBouncer in one pool mode. Each test's database is created
 * and dropped on the server itself (the test's admin queries go there too, so their sessions are
 * the server's); brokers, drivers and service pools reach it through the pooler. Every broker of
 * the transaction stand declares `pooler: 'transaction'` and listens on the server itself.
 */
export function createPgBouncerStand(options: { mode: PoolerMode; bouncerUrl: string; server: Stand }): Stand {
  const { mode, bouncerUrl, server } = options;
  return {
    name: `pgbouncer-${mode}`,
    kind: 'postgres',
    ddlDialect: 'postgres',
    capabilities: {
      ...createDialect('postgres').capabilities,
      supportsProcesses: true,
      // Session locks stay on a server session that serves other clients between transactions.
      supportsSessionLocks: mode === 'session',
    },
    pooler: mode,
    async isReachable() {
      if (!(await server.isReachable())) return false;
      const client = new pg.Client({ connectionString: bouncerUrl, connectionTimeoutMillis: REACH_TIMEOUT_MS });
      client.on('error', () => undefined);
      try {
        await client.connect();
        await client.query('SELECT 1');
        return true;
      } catch {
        return false;
      } finally {
        await client.end().catch(() => undefined);
      }
    },
    async createDatabase(): Promise<TestDatabase> {
      const onServer = await server.createDatabase();
      const serverUrl = onServer.url!;
      const url = urlWithDatabase(bouncerUrl, new URL(serverUrl).pathname.slice(1));
      const drivers: Driver[] = [];
      return {
        ...onServer,
        brokerDatabase: url,
        url,
        brokerOptions: mode === 'transaction' ? { pooler: 'transaction', listen: { url: serverUrl } } : {},
        async openDriver(driverOptions) {
          const driver = createDriver(url, { poolSize: driverOptions?.poolSize, pooler: mode });
          drivers.push(driver);
          await driver.open();
          return driver;
        },
        async drop() {
          await Promise.allSettled(drivers.map((driver) => driver.close()));
          await onServer.drop();
        },
      };
    },
  };
}

export const pgbouncerTransactionStand = createPgBouncerStand({
  mode: 'transaction',
  bouncerUrl: process.env[PGBOUNCER_TRANSACTION_URL_VARIABLE] ?? DEFAULT_TRANSACTION_URL,
  server: postgresStand,
});

export const pgbouncerSessionStand = createPgBouncerStand({
  mode: 'session',
  bouncerUrl: process.env[PGBOUNCER_SESSION_URL_VARIABLE] ?? DEFAULT_SESSION_URL,
  server: postgresStand,
});
