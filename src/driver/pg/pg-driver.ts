import { createHash } from 'node:crypto';
import { connect as connectSocket } from 'node:net';
import { ConnectionError, DeclarationError, StatementError } from '../../errors.js';
import type { BoundStatement } from '../../statement.js';
import { loadClientLibrary } from '../client-library.js';
import { ConnectionLoan, LEAVE_TO_OWNER } from '../connection-loan.js';
import { executeInTurn } from '../connection-scope.js';
import type { PostgresUrl } from '../database-url.js';
import type {
  Connection,
  DatabaseKind,
  NotificationClient,
  NotificationHandlers,
  PoolerFinding,
  PoolerMode,
  QueryResult,
} from '../driver.js';
import type { PoolCounts, PoolLedger } from '../pool-ledger.js';
import { connectionErrorOf, RuntimeDriver, type ClientAdapter, type LentSession } from '../runtime-driver.js';
import {
  isPgClientLike,
  type PgClientClassLike,
  type PgClientConfigLike,
  type PgClientLike,
  type PgModuleLike,
  type PgPoolLike,
  type PgPoolOptionsLike,
  type PgQueryResultLike,
  type PgStandaloneClientLike,
} from './pg-like.js';

export type PgDriverOptions = (
  | { readonly url: PostgresUrl; readonly poolSize: number }
  | { readonly pool: PgPoolLike }
) & { readonly acquireTimeoutMs?: number | undefined; readonly pooler?: PoolerMode | undefined };

const DATABASE: DatabaseKind = 'postgres';
const DEFAULT_PORT = 5432;
/** node-postgres' own default when a pool is created without `max`. */
const PG_DEFAULT_MAX = 10;
/** Statements with their own server-side name per connection; later ones run unnamed. */
const MAX_NAMED_STATEMENTS = 500;
/*
 * Behind a transaction pooler every statement runs unnamed. A named one is parsed on the server
 * session of its first run and, from then on, only bound by name, on whichever session the pooler
 * hands out next: there it does not exist (26000), or another client's first run left one of that
 * name (42P05). PgBouncer 1.21 tracks protocol-level names across its sessions, but only with
 * max_prepared_statements above 0, which became the default (200) in 1.24; Debian 12 ships 1.18,
 * and nothing a client sees tells whether the pooler in front tracks names. An unnamed statement
 * costs the server a parse and plan per run and no extra round trip: it is the one that works on
 * every pooler.
 */
/** Given to failures the client reports without a server SQLSTATE: the session is gone or unknown. */
const CONNECTION_FAILURE = '08006';
/** The only statement kinds `PREPARE` accepts; others (transaction control) cannot be checked unrun. */
const PREPARABLE = /^\s*(select|insert|update|delete|merge|values|with|table)\b/i;
/**
 * The driver's protocol (ARCHITECTURE.md, Boundaries): the probe `open` runs, the
 * check of a statement without running it, and `cancelRunning`, which runs on a session of its
 * own since the pool's may all be taken by the statements to cancel.
 *
 * The probe reads the server session's process id. PostgreSQL names the same id in the cancel key
 * it gives a session; a pooler gives its clients keys of its own (PgBouncer's are random), so a
 * different one means a pooler between the pool and the server. Its mode is then told by a
 * second session that holds a transaction open (`BEGIN`, the id again) while the first asks once
 * more: a transaction pooler hands the second session the server session the first just used
 * (PgBouncer reuses the last one freed) or the first another one; a session pooler, like the
 * server, never does either. The probe runs unnamed: a named statement would stay behind on the
 * pooler's server session.
 */
const PROBE_NAME = 'driver.open';
/**
 * Other clients of the pooler may take the freed server session first: with eight clients busy on
 * the same PgBouncer pool, one round missed a transaction pooler 6 times in 100, three rounds 0 in
 * 300. A miss is the only error (a session pooler never looks like a transaction pooler), so a
 * pooler that keeps sessions through three rounds is taken to be one; declaring the mode removes
 * the doubt.
 */
