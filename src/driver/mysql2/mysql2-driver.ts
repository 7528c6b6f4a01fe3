import { ConnectionError, DeclarationError, StatementError } from '../../errors.js';
import type { BoundStatement } from '../../statement.js';
import { loadClientLibrary } from '../client-library.js';
import { ConnectionLoan, LEAVE_TO_OWNER } from '../connection-loan.js';
import type { MysqlUrl } from '../database-url.js';
import type { Connection, DatabaseKind, QueryResult } from '../driver.js';
import type { PoolCounts, PoolLedger } from '../pool-ledger.js';
import { connectionErrorOf, RuntimeDriver, type ClientAdapter, type LentSession } from '../runtime-driver.js';
import {
  type Mysql2ConnectionLike,
  type Mysql2FieldLike,
  type Mysql2ModuleLike,
  type Mysql2PoolLike,
  type Mysql2PromisePoolLike,
  type Mysql2ResultHeaderLike,
  toCallbackConnection,
  toCallbackPool,
} from './mysql2-like.js';

export type Mysql2DriverOptions = (
  | { readonly url: MysqlUrl; readonly poolSize: number }
  | { readonly pool: Mysql2PoolLike | Mysql2PromisePoolLike }
) & { readonly acquireTimeoutMs?: number | undefined };

const DATABASE: DatabaseKind = 'mysql';
const DEFAULT_PORT = 3306;
/** mysql2's own default `connectionLimit`. */
const MYSQL2_DEFAULT_LIMIT = 10;
/** The client flag that makes UPDATE report the rows it matched, not only those it changed. */
const CLIENT_FOUND_ROWS = 0x2;
/**
 * The driver's protocol (ARCHITECTURE.md, Boundaries): the probes `open` runs, which tell MariaDB
 * from MySQL and a node of a Galera cluster from a server of its own (`SHOW` names no variable a
 * server lacks, so it answers everywhere), and `cancelRunning`'s kill of a running statement.
 */
const PROBE: BoundStatement = Object.freeze({ name: 'driver.open', sql: 'SELECT VERSION() AS version', values: [] });
const GALERA_PROBE: BoundStatement = Object.freeze({
  name: 'driver.open',
  sql: "SHOW GLOBAL VARIABLES LIKE 'wsrep_on'",
  values: [],
});
const killQuerySql = (threadId: number): string => `KILL QUERY ${threadId}`;
/** ER_NO_SUCH_THREAD: `KILL QUERY` named a session that is gone. */
const UNKNOWN_THREAD_ERRNO = 1094;
/** How long the cancelling session may take to connect before the cancel is given up. */
const CANCEL_CONNECT_TIMEOUT_MS = 5_000;

/** Given to fatal failures (the session is gone) that carry no class 08 SQLSTATE of their own. */
const COMMUNICATION_LINK_FAILURE = '08S01';

/**
 * Read every row the same way whatever the service's pool says: DATETIME as UTC, BIGINT (and
 * COUNT) as decimal strings so ids never lose digits.
 */
const READ_OPTIONS = { timezone: 'Z', supportBigNumbers: true, bigNumberStrings: true } as const;

/**
 * Runs statements on a mysql2 pool (MySQL or MariaDB). Statements with values run as server-side
 * prepared statements (`execute`, cached per connection); statements without values run as text,
 * since the prepared protocol does not take every statement (transaction control on some servers).
 */
export class Mysql2Driver extends RuntimeDriver {
  constructor(options: Mysql2DriverOptions) {
    super(new Mysql2Adapter(options), options);
  }
}

