import { DeclarationError, UnsupportedError } from '../errors.js';
import { BetterSqlite3Driver } from './better-sqlite3/better-sqlite3-driver.js';
import { isBetterSqlite3DatabaseLike } from './better-sqlite3/better-sqlite3-like.js';
import { parseDatabaseUrl } from './database-url.js';
import type { Driver, PoolerMode } from './driver.js';
import { Mysql2Driver } from './mysql2/mysql2-driver.js';
import { isMysql2PoolLike } from './mysql2/mysql2-like.js';
import { PgDriver } from './pg/pg-driver.js';
import { isPgPoolLike } from './pg/pg-like.js';

export interface CreateDriverOptions {
  /** Connections in a pool opened from a URL; a pool the service passes keeps its own size. */
  readonly poolSize?: number | undefined;
  /** How long an acquire waits for a connection before a `PoolExhaustedError`. */
  readonly acquireTimeoutMs?: number | undefined;
  /** PostgreSQL: the pooler between the pool and the server, as the broker's `pooler` option declares it. */
  readonly pooler?: PoolerMode | undefined;
}

export const DEFAULT_POOL_SIZE = 10;

/**
 * A driver for the broker's `database` option: a URL, or the service's own pool or handle (a
 * `pg.Pool`, a mysql2 pool from `mysql2` or `mysql2/promise`, a better-sqlite3 `Database`), told
 * apart by shape so that no client library is loaded here. Nothing connects until `open()`.
 */
export function createDriver(database: string | object, options: CreateDriverOptions = {}): Driver {
  if (typeof database === 'string') {
    const url = parseDatabaseUrl(database);
    const poolSize = resolvePoolSize(options.poolSize);
    const { acquireTimeoutMs, pooler } = options;
    switch (url.kind) {
      case 'postgres':
        return new PgDriver({ url, poolSize, acquireTimeoutMs, pooler });
      case 'mysql':
        return new Mysql2Driver({ url, poolSize, acquireTimeoutMs });
      case 'sqlite':
        return new BetterSqlite3Driver({ url });
    }
  }
  if (isPgPoolLike(database)) {
    return new PgDriver({ pool: database, acquireTimeoutMs: options.acquireTimeoutMs, pooler: options.pooler });
  }
  if (isMysql2PoolLike(database)) return new Mysql2Driver({ pool: database, acquireTimeoutMs: options.acquireTimeoutMs });
  if (isBetterSqlite3DatabaseLike(database)) return new BetterSqlite3Driver({ database });
  throw new DeclarationError(
    `the database option takes a URL (postgres://…, mysql://…, mariadb://…, sqlite:…), a pg.Pool, ` +
      `a mysql2 pool or a better-sqlite3 Database; got ${describeValue(database)}`,
  );
}

/**
 * A pooler declared for a database that is not PostgreSQL, refused: the declaration would change
 * nothing there, and is most likely meant for another URL. `declaredBy` names the option or flag.
 */
export function refusePoolerOffPostgres(driver: Driver, pooler: PoolerMode | undefined, declaredBy: string): void {
  if (pooler === undefined || driver.kind === 'postgres') return;
  throw new UnsupportedError({
    database: driver.kind,
    feature: 'pooler',
    message: `${declaredBy} is for PostgreSQL poolers such as PgBouncer, and the database is ${driver.description}; remove it`,
  });
}

function resolvePoolSize(poolSize: number | undefined): number {
  if (poolSize === undefined) return DEFAULT_POOL_SIZE;
  if (!Number.isInteger(poolSize) || poolSize < 1) {
    throw new DeclarationError(`poolSize must be a whole number of connections, at least 1; got ${poolSize}`);
  }
  return poolSize;
}

function describeValue(value: unknown): string {
  if (value === null || typeof value !== 'object') return String(value);
  const name = (value as { constructor?: { name?: unknown } }).constructor?.name;
  return typeof name === 'string' && name !== 'Object' ? `a ${name}` : 'an object of another shape';
}
