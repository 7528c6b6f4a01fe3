import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createDriver } from '../src/driver/create-driver.js';
import type { Driver } from '../src/driver/driver.js';

export type BenchDatabaseName = 'postgres' | 'mariadb' | 'sqlite';

export const BENCH_DATABASE_NAMES: readonly BenchDatabaseName[] = ['postgres', 'mariadb', 'sqlite'];

/** The servers a benchmark creates its databases on. */
export interface BenchServers {
  readonly postgresUrl: string;
  readonly mariadbUrl: string;
}

export const DEFAULT_POSTGRES_URL = 'postgres://postgres@127.0.0.1:5432/postgres';
export const DEFAULT_MARIADB_URL = 'mysql://root@127.0.0.1:3306/test';

/** A database that exists for one run only. */
export interface BenchDatabase {
  readonly name: BenchDatabaseName;
  /** What `new Broker({ database })` and `createDriver` take. */
  readonly url: string;
  /** Ends every session still open on it and removes it. */
  drop(): Promise<void>;
}

/** The benchmark creates and drops databases: it refuses any server that is not this machine. */
export function assertLoopback(url: string): void {
  const host = new URL(url).hostname;
  const isLoopback = host === 'localhost' || host === '[::1]' || /^127\.\d+\.\d+\.\d+$/.test(host);
  if (!isLoopback) {
    throw new Error(`the benchmark only runs against servers on this machine (127.0.0.1); ${url} names ${host}`);
  }
}

/** Fails with the driver's `ConnectionError` (naming the host) when a server does not answer. */
export async function assertReachable(name: BenchDatabaseName, servers: BenchServers): Promise<void> {
  if (name === 'sqlite') return;
  const serverUrl = name === 'postgres' ? servers.postgresUrl : servers.mariadbUrl;
  assertLoopback(serverUrl);
  await withServerDriver(serverUrl, () => Promise.resolve());
}

/** A fresh, empty database: a new database on the server, or a new SQLite file in the temporary directory. */
export async function createBenchDatabase(name: BenchDatabaseName, servers: BenchServers): Promise<BenchDatabase> {
  switch (name) {
    case 'postgres':
      return createServerDatabase(name, servers.postgresUrl, {
        endSessions: {
          sql: 'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()',
        },
      });
    case 'mariadb':
      return createServerDatabase(name, servers.mariadbUrl, {
        endSessions: {
          sql: 'SELECT ID AS id FROM information_schema.PROCESSLIST WHERE DB = ? AND ID <> CONNECTION_ID()',
          killEach: (id) => `KILL ${Number(id)}`,
        },
      });
    case 'sqlite': {
      const directory = await mkdtemp(join(tmpdir(), 'tq-bench-'));
      return {
        name,
        url: `sqlite:${join(directory, 'queue.db')}`,
        drop: () => rm(directory, { recursive: true, force: true }),
      };
    }
  }
}

/**
 * How to end the sessions left on a database before dropping it (a run that timed out may leave
 * some): Postgres terminates them in the query itself; MariaDB lists them and kills each.
 */
interface SessionEnding {
  readonly sql: string;
  readonly killEach?: (id: unknown) => string;
}

async function createServerDatabase(
  name: BenchDatabaseName,
  serverUrl: string,
  options: { endSessions: SessionEnding },
): Promise<BenchDatabase> {
  assertLoopback(serverUrl);
  const database = `tq_bench_${randomBytes(6).toString('hex')}`;
  await withServerDriver(serverUrl, (server) => runSql(server, `CREATE DATABASE ${database}`));
  const url = new URL(serverUrl);
  url.pathname = `/${database}`;
  return {
    name,
    url: url.toString(),
    drop: () =>
      withServerDriver(serverUrl, async (server) => {
        const { sql, killEach } = options.endSessions;
        const sessions = (await server.execute({ name: 'bench.sessions', sql, values: [database] })).rows;
        if (killEach !== undefined) {
          for (const { id } of sessions) await runSql(server, killEach(id)).catch(() => undefined);
        }
        await runSql(server, `DROP DATABASE IF EXISTS ${database}`);
      }),
  };
}

async function withServerDriver<T>(serverUrl: string, work: (server: Driver) => Promise<T>): Promise<T> {
  const server = createDriver(serverUrl, { poolSize: 1 });
  await server.open();
  try {
    return await work(server);
  } finally {
    await server.close();
  }
}

/** Runs SQL text the benchmark writes itself (administration, never the statements it measures). */
export async function runSql(driver: Driver, sql: string): Promise<Record<string, unknown>[]> {
  return (await driver.execute({ name: 'bench.admin', sql, values: [] })).rows;
}