/** mysql2 under the runtime driver: its pool, its connections, the server's name, and `KILL QUERY`. */
class Mysql2Adapter implements ClientAdapter {
  readonly kind = DATABASE;
  readonly isGated = true;
  readonly ownsPool: boolean;
  readonly poolIdentity: object;
  readonly #options: { readonly url: MysqlUrl; readonly poolSize: number } | { readonly pool: Mysql2PoolLike };
  readonly #address: { readonly host: string; readonly port: number };
  /**
   * What messages call the server: the URL's scheme until the server answers, then what its
   * version says (a mysql:// URL reaches MariaDB too); `mysql` for a service's pool until then.
   */
  #server: 'mysql' | 'mariadb';
  #isGaleraNode: boolean | undefined;
  #pool: Mysql2PoolLike | undefined;

  constructor(options: Mysql2DriverOptions) {
    this.#options = Object.freeze(
      'pool' in options ? { pool: toCallbackPool(options.pool) } : { url: options.url, poolSize: options.poolSize },
    );
    this.ownsPool = 'url' in options;
    this.#pool = 'pool' in this.#options ? this.#options.pool : undefined;
    this.poolIdentity = this.#pool ?? this;
    const config = this.#pool?.config?.connectionConfig;
    if (config !== undefined) assertFoundRows(config.clientFlags);
    this.#address =
      'url' in options ? options.url : { host: config?.host ?? 'localhost', port: config?.port ?? DEFAULT_PORT };
    this.#server = 'url' in options ? options.url.flavor : 'mysql';
  }

  get description(): string {
    return `${this.#server} at ${this.#address.host}:${this.#address.port}`;
  }

  get isGaleraNode(): boolean | undefined {
    return this.#isGaleraNode;
  }

  get hasPool(): boolean {
    return this.#pool !== undefined;
  }

  async open(execute: (statement: BoundStatement) => Promise<QueryResult>): Promise<void> {
    const options = this.#options;
    const pool = 'pool' in options ? options.pool : (this.#pool ?? (await this.#openPool(options)));
    try {
      const { rows } = await execute(PROBE);
      this.#server = /mariadb/i.test(String(rows[0]?.['version'] ?? '')) ? 'mariadb' : 'mysql';
      const wsrep = (await execute(GALERA_PROBE)).rows[0];
      this.#isGaleraNode = String(wsrep?.['Value'] ?? '').toUpperCase() === 'ON';
    } catch (error) {
      if (this.ownsPool) {
        this.#pool = undefined;
        await endPool(pool).catch(() => undefined);
      }
      throw error instanceof ConnectionError ? error : connectionErrorOf(this.#server, this.#address, error);
    }
  }

  async lend(ledger: PoolLedger, onEnded: () => void): Promise<Mysql2Connection> {
    const pool = this.#pool!;
    const connection = await new Promise<Mysql2ConnectionLike>((resolve, reject) => {
      pool.getConnection((error, lent) => (error || lent === undefined ? reject(error) : resolve(lent)));
    }).catch((error: unknown) => {
      throw connectionErrorOf(this.#server, this.#address, error);
    });
    return new Mysql2Connection(connection, this.#server, ledger, onEnded);
  }

  adopt(connection: unknown): Connection {
    if (connection instanceof Mysql2Connection) return connection;
    const serviceConnection = toCallbackConnection(connection);
    if (serviceConnection === undefined) {
      throw new DeclarationError(
        'tx must be a mysql2 connection (from createConnection or pool.getConnection) or a tablequeue connection',
      );
    }
    assertFoundRows(serviceConnection.config?.clientFlags);
    return new Mysql2Connection(serviceConnection, this.#server, undefined);
  }

  /**
   * `KILL QUERY` is the driver's protocol here, sent as text (the server does not prepare it) with
   * the session id checked to be a whole number.
   */
  async cancel(threadIds: readonly number[]): Promise<void> {
    const mysql2 = await loadClientLibrary<Mysql2ModuleLike>('mysql2', () => import('mysql2'));
    const options = this.#options;
    const settings =
      'url' in options
        ? { host: options.url.host, port: options.url.port, user: options.url.user, password: options.url.password }
        : (options.pool.config?.connectionConfig ?? {});
    const connection = mysql2.createConnection({ ...settings, connectTimeout: CANCEL_CONNECT_TIMEOUT_MS });
    connection.on('error', () => undefined);
    const run = (sql: string) =>
      new Promise<void>((resolve, reject) => connection.query(sql, (error) => (error ? reject(error) : resolve())));
    try {
      for (const threadId of threadIds) {
        // A statement that ended meanwhile leaves nothing to kill: "Unknown thread id" is fine.
        await run(killQuerySql(threadId)).catch((error: unknown) => {
          if ((error as { errno?: unknown }).errno !== UNKNOWN_THREAD_ERRNO) throw error;
        });
      }
    } catch (error) {
      throw connectionErrorOf(this.#server, this.#address, error);
    } finally {
      connection.destroy();
    }
  }

  async close(): Promise<void> {
    const pool = this.#pool;
    this.#pool = undefined;
    if (this.ownsPool && pool !== undefined) await endPool(pool);
  }

  async #openPool(options: { readonly url: MysqlUrl; readonly poolSize: number }): Promise<Mysql2PoolLike> {
    const { url, poolSize } = options;
    const mysql2 = await loadClientLibrary<Mysql2ModuleLike>('mysql2', () => import('mysql2'));
    const pool = mysql2.createPool({
      host: url.host,
      port: url.port,
      user: url.user,
      password: url.password,
      database: url.database,
      connectionLimit: poolSize,
      maxIdle: poolSize,
      waitForConnections: true,
      supportBigNumbers: true,
      bigNumberStrings: true,
      timezone: 'Z',
      dateStrings: false,
      multipleStatements: false,
      enableKeepAlive: true,
    });
    this.#pool = pool;
    return pool;
  }

  /**
   * mysql2 keeps its counts in private queues; read them when they are there, otherwise count
   * only what this driver holds.
   */
  counts(held: number): PoolCounts {
    const pool = this.#pool;
    const configuredLimit = 'poolSize' in this.#options ? this.#options.poolSize : MYSQL2_DEFAULT_LIMIT;
    const limit = pool?.config?.connectionLimit ?? configuredLimit;
    const size = limit === 0 ? Number.POSITIVE_INFINITY : limit;
    const internals = pool as Record<string, { length?: unknown } | undefined> | undefined;
    const open = internals?.['_allConnections']?.length;
    const idle = internals?.['_freeConnections']?.length;
    const waiting = internals?.['_connectionQueue']?.length;
    if (typeof open !== 'number' || typeof idle !== 'number') {
      return { size, open: held, idle: 0, waiting: 0 };
    }
    return { size, open, idle, waiting: typeof waiting === 'number' ? waiting : 0 };
  }
}

class Mysql2Connection implements LentSession {
  readonly #connection: Mysql2ConnectionLike;
  readonly #loan: ConnectionLoan;
  readonly #onError = (): void => this.#loan.markBroken();

  /**
   * Without a ledger the connection is the service's: it is neither counted nor ended here.
   * `server` names the server in error messages.
   */
  constructor(connection: Mysql2ConnectionLike, server: string, ledger: PoolLedger | undefined, onEnded?: () => void) {
    this.#connection = connection;
    const isLent = ledger !== undefined;
    if (isLent) connection.on('error', this.#onError);
    this.#loan = new ConnectionLoan({
      ledger,
      database: server,
      describeFailure: (error, statementName) => describeFailure(error, statementName, server),
      ...(onEnded === undefined ? {} : { onEnded }),
      ending: isLent
        ? {
            release: () => {
              connection.removeListener('error', this.#onError);
              connection.release();
            },
            destroy: () => connection.destroy(),
          }
        : LEAVE_TO_OWNER,
    });
  }

  /** The server's id of the session while a statement runs on it; undefined otherwise. */
  get runningSessionId(): number | undefined {
    const threadId = this.#connection.threadId;
    return this.#loan.isRunning && Number.isSafeInteger(threadId) ? (threadId as number) : undefined;
  }

  execute(statement: BoundStatement): Promise<QueryResult> {
    return this.run(statement);
  }

  run(statement: BoundStatement, caller?: Error): Promise<QueryResult> {
    return this.#loan.run(
      statement.name,
      () =>
        new Promise<QueryResult>((resolve, reject) => {
          const callback = (
            error: Error | null,
            result?: Record<string, unknown>[] | Mysql2ResultHeaderLike,
            fields?: readonly Mysql2FieldLike[],
          ): void => (error ? reject(error) : resolve(toQueryResult(result, fields)));
          if (statement.values.length === 0) {
            this.#connection.query({ sql: statement.sql, ...READ_OPTIONS }, callback);
          } else {
            const values = statement.values.map(encodeValue);
            this.#connection.execute({ sql: statement.sql, values, ...READ_OPTIONS }, callback);
          }
        }),
      caller,
    );
  }

  async prepare(statement: BoundStatement): Promise<void> {
    await this.#loan.run(
      statement.name,
      () =>
        new Promise<void>((resolve, reject) => {
          this.#connection.prepare(statement.sql, (error) => {
            if (error) return reject(error);
            // Closing through unprepare also drops it from the connection's statement cache,
            // which would otherwise hand the closed statement to a later execute.
            this.#connection.unprepare(statement.sql);
            resolve();
          });
        }),
    );
  }

  release(): void {
    this.#loan.release();
  }

  destroy(): void {
    this.#loan.destroy();
  }
}

