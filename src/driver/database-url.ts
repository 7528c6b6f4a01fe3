import { DeclarationError } from '../errors.js';

export interface PostgresUrl {
  readonly kind: 'postgres';
  /** Handed to node-postgres unchanged: it reads every parameter it knows (sslmode, …). */
  readonly connectionString: string;
  readonly host: string;
  readonly port: number;
}

export interface MysqlUrl {
  readonly kind: 'mysql';
  /** The scheme the URL named; both are served by mysql2. */
  readonly flavor: 'mysql' | 'mariadb';
  readonly host: string;
  readonly port: number;
  readonly user: string | undefined;
  readonly password: string | undefined;
  readonly database: string | undefined;
}

export interface SqliteUrl {
  readonly kind: 'sqlite';
  /** A path as given (relative to the working directory, or absolute), or `:memory:`. */
  readonly filename: string;
  readonly isMemory: boolean;
}

export type DatabaseUrl = PostgresUrl | MysqlUrl | SqliteUrl;

const ACCEPTED_FORMS =
  'postgres://user@host:5432/db, postgresql://user@host:5432/db, mysql://user@host:3306/db, ' +
  'mariadb://user@host:3306/db, sqlite:./file.db, sqlite:/absolute/file.db or sqlite::memory:';

const DEFAULT_POSTGRES_PORT = 5432;
const DEFAULT_MYSQL_PORT = 3306;
const SQLITE_PREFIX = 'sqlite:';
const SQLITE_MEMORY = ':memory:';

/** Reads the `database` option's URL; a malformed one is a `DeclarationError` naming the accepted forms. */
export function parseDatabaseUrl(text: string): DatabaseUrl {
  if (text.startsWith(SQLITE_PREFIX)) return parseSqliteUrl(text);
  const url = parseUrl(text);
  switch (url.protocol) {
    case 'postgres:':
    case 'postgresql:':
      return parsePostgresUrl(text, url);
    case 'mysql:':
    case 'mariadb:':
      return parseMysqlUrl(text, url);
    default:
      throw refuse(text, 'its scheme is not one tablequeue knows');
  }
}

function parseSqliteUrl(text: string): SqliteUrl {
  const filename = text.slice(SQLITE_PREFIX.length);
  if (filename === SQLITE_MEMORY) return { kind: 'sqlite', filename, isMemory: true };
  if (filename === '' || filename.startsWith('//')) {
    throw refuse(text, 'a sqlite URL is "sqlite:" followed by a file path, with no "//"');
  }
  return { kind: 'sqlite', filename, isMemory: false };
}

function parsePostgresUrl(text: string, url: URL): PostgresUrl {
  // node-postgres accepts a socket directory as `?host=`; name it in messages when there is no host.
  const host = url.hostname || url.searchParams.get('host') || 'localhost';
  return { kind: 'postgres', connectionString: text, host, port: readPort(text, url, DEFAULT_POSTGRES_PORT) };
}

function parseMysqlUrl(text: string, url: URL): MysqlUrl {
  if (url.hostname === '') throw refuse(text, 'it names no host');
  if (url.search !== '') {
    throw refuse(text, 'query parameters are not read from mysql URLs; pass your own mysql2 pool for other options');
  }
  const database = decode(text, url.pathname.slice(1));
  return {
    kind: 'mysql',
    flavor: url.protocol === 'mariadb:' ? 'mariadb' : 'mysql',
    host: url.hostname,
    port: readPort(text, url, DEFAULT_MYSQL_PORT),
    user: url.username === '' ? undefined : decode(text, url.username),
    password: url.password === '' ? undefined : decode(text, url.password),
    database: database === '' ? undefined : database,
  };
}

function parseUrl(text: string): URL {
  try {
    return new URL(text);
  } catch {
    throw refuse(text, 'it is not a URL');
  }
}

function readPort(text: string, url: URL, defaultPort: number): number {
  if (url.port === '') return defaultPort;
  const port = Number(url.port);
  if (!Number.isInteger(port) || port < 1 || port > 65_535) throw refuse(text, 'its port is not valid');
  return port;
}

function decode(text: string, component: string): string {
  try {
    return decodeURIComponent(component);
  } catch {
    throw refuse(text, 'it has a malformed percent-escape');
  }
}

function refuse(text: string, reason: string): DeclarationError {
  return new DeclarationError(
    `the database URL ${quoteWithoutSecrets(text)} cannot be used: ${reason}; accepted forms are ${ACCEPTED_FORMS}`,
  );
}

/** Shows only the scheme of a URL: anything after it may hold a password. */
function quoteWithoutSecrets(text: string): string {
  const scheme = /^[a-z][a-z0-9+.-]{0,19}:/i.exec(text)?.[0];
  return scheme === undefined ? '(with no scheme)' : `"${scheme}…"`;
}
