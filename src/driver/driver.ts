import type { BoundStatement } from '../statement.js';
import type { AcquireOptions } from './pool-gate.js';

export type DatabaseKind = 'postgres' | 'mysql' | 'sqlite';

/**
 * A pooler between a PostgreSQL pool and its server (PgBouncer's `pool_mode`): `transaction` hands
 * each transaction whichever server session is free, so nothing a session holds outlasts a
 * transaction; `session` keeps one server session per client connection, as a direct one does.
 */
export type PoolerMode = 'transaction' | 'session';

/** What a Postgres driver knows, once open, of a pooler between its pool and the server. */
export interface PoolerFinding {
  /** The mode the options declared; undefined when they declared none. */
  readonly declared: PoolerMode | undefined;
  /**
   * What `open()` saw: `none` when the sessions are the server's own, else the pooler's mode.
   * Undefined when it did not look, since `transaction` was declared.
   */
  readonly found: PoolerMode | 'none' | undefined;
}

export interface QueryResult {
  /** Rows as plain objects keyed by column name; empty for statements that return none. */
  readonly rows: Record<string, unknown>[];
  /** Rows inserted, updated or deleted. */
  readonly affectedRows: number;
  /** MySQL/MariaDB: the first id an auto-increment insert generated; undefined elsewhere. */
  readonly insertId?: number | string | undefined;
  /** Column names of the result, in order (read by the schema probe). */
  readonly columns: readonly string[];
}

/**
 * One connection lent by a driver. Statements run one at a time in call order. Dates bound as
 * values are encoded by the driver in the form its database compares correctly (UTC).
 * Exactly one of `release` or `destroy` ends a connection's loan; both are idempotent.
 */
export interface Connection {
  execute(statement: BoundStatement): Promise<QueryResult>;
  /**
   * Runs `statements` in order and resolves with their results in order, or rejects with the
   * first failure. On PostgreSQL, when the client pipelines (node-postgres 8.23 and later, on the
   * pool the driver opens), all of them are written at once and answered in one round trip, and
   * each runs even when one before it failed; elsewhere they run one after another and the first
   * failure stops the rest. Use it only where a statement running after a failed one is harmless:
   * inside a transaction, whose first failure aborts every statement after it. Optional: only a
   * client that pipelines has it; callers go through `executeAll` in connection-scope.ts, which
   * runs the statements of a connection without it one after another.
   */
  executeAll?(statements: readonly BoundStatement[]): Promise<QueryResult[]>;
  /**
   * As `executeAll` where the client pipelines, with each statement's own result: a later
   * statement's failure leaves the ones before it answered. Present only where `executeAll` is.
   */
  executeEach?(statements: readonly BoundStatement[]): Promise<QueryResult>[];
  /** Checks that a statement is valid on the server without running it. */
  prepare(statement: BoundStatement): Promise<void>;
  /** Returns the connection to the pool: its session state must be clean (no open transaction). */
  release(): void;
  /** Ends the session on the server (rolls back, drops session locks); use when its state is unknown. */
  destroy(): void;
}

/** What a pool can tell about itself at this moment. */
export interface PoolStats {
  /** The most connections the pool opens. */
  readonly size: number;
  /** Connections lent out by this driver right now. */
  readonly held: number;
  /** Connections open and idle in the pool. */
  readonly idle: number;
  /** Connections the pool could lend without waiting: idle ones plus room to open new ones. */
  readonly spare: number;
  /** The most connections this driver ever held at once. */
  readonly maxHeld: number;
  /** Connections kept for lease renewals (0 or 1): work never takes them. */
  readonly reservedForRenewals: number;
}

/** What a notification session reports; each callback runs on the session's own events. */
export interface NotificationHandlers {
  onNotification(channel: string, payload: string): void;
  /**
   * The session ended without `close()`: the server ended it or the network dropped it. Called
   * at most once, only after the session connected; the error is the one the client reported.
   */
  onLost(error: Error | undefined): void;
}

/**
 * A session of its own for `LISTEN` (Postgres): opened beside the pool, never taken from it nor
 * counted in `stats()`, and kept for the broker's whole life.
 */