const POOLER_PROBE_ROUNDS = 3;
const SERVER_SESSION_SQL = 'SELECT pg_backend_pid() AS pid';
const BEGIN_SQL = 'BEGIN';
const ROLLBACK_SQL = 'ROLLBACK';
/** One message, so a transaction pooler runs both on one server session and nothing is left behind. */
const checkSql = (name: string, sql: string): string => `PREPARE ${name} AS ${sql}; DEALLOCATE ${name}`;
const CANCEL_BACKEND_SQL = 'SELECT pg_cancel_backend($1)';
/**
 * Behind a pooler the process id a client knows is the pooler's, which pg_cancel_backend cannot
 * use; the protocol's CancelRequest (length 16, this code, the client's process id and secret key,
 * on a connection of its own) reaches the pooler, which passes it to the server session running
 * the client's statement. node-postgres sends its own cancels the same way, without TLS.
 */
const CANCEL_REQUEST_CODE = 80_877_102;
const CANCEL_REQUEST_LENGTH = 16;
/** How long the cancelling session, or the probe's second one, may take to connect before it is given up. */
const SIDE_SESSION_CONNECT_TIMEOUT_MS = 5_000;
/** How the notification session shows in pg_stat_activity when the settings name no application. */
const LISTENER_APPLICATION_NAME = 'tablequeue-listener';
/**
 * node-postgres waits forever for a connection by default; a listener reconnecting through a
 * network that drops packets would then never try again.
 */
const LISTENER_CONNECT_TIMEOUT_MS = 10_000;
/** Silence before the listener's first keepalive probe. */
const LISTENER_KEEPALIVE_DELAY_MS = 10_000;

/**
 * Runs statements on a node-postgres pool. Each statement is a named prepared statement (named by
 * a hash of its text), so the server parses it once per connection, except behind a transaction
 * pooler, where all run unnamed. BIGINT comes back as a string; timestamptz as a `Date`.
 */
export class PgDriver extends RuntimeDriver {
  constructor(options: PgDriverOptions) {
    super(new PgAdapter(options), options);
  }
}

/** node-postgres under the runtime driver: its pool, its clients, `pg_cancel_backend`, and LISTEN sessions. */
class PgAdapter implements ClientAdapter {
  readonly kind = DATABASE;
  readonly isGated = true;
  readonly description: string;
  readonly ownsPool: boolean;
  readonly poolIdentity: object;
  readonly #options: PgDriverOptions;
  readonly #address: { readonly host: string; readonly port: number };
  readonly #statementNames = new StatementNames();
  #pool: PgPoolLike | undefined;
  #pooler: PoolerFinding | undefined;
  /** What a cancel behind a pooler needs of each lent session: its cancel key. */
  readonly #lent = new Set<PgConnection>();

  constructor(options: PgDriverOptions) {
    this.#options = Object.freeze({ ...options });
    this.ownsPool = 'url' in options;
    this.#address = 'url' in options ? options.url : addressOf(options.pool.options);
    this.#pool = 'pool' in options ? options.pool : undefined;
    this.description = `postgres at ${this.#address.host}:${this.#address.port}`;
    this.poolIdentity = 'pool' in options ? options.pool : this;
  }

  get hasPool(): boolean {
    return this.#pool !== undefined;
  }

  get pooler(): PoolerFinding | undefined {
    return this.#pooler;
  }