function toQueryResult(
  result: Record<string, unknown>[] | Mysql2ResultHeaderLike | undefined,
  fields: readonly Mysql2FieldLike[] | undefined,
): QueryResult {
  if (Array.isArray(result)) {
    return { rows: result, affectedRows: result.length, columns: (fields ?? []).map((field) => field.name) };
  }
  const insertId = result === undefined ? 0 : result.insertId;
  return {
    rows: [],
    affectedRows: Number(result?.affectedRows ?? 0),
    insertId: insertId === 0 || insertId === '0' ? undefined : String(insertId),
    columns: [],
  };
}

/**
 * DATETIME has no zone, and mysql2 would write a Date in the pool's time zone: send UTC text.
 * Integers go as text too: mysql2 sends a JS number as a DOUBLE, which MySQL 8.0.22 and later
 * refuse for `LIMIT ?` in a prepared statement; the server converts the text where it is used.
 */
function encodeValue(value: unknown): unknown {
  if (value instanceof Date) return value.toISOString().replace('T', ' ').replace('Z', '000');
  if (typeof value === 'bigint' || (typeof value === 'number' && Number.isSafeInteger(value))) return String(value);
  return value ?? null;
}

function describeFailure(error: unknown, statementName: string, server: string): StatementError {
  const fields = error as { sqlState?: unknown; errno?: unknown; fatal?: unknown } | undefined;
  // Only server errors carry a SQLSTATE; a socket error's errno is Node's, not MySQL's.
  const sqlState = typeof fields?.sqlState === 'string' ? fields.sqlState : undefined;
  const errno = sqlState !== undefined && typeof fields?.errno === 'number' ? fields.errno : undefined;
  const isSessionLost = fields?.fatal === true && !sqlState?.startsWith('08');
  return new StatementError({
    statement: statementName,
    database: server,
    sqlState: isSessionLost ? COMMUNICATION_LINK_FAILURE : sqlState,
    errno,
    cause: error,
  });
}

function assertFoundRows(clientFlags: number | undefined): void {
  if (clientFlags === undefined || (clientFlags & CLIENT_FOUND_ROWS) !== 0) return;
  throw new DeclarationError(
    'the mysql2 pool was created without the FOUND_ROWS flag: tablequeue needs UPDATE to report the rows it ' +
      'matched to detect lost leases; create the pool without "-FOUND_ROWS" in its flags',
  );
}

function endPool(pool: Mysql2PoolLike): Promise<void> {
  return new Promise((resolve, reject) => pool.end((error) => (error ? reject(error) : resolve())));
}
