import { parseDatabaseUrl } from '../driver/database-url.js';
import { isBetterSqlite3DatabaseLike } from '../driver/better-sqlite3/better-sqlite3-like.js';
import { isMysql2PoolLike } from '../driver/mysql2/mysql2-like.js';
import { isPgPoolLike } from '../driver/pg/pg-like.js';
import type { AsyncApiServer } from './asyncapi-document.js';

/**
 * The database of the broker's `database` option as an AsyncAPI server. From a URL it is built
 * from the parsed host, port and database name alone, so neither the user, the password nor any
 * query parameter (node-postgres reads `?password=` too) can reach the document. A pool the
 * service passes in says only which protocol it speaks: its host stays a server variable for the
 * reader to fill in, since AsyncAPI requires a host and the broker was never told one.
 */
export function databaseServer(database: string | object): AsyncApiServer {
  if (typeof database === 'string') {
    const url = parseDatabaseUrl(database);
    switch (url.kind) {
      case 'postgres':
        return {
          host: `${url.host}:${url.port}`,
          ...pathnameOf(postgresDatabaseName(database)),
          protocol: 'postgresql',
          title: 'PostgreSQL',
        };
      case 'mysql':
        return {
          host: `${url.host}:${url.port}`,
          ...pathnameOf(url.database),
          protocol: url.flavor,
          title: url.flavor === 'mariadb' ? 'MariaDB' : 'MySQL',
        };
      case 'sqlite':
        return url.isMemory
          ? {
              host: 'localhost',
              pathname: ':memory:',
              protocol: 'sqlite',
              title: 'SQLite in memory',
              description: "An in-memory database of the broker's own process: no other process reaches its queues.",
            }
          : {
              host: 'localhost',
              pathname: url.filename,
              protocol: 'sqlite',
              title: 'SQLite file',
              description: 'A database file, shared by the processes of one host that open it.',
            };
    }
  }
  const service = servicePoolProtocol(database);
  return {
    host: '{host}',
    protocol: service.protocol,
    title: service.title,
    description: "The service's own pool, passed to the broker without a URL: its address is the service's configuration.",
    variables: { host: { description: `The ${service.title} server the service's pool connects to.` } },
  };
}

function servicePoolProtocol(database: object): { protocol: string; title: string } {
  if (isPgPoolLike(database)) return { protocol: 'postgresql', title: 'PostgreSQL' };
  // The pool does not say whether a MySQL or a MariaDB server answers; both speak this protocol.
  if (isMysql2PoolLike(database)) return { protocol: 'mysql', title: 'MySQL or MariaDB' };
  if (isBetterSqlite3DatabaseLike(database)) return { protocol: 'sqlite', title: 'SQLite' };
  return { protocol: 'unknown', title: 'database' };
}

/** The URL's path without its slash: the database name, which is no secret. */
function postgresDatabaseName(text: string): string | undefined {
  const path = new URL(text).pathname.slice(1);
  if (path === '') return undefined;
  try {
    return decodeURIComponent(path);
  } catch {
    return undefined;
  }
}

function pathnameOf(databaseName: string | undefined): { pathname?: string } {
  return databaseName === undefined ? {} : { pathname: `/${databaseName}` };
}