  async open(_execute: unknown, lend: () => Promise<LentSession>): Promise<void> {
    const options = this.#options;
    const pool = 'pool' in options ? options.pool : (this.#pool ?? (await this.#openPool(options)));
    try {
      const pooler = await this.#findPooler(lend);
      this.#statementNames.isNaming = pooler.declared !== 'transaction' && pooler.found !== 'transaction';
      this.#pooler = pooler;
    } catch (error) {
      if (this.ownsPool) {
        this.#pool = undefined;
        await pool.end().catch(() => undefined);
      }
      throw error instanceof ConnectionError ? error : connectionErrorOf('postgres', this.#address, error);
    }
  }

  async lend(ledger: PoolLedger, onEnded: () => void): Promise<PgConnection> {
    let client: PgClientLike;
    try {
      client = await this.#pool!.connect();
    } catch (error) {
      throw connectionErrorOf('postgres', this.#address, error);
    }
    const connection: PgConnection = new PgConnection(client, {
      ledger,
      statementNames: this.#statementNames,
      onEnded: () => {
        this.#lent.delete(connection);
        onEnded();
      },
    });
    this.#lent.add(connection);
    return connection;
  }

  adopt(connection: unknown): Connection {
    if (connection instanceof PgConnection) return connection;
    if (!isPgClientLike(connection)) {
      throw new DeclarationError(
        'tx must be a pg client (a pg.Client, or a client from pool.connect()) or a tablequeue connection',
      );
    }
    return new PgConnection(connection, { ledger: undefined, statementNames: this.#statementNames });
  }

  counts(): PoolCounts {
    const pool = this.#pool;
    const size = pool?.options?.max ?? ('poolSize' in this.#options ? this.#options.poolSize : PG_DEFAULT_MAX);
    if (pool === undefined) return { size, open: 0, idle: 0, waiting: 0 };
    return { size, open: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount };
  }

  async cancel(processIds: readonly number[]): Promise<void> {
    if (this.#pooler?.found !== 'none') {
      await this.#cancelThroughPooler(processIds);
      return;
    }
    const { Client, settings } = await this.#clientSettings();
    const client = new Client({
      ...settings,
      connectionTimeoutMillis: settings.connectionTimeoutMillis ?? SIDE_SESSION_CONNECT_TIMEOUT_MS,
    });
    client.on('error', () => undefined);
    try {
      await client.connect();
      for (const processId of processIds) await client.query({ text: CANCEL_BACKEND_SQL, values: [processId] });
    } catch (error) {
      throw connectionErrorOf('postgres', this.#address, error);
    } finally {
      await client.end().catch(() => undefined);
    }
  }

  async #cancelThroughPooler(processIds: readonly number[]): Promise<void> {
    const wanted = new Set(processIds);
    const keys = [...this.#lent].flatMap((connection) => {
      const key = connection.cancelKey;
      return key !== undefined && wanted.has(key.processId) ? [key] : [];
    });
    try {
      await Promise.all(keys.map((key) => sendCancelRequest(this.#address, key)));
    } catch (error) {
      throw connectionErrorOf('postgres', this.#address, error);
    }
  }

  async close(): Promise<void> {
    const pool = this.#pool;
    this.#pool = undefined;
    if (this.ownsPool && pool !== undefined) await pool.end();
  }

  async openNotificationClient(handlers: NotificationHandlers, url?: string): Promise<NotificationClient> {
    const { Client, settings } = await this.#clientSettings(url);
    const client = new Client({
      ...settings,
      fallback_application_name: settings.fallback_application_name ?? LISTENER_APPLICATION_NAME,
      connectionTimeoutMillis: settings.connectionTimeoutMillis ?? LISTENER_CONNECT_TIMEOUT_MS,
      // The session only waits for notifications, so only TCP keepalives notice a vanished peer;
      // the system's default first probe comes after two hours of silence.
      keepAlive: true,
      keepAliveInitialDelayMillis: settings.keepAliveInitialDelayMillis ?? LISTENER_KEEPALIVE_DELAY_MS,
    });
    const session = new PgNotificationSession(client, handlers);
    try {
      await session.connect();
    } catch (error) {
      throw connectionErrorOf('postgres', url === undefined ? this.#address : addressOf({ connectionString: url }), error);
    }
    return session;
  }

  /** The probe (see SERVER_SESSION_SQL) on a session of the pool; a declared transaction pooler is taken at its word. */
  async #findPooler(lend: () => Promise<LentSession>): Promise<PoolerFinding> {
    const declared = this.#options.pooler;
    const connection = (await lend()) as PgConnection;
    try {
      const serverSession = await connection.serverSession();
      if (declared === 'transaction') return { declared, found: undefined };
      if (connection.clientSession === serverSession) return { declared, found: 'none' };
      return { declared, found: await this.#poolerMode(connection, serverSession) };
    } finally {
      connection.release();
    }
  }

  async #poolerMode(connection: PgConnection, serverSession: number): Promise<PoolerMode> {
    const { Client, settings } = await this.#clientSettings();
    const other = new Client({
      ...settings,
      connectionTimeoutMillis: settings.connectionTimeoutMillis ?? SIDE_SESSION_CONNECT_TIMEOUT_MS,
    });
    other.on('error', () => undefined);
    try {
      await other.connect();
      let first = serverSession;
      for (let round = 1; round <= POOLER_PROBE_ROUNDS; round += 1) {
        if (round > 1) first = await connection.serverSession();
        await other.query({ text: BEGIN_SQL });
        const held = Number((await other.query({ text: SERVER_SESSION_SQL })).rows[0]?.['pid']);
        const again = await connection.serverSession();
        await other.query({ text: ROLLBACK_SQL });
        if (held === first || again !== first) return 'transaction';
      }
      return 'session';
    } finally {
      await other.end().catch(() => undefined);
    }
  }

  /** The settings of a session of its own beside the pool (a cancel, the probe's second session, the LISTEN session). */
  async #clientSettings(url?: string): Promise<{ Client: PgClientClassLike; settings: PgClientConfigLike }> {
    const options = this.#options;
    const loadPg = () => loadClientLibrary<PgModuleLike>('pg', () => import('pg'));
    if (url !== undefined) {
      const Client = 'pool' in options ? (options.pool.Client ?? (await loadPg()).Client) : (await loadPg()).Client;
      return { Client, settings: { connectionString: url } };
    }
    if ('url' in options) return { Client: (await loadPg()).Client, settings: { connectionString: options.url.connectionString } };
    // A pg.Pool keeps the Client class it was built with: the service's own copy of pg.
    return { Client: options.pool.Client ?? (await loadPg()).Client, settings: options.pool.options ?? {} };
  }

  async #openPool(options: { readonly url: PostgresUrl; readonly poolSize: number }): Promise<PgPoolLike> {
    const pg = await loadClientLibrary<PgModuleLike>('pg', () => import('pg'));
    // Pipelining changes nothing for statements awaited one by one; it lets `executeAll` write a
    // transaction's BEGIN with its claim, and a settlement with its COMMIT, in one round trip.
    const pool = new pg.Pool({ connectionString: options.url.connectionString, max: options.poolSize, pipeline: true });
    // An idle client whose server ends its session emits 'error' through the pool, which then
    // drops it; without a listener Node would treat the event as an uncaught exception.
    pool.on('error', () => undefined);
    this.#pool = pool;
    return pool;
  }
}

class PgConnection implements LentSession {
  readonly #client: PgClientLike;
  readonly #statementNames: StatementNames;
  readonly #loan: ConnectionLoan;
  // A lent client has no pool listener: a session ended between statements would crash the process.
  readonly #onError = (): void => this.#loan.markBroken();

  /** Without a ledger the client is the service's: it is neither counted nor ended here. */
  constructor(
    client: PgClientLike,
    context: { ledger: PoolLedger | undefined; statementNames: StatementNames; onEnded?: () => void },
  ) {
    this.#client = client;
    this.#statementNames = context.statementNames;
    const isLent = context.ledger !== undefined;
    if (isLent) client.on('error', this.#onError);
    this.#loan = new ConnectionLoan({
      ledger: context.ledger,
      database: DATABASE,
      describeFailure,
      ...(context.onEnded === undefined ? {} : { onEnded: context.onEnded }),
      ending: isLent
        ? {
            release: () => {
              client.removeListener('error', this.#onError);
              client.release();
            },
            destroy: () => client.release(true),
          }
        : LEAVE_TO_OWNER,
    });
  }

  /** The server process of the session while a statement runs on it; undefined otherwise. */
  get runningSessionId(): number | undefined {
    return this.#loan.isRunning ? (this.#client.processID ?? undefined) : undefined;
  }

  /** The process id the session's cancel key names: the server's own, unless a pooler keys its clients. */
  get clientSession(): number | undefined {
    return this.#client.processID ?? undefined;
  }

  /** The session's cancel key, as the server or the pooler gave it at connect. */
  get cancelKey(): { processId: number; secretKey: number } | undefined {
    const { processID, secretKey } = this.#client;
    return typeof processID === 'number' && typeof secretKey === 'number' ? { processId: processID, secretKey } : undefined;
  }

  /** The process id of the server session that runs this statement (the probe, unnamed). */
  async serverSession(): Promise<number> {
    const result = await this.#loan.run(PROBE_NAME, () => this.#client.query({ text: SERVER_SESSION_SQL }));
    return Number(result.rows[0]?.['pid']);
  }

  execute(statement: BoundStatement): Promise<QueryResult> {
    return this.run(statement);
  }

  /**
   * A pipelining client writes every statement before the first answer comes. Corked, the socket
   * takes them in one write. On one idle session, a BEGIN sent with a one-parameter select, then
   * a select sent with a COMMIT, took 108 µs of CPU and 112 µs of wall time per four statements
   * against 140 and 205 µs awaited one by one, and corking saved 3 to 8 µs of CPU for 20 to 25 µs
   * of wall time (4,000 rounds, Node 20, PostgreSQL 15 on loopback). Under load the CPU decides:
   * the row lock drain of 20,000 messages with 16 workers took 288 and 310 µs of CPU per message
   * corked against 360 and 361 uncorked, and drained at 2,216 and 2,051 msg/s against 1,864 and
   * 1,895 (interleaved runs, load 3 to 5). A client that does not pipeline (an older
   * node-postgres, or a service's pool made without `pipeline`) would queue them all the same;
   * awaiting each keeps node-postgres from warning about its queue.
   */
  executeAll(statements: readonly BoundStatement[]): Promise<QueryResult[]> {
    if (this.#client.pipeline !== true) return executeInTurn(this, statements);
    return Promise.all(this.#writeAll(statements));
  }

  get executeEach(): ((statements: readonly BoundStatement[]) => Promise<QueryResult>[]) | undefined {
    return this.#client.pipeline === true ? (statements) => this.#writeAll(statements) : undefined;
  }

  /** Every statement written to the socket at once, corked: one write, one round trip. */
  #writeAll(statements: readonly BoundStatement[]): Promise<QueryResult>[] {
    const socket = this.#client.connection?.stream;
    socket?.cork?.();
    try {
      return statements.map((statement) => this.run(statement));
    } finally {
      socket?.uncork?.();
    }
  }

  run(statement: BoundStatement, caller?: Error): Promise<QueryResult> {
    return this.#loan.run(
      statement.name,
      async () => {
        const name = this.#statementNames.nameFor(statement.sql);
        const values = statement.values.map(encodeValue);
        const text = statement.sql;
        const result = await this.#client.query(name === undefined ? { text, values } : { name, text, values });
        return toQueryResult(result);
      },
      caller,
    );
  }

  async prepare(statement: BoundStatement): Promise<void> {
    if (!PREPARABLE.test(statement.sql)) return;
    await this.#loan.run(statement.name, async () => {
      // Postgres infers each parameter's type from its context, as it does for the real run.
      await this.#client.query({ text: checkSql(this.#statementNames.nextCheckName(), statement.sql) });
    });
  }

  release(): void {
    this.#loan.release();
  }

  destroy(): void {
    this.#loan.destroy();
  }
}

/** The listener's session: a `pg.Client` of its own that reports notifications and its loss. */
class PgNotificationSession implements NotificationClient {
  readonly #client: PgStandaloneClientLike;
  #state: 'connecting' | 'connected' | 'closed' = 'connecting';
  #lastError: Error | undefined;

  constructor(client: PgStandaloneClientLike, handlers: NotificationHandlers) {
    this.#client = client;
    client.on('notification', (message) => handlers.onNotification(message.channel, message.payload ?? ''));
    // Without a listener, an 'error' from a session the server ended would crash the process.
    client.on('error', (error) => {
      this.#lastError = error;
    });
    client.on('end', () => {
      const wasConnected = this.#state === 'connected';
      this.#state = 'closed';
      if (wasConnected) handlers.onLost(this.#lastError);
    });
  }

  async connect(): Promise<void> {
    try {
      await this.#client.connect();
    } catch (error) {
      this.#state = 'closed';
      await this.#client.end().catch(() => undefined);
      throw error;
    }
    if (this.#state === 'connecting') this.#state = 'connected';
  }

  async execute(statement: BoundStatement): Promise<void> {
    const { sql: text, values } = statement;
    try {
      await this.#client.query(values.length === 0 ? { text } : { text, values: values.map(encodeValue) });
    } catch (error) {
      throw describeFailure(error, statement.name);
    }
  }

  async close(): Promise<void> {
    if (this.#state === 'closed') return;
    this.#state = 'closed';
    await this.#client.end().catch(() => undefined);
  }
}

/** Server-side statement names, shared by every connection of a pool. */
class StatementNames {
  readonly #names = new Map<string, string>();
  #checkCount = 0;
  /** Off behind a transaction pooler (see MAX_NAMED_STATEMENTS); decided at open, before any statement. */
  isNaming = true;

  /** A name for a one-off `PREPARE`, unique in this driver so two checks on one client never collide. */
  nextCheckName(): string {
    this.#checkCount += 1;
    return `tq_check_${this.#checkCount}`;
  }

  /** The name derived from the SQL text; undefined behind a transaction pooler or once the table of names is full. */
  nameFor(sql: string): string | undefined {
    if (!this.isNaming) return undefined;
    const known = this.#names.get(sql);
    if (known !== undefined || this.#names.size >= MAX_NAMED_STATEMENTS) return known;
    const name = `tq_${createHash('sha256').update(sql).digest('hex').slice(0, 32)}`;
    this.#names.set(sql, name);
    return name;
  }
}

/**
 * Sends one CancelRequest (see CANCEL_REQUEST_CODE) and waits until the other side closes the
 * connection, never closing it first, as libpq does: PgBouncer 1.18 exits ("bad client state") when
 * a cancelling client's end arrives before it has passed the request on.
 */
function sendCancelRequest(
  address: { readonly host: string; readonly port: number },
  key: { readonly processId: number; readonly secretKey: number },
): Promise<void> {
  return new Promise((resolve, reject) => {
    // node-postgres reads a host that is a path as the directory of the server's Unix socket.
    const socket = address.host.startsWith('/')
      ? connectSocket(`${address.host}/.s.PGSQL.${address.port}`)
      : connectSocket(address.port, address.host);
    socket.setTimeout(SIDE_SESSION_CONNECT_TIMEOUT_MS, () => socket.destroy(new Error('the cancel request timed out')));
    socket.once('error', reject);
    socket.once('close', () => resolve());
    socket.once('connect', () => {
      const request = Buffer.alloc(CANCEL_REQUEST_LENGTH);
      request.writeInt32BE(CANCEL_REQUEST_LENGTH, 0);
      request.writeInt32BE(CANCEL_REQUEST_CODE, 4);
      request.writeInt32BE(key.processId, 8);
      request.writeInt32BE(key.secretKey, 12);
      socket.write(request);
    });
  });
}

function toQueryResult(result: PgQueryResultLike): QueryResult {
  return {
    rows: result.rows,
    affectedRows: result.rowCount ?? 0,
    columns: result.fields.map((field) => field.name),
  };
}

/**
 * An ISO string reads as the same instant in a timestamptz, whatever the process's time zone.
 * Array elements are encoded alike: pg would write a Date inside an array in local time.
 */
function encodeValue(value: unknown): unknown {
  if (value instanceof Date) return value.toISOString();
  if (Array.isArray(value)) return encodeArray(value);
  if (typeof value === 'bigint') return value.toString();
  return value ?? null;
}

/**
 * A coalesced lease settlement binds one token per row, and the rows of one claim share the
 * claim's Date: an element identical to the one before reuses its text. Encoding
 * each of them took 0.8 µs of CPU per message in a drain with prefetch 500 (PostgreSQL, 16
 * workers, a 1,000,000-row backlog).
 */
function encodeArray(values: readonly unknown[]): unknown[] {
  const encoded = new Array<unknown>(values.length);
  let previous: unknown;
  let previousEncoded: unknown;
  for (let index = 0; index < values.length; index += 1) {
    const value = values[index];
    if (index === 0 || value !== previous) {
      previous = value;
      previousEncoded = encodeValue(value);
    }
    encoded[index] = previousEncoded;
  }
  return encoded;
}

/**
 * A server error keeps its SQLSTATE. A failure without one is the client's: the session is gone
 * (a socket error, "Connection terminated"), unless JavaScript itself threw while binding or
 * encoding a value (a RangeError from an invalid Date, a TypeError from a BigInt in JSON), which
 * says nothing about the session and must not send callers to reconnect and retry.
 */
function describeFailure(error: unknown, statementName: string): StatementError {
  const fields = error as { code?: unknown; severity?: unknown } | undefined;
  const isFromServer = typeof fields?.severity === 'string' && typeof fields.code === 'string';
  return new StatementError({
    statement: statementName,
    database: DATABASE,
    sqlState: isFromServer ? (fields.code as string) : isLanguageError(error) ? undefined : CONNECTION_FAILURE,
    cause: error,
  });
}

function isLanguageError(error: unknown): boolean {
  return error instanceof TypeError || error instanceof RangeError || error instanceof SyntaxError || error instanceof ReferenceError;
}

function addressOf(options: PgPoolOptionsLike | undefined): { host: string; port: number } {
  const url = parseUrl(options?.connectionString);
  return {
    host: options?.host ?? (url?.hostname || 'localhost'),
    port: Number(options?.port ?? (url?.port || DEFAULT_PORT)),
  };
}

function parseUrl(text: string | undefined): URL | undefined {
  try {
    return text === undefined ? undefined : new URL(text);
  } catch {
    return undefined;
  }
}
