import type { DialectCapabilities } from '../src/dialect/dialect.js';
import type { DatabaseKind, Driver, PoolerMode } from '../src/driver/driver.js';
import type { BrokerOptions } from '../src/index.js';

export type StandName =
  | 'postgres'
  | 'pgbouncer-transaction'
  | 'pgbouncer-session'
  | 'mariadb'
  | 'galera'
  | 'mysql'
  | 'sqlite-file'
  | 'sqlite-memory';

/**
 * A way to get an isolated database of one kind. Each test asks for its own database (or file,
 * or in-memory handle) and drops it afterwards, so tests never share rows.
 */
export interface Stand {
  readonly name: StandName;
  readonly kind: DatabaseKind;
  /** `mariadb` for MariaDB stands: createTableSql renders MariaDB's spelling where it differs. */
  readonly ddlDialect: 'postgres' | 'mysql' | 'mariadb' | 'sqlite';
  readonly capabilities: DialectCapabilities & {
    /** Another process can open the same database (not an in-memory SQLite handle). */
    readonly supportsProcesses: boolean;
  };
  /** The pooler the stand's URLs go through (PgBouncer's pool_mode); undefined for a server itself. */
  readonly pooler?: PoolerMode;
  /**
   * Whether the server answers. When it does not, the suite skips this stand, or fails when
   * `REQUIRE_LIVE=1` is set.
   */
  isReachable(): Promise<boolean>;
  createDatabase(): Promise<TestDatabase>;
}

export interface TestDatabase {
  /** What `new Broker({ database })` takes: a URL, or the in-memory SQLite handle. */
  readonly brokerDatabase: unknown;
  /** A URL another process can open; undefined when the database lives in this process only. */
  readonly url: string | undefined;
  /**
   * What every broker of the stand declares beside `database` (a pooler, the LISTEN connection's
   * URL, a Galera cluster's one writer node).
   */
  readonly brokerOptions?: Pick<BrokerOptions, 'pooler' | 'listen' | 'galera'>;
  /** Runs statements with no result (DDL) on an admin connection. */
  exec(sql: string): Promise<void>;
  /** Runs one query on an admin connection with positional parameters (`$1` on Postgres, `?` elsewhere). */
  query<Row = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<Row[]>;
  /** Opens a driver over this database the way the broker would from `brokerDatabase`. */
  openDriver(options?: { poolSize?: number }): Promise<Driver>;
  /** Drops the database, closing every admin connection. */
  drop(): Promise<void>;
}