export interface NotificationClient {
  /** Runs one statement; fails with a `StatementError`. */
  execute(statement: BoundStatement): Promise<void>;
  /** Ends the session; `onLost` is not called for it. */
  close(): Promise<void>;
}

export interface Driver {
  readonly kind: DatabaseKind;
  /** For messages: `postgres at 127.0.0.1:5432`, `sqlite file queue.db`. */
  readonly description: string;
  /** Whether the broker opened this pool (and so closes it) or the service passed it in. */
  readonly ownsPool: boolean;
  /**
   * SQLite: what names the database itself (the file's absolute path, or the handle of an
   * in-memory database), so brokers of one process share advisory keys kept in process.
   * Undefined elsewhere, and before an in-memory database is open.
   */
  readonly databaseIdentity?: unknown;
  /**
   * Postgres, once open: the pooler declared and found (see `PoolerFinding`); undefined elsewhere
   * and before `open()`.
   */
  readonly pooler?: PoolerFinding | undefined;
  /**
   * MySQL and MariaDB, once open: whether the server is a node of a Galera cluster (`wsrep_on`),
   * where row locks and `GET_LOCK` hold on that node only. Undefined elsewhere and before `open()`.
   */
  readonly isGaleraNode?: boolean | undefined;
  /** Connects, checks the server answers; throws `ConnectionError` naming the host. */
  open(): Promise<void>;
  /**
   * Lends a connection. Fails with a `PoolExhaustedError` when none becomes free within the
   * driver's acquire timeout. A renewal may take the connection kept for renewals.
   */
  acquire(options?: AcquireOptions): Promise<Connection>;
  /**
   * What names the pool: the service's pool object, or the driver for a pool it opened. Drivers
   * and brokers on one pool share its connections, so budgets are kept per pool identity.
   */
  readonly poolIdentity: object;
  /**
   * Keeps one connection of the pool for lease renewals until the returned function is called
   * (see `PoolGate`); a lease subscription holds it while it is open.
   */
  holdForRenewals(): () => void;
  /** Runs one statement on a connection borrowed for just that statement. */
  execute(statement: BoundStatement): Promise<QueryResult>;
  /**
   * Runs one statement that commits on its own, on a connection lent with `options`, with its own
   * result and its own failure. SQLite, whose one handle makes writers wait for each other,
   * commits the writes waiting for the handle at the same moment in one transaction, each under a
   * savepoint of its own; elsewhere it is `execute` on a connection lent with `options`. Only for
   * statements that may run inside a transaction (not a PRAGMA that changes the journal, VACUUM).
   */
  executeWrite(statement: BoundStatement, options?: AcquireOptions): Promise<QueryResult>;
  /**
   * Runs statements on a connection the service holds (a publish inside the service's own
   * transaction): a pg client, a mysql2 connection, the better-sqlite3 Database, or a Connection
   * this driver lent (returned as it is). Releasing or destroying the result leaves the service's
   * connection alone, and it is not counted in `stats()`. Anything else is a `DeclarationError`.
   */
  adopt(connection: unknown): Connection;
  stats(): PoolStats;
  /**
   * Cancels on the server every statement still running on a connection this driver lent (the
   * handlers' own queries, deliveries' transactions), through a session of its own, so that
   * `stop()` does not wait for them and the server does not go on running them. The statements'
   * callers get a `StatementError`. Nothing to cancel on SQLite, whose statements never wait.
   */
  cancelRunning(): Promise<void>;
  /**
   * Cancels on the server the statement running on `connection`, one this driver lent, through a
   * session of its own (as `cancelRunning` does for all of them); its caller gets a
   * `StatementError` and the session goes on, its transaction still open. Nothing when none runs.
   */
  cancelRunningOn(connection: Connection): Promise<void>;
  /**
   * Destroys every connection this driver still lends (their sessions end), then closes the pool
   * when the driver opened it; a pool the service passed in stays open.
   */
  close(): Promise<void>;
  /**
   * Postgres only: opens a notification session with the pool's own connection settings (the
   * URL, or the service pool's options), or on `url` when given (the server itself, where the pool
   * goes through a transaction pooler). Fails with a `ConnectionError` naming the host.
   */
  openNotificationClient?(handlers: NotificationHandlers, url?: string): Promise<NotificationClient>;
}
