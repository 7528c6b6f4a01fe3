import { resolve } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { ClosedError, ConnectionError, DeclarationError, StatementError } from '../../errors.js';
import type { BoundStatement } from '../../statement.js';
import { backoffDelayMs, type Backoff } from '../../internal/backoff.js';
import { loadClientLibrary } from '../client-library.js';
import { ConnectionLoan, LEAVE_TO_OWNER, type LoanEnding } from '../connection-loan.js';
import type { SqliteUrl } from '../database-url.js';
import type { Connection, DatabaseKind, QueryResult } from '../driver.js';
import type { CommitDurability } from '../pool-gate.js';
import type { PoolCounts, PoolLedger } from '../pool-ledger.js';
import { RuntimeDriver, type ClientAdapter, type LentSession } from '../runtime-driver.js';
import {
  type BetterSqlite3DatabaseLike,
  type BetterSqlite3ModuleLike,
  type BetterSqlite3StatementLike,
  isBetterSqlite3DatabaseLike,
} from './better-sqlite3-like.js';

export type BetterSqlite3DriverOptions = { readonly url: SqliteUrl } | { readonly database: BetterSqlite3DatabaseLike };

const DATABASE: DatabaseKind = 'sqlite';
/** Prepared statements kept per handle; the queue's statements are a few dozen texts. */
const MAX_CACHED_STATEMENTS = 500;
const BUSY_BACKOFF: Backoff = Object.freeze({ initialMs: 1, maxMs: 50 });
const BUSY_GIVE_UP_MS = 30_000;
/** `PRAGMA synchronous = NORMAL`: in WAL mode, the log is synced at checkpoints, not at every commit. */
const SYNCHRONOUS_NORMAL = 1;
/** `PRAGMA synchronous = FULL`: the log is synced at every commit. */
const SYNCHRONOUS_FULL = 2;

/**
 * Runs statements on one better-sqlite3 handle. better-sqlite3 is synchronous and a handle is one
 * session, so the "pool" is that handle behind an async mutex: a connection is the right to use
 * it, and a transaction on one connection never interleaves with another's statements. SQLite's
 * busy timeout is kept at zero on handles this driver opens (it would block the event loop, and
 * with it the handler that holds the write lock); a statement that finds the database locked is
 * retried after a short growing delay instead. On a file it opened, loans asking for
 * `redeliverable` commits run at `synchronous = NORMAL` (see `SynchronousLevels`).
 */
export class BetterSqlite3Driver extends RuntimeDriver {
  constructor(options: BetterSqlite3DriverOptions) {
    super(new BetterSqlite3Adapter(options));
  }
}

/**
 * better-sqlite3 under the runtime driver: one handle behind a mutex, with nothing kept for
 * renewals (waits end when statements do) and nothing to cancel (a statement runs to its end
 * inside its call).
 */
class BetterSqlite3Adapter implements ClientAdapter {
  readonly kind = DATABASE;
  readonly isGated = false;
  readonly description: string;
  readonly ownsPool: boolean;
  readonly poolIdentity: object;
  readonly #options: BetterSqlite3DriverOptions;
  readonly #mutex: HandleMutex;
  readonly #statements = new StatementCache();
  readonly #writes = new WriteGroups();
  #database: BetterSqlite3DatabaseLike | undefined;
  /** A file this driver opened: the levels its loans commit at. Undefined for in-memory and service handles. */
  #synchronous: SynchronousLevels | undefined;

  constructor(options: BetterSqlite3DriverOptions) {
    this.#options = Object.freeze({ ...options });
    this.ownsPool = 'url' in options;
    this.#database = 'database' in options ? options.database : undefined;
    this.#mutex = 'database' in options ? mutexOf(options.database) : new HandleMutex();
    this.poolIdentity = 'database' in options ? options.database : this;
    const isMemory = 'url' in options ? options.url.isMemory : options.database.memory;
    const filename = 'url' in options ? options.url.filename : options.database.name;
    this.description = isMemory ? 'sqlite in memory' : `sqlite file ${filename}`;
  }

  get hasPool(): boolean {
    return this.#database !== undefined;
  }

  /** Two handles on one file share it; each in-memory database is its own handle. */
  get databaseIdentity(): unknown {
    const database = this.#database;
    if (database === undefined) return undefined;
    return database.memory ? database : resolve(database.name);
  }

  async open(): Promise<void> {
    const options = this.#options;
    const database =
      'database' in options ? options.database : (this.#database ?? (await this.#openDatabase(options.url)));
    if (!database.open) {
      throw new ConnectionError({ host: database.name, message: `the handle of ${this.description} is closed` });
    }
    if ('database' in options) await this.#useWriteAheadLog(database);
  }

  async lend(ledger: PoolLedger, onEnded: () => void, commitDurability: CommitDurability): Promise<SqliteConnection> {
    await this.#mutex.lock(this);
    // A lend that began as the driver closed may be granted the handle the close let go of.
    const database = this.#database;
    if (database === undefined) {
      this.#mutex.unlock();
      throw new ClosedError(`the driver for ${this.description} is closed`);
    }
    // The handle is the session: ending it rolls back a transaction the holder opened and left
    // open. One the service opened on its own handle before stays the service's.
    const endSession = (): void => {
      try {
        if (connection.hasOpenedTransaction) rollBackOpenTransaction(database);
      } finally {
        this.#mutex.unlock();
      }
    };
    const connection = new SqliteConnection(database, {
      ledger,
      statements: this.#statements,
      ending: { release: endSession, destroy: endSession },
      onEnded,
      synchronous: this.#synchronous && { levels: this.#synchronous, commitDurability },
    });
    return connection;
  }

  executeWrite(statement: BoundStatement, commitDurability: CommitDurability, lend: () => Promise<LentSession>): Promise<QueryResult> {
    return this.#writes.add(statement, commitDurability, lend);
  }

  /**
   * Statements run on the service's handle at once, without waiting for this driver's mutex: the
   * service is inside its own transaction on that handle.
   */
  adopt(connection: unknown): Connection {
    if (connection instanceof SqliteConnection) return connection;
    if (!isBetterSqlite3DatabaseLike(connection)) {
      throw new DeclarationError('tx must be a better-sqlite3 Database or a tablequeue connection');
    }
    // Prepared statements belong to the handle that prepared them.
    const statements = connection === this.#database ? this.#statements : new StatementCache();
    return new SqliteConnection(connection, { ledger: undefined, statements, ending: LEAVE_TO_OWNER });
  }

  counts(): PoolCounts {
    const isOpen = this.#database?.open === true;
    const idle = isOpen && !this.#mutex.isLocked ? 1 : 0;
    return { size: 1, open: isOpen ? 1 : 0, idle, waiting: this.#mutex.waitingCount };
  }

  /** SQLite's statements never run past their call, so no session is ever found running one. */
  async cancel(): Promise<void> {}

  async close(): Promise<void> {
    this.#mutex.refuseWaiting(this, () => new ClosedError(`the driver for ${this.description} is closed`));
    if (this.ownsPool) this.#database?.close();
    this.#database = undefined;
    this.#synchronous = undefined;
  }

  async #openDatabase(url: SqliteUrl): Promise<BetterSqlite3DatabaseLike> {
    const Database = await loadClientLibrary<BetterSqlite3ModuleLike>('better-sqlite3', () => import('better-sqlite3'));
    let database: BetterSqlite3DatabaseLike;
    try {
      database = new Database(url.filename, { timeout: 0 });
    } catch (error) {
      throw this.#openError(url.filename, error);
    }
    try {
      // WAL lets readers go on while a writer commits; an in-memory database has no journal file.
      if (!url.isMemory) await runWhileBusy(() => database.pragma('journal_mode = WAL'), () => false);
      // Read once in WAL mode, whose default level a handle opening a WAL file starts at.
      if (!url.isMemory) this.#synchronous = new SynchronousLevels(database);
    } catch (error) {
      database.close();
      throw this.#openError(url.filename, error);
    }
    this.#database = database;
    return database;
  }

  /**
   * A service's handle on a file gets WAL, as the driver's own handles do: in SQLite's default
   * rollback journal each commit creates, syncs and deletes a journal file and waits for readers, and
   * 1,000 publishes and handles took 43 s on such a handle against 4.3 s with WAL. WAL belongs to
   * the file and stays for every connection opened later. A handle that cannot switch (inside a
   * transaction, read-only) is refused, saying how to switch it.
   */
  async #useWriteAheadLog(database: BetterSqlite3DatabaseLike): Promise<void> {
    if (database.memory || database.pragma('journal_mode', { simple: true }) === 'wal') return;
    let reason: string;
    try {
      const mode = await runWhileBusy(() => database.pragma('journal_mode = WAL', { simple: true }), () => false);
      if (mode === 'wal') return;
      reason = `SQLite kept journal mode ${String(mode)}`;
    } catch (error) {
      reason = error instanceof Error ? error.message : String(error);
    }
    const message =
      `could not switch ${this.description} to WAL (${reason}); switch it before passing the handle, ` +
      `outside a transaction: db.pragma('journal_mode = WAL'), or pass the URL sqlite:${database.name} instead`;
    throw new ConnectionError({ host: database.name, message });
  }

  #openError(filename: string, error: unknown): ConnectionError {
    const reason = error instanceof Error ? error.message : String(error);
    const message = `could not open ${this.description}: ${reason}`;
    return new ConnectionError({ host: filename, message, cause: error });
  }
}

/**
 * The `synchronous` level of a WAL file's handle the driver opened, set per loan. A loan asking
 * for `redeliverable` commits gets NORMAL: its commits reach the log at once (an application
 * crash loses nothing, and the file stays consistent) but are synced only at the next checkpoint
 * or the next commit at FULL, which syncs every earlier frame too, so a power loss may roll them
 * back. Every other loan gets the "durable" level: the one the handle opened with, but at least
 * FULL. better-sqlite3 is built with SQLITE_DEFAULT_WAL_SYNCHRONOUS=1, so a handle that opens a
 * file already in WAL mode starts at NORMAL (one that switched the file to WAL itself stays at
 * FULL), and its publishes would otherwise commit unsynced. SQLite refuses to change the level
 * inside a transaction, and a transaction commits at the level it began with, so the level is set
 * before a statement that begins one (an autocommit statement or BEGIN), following the loan
 * whose statement it is.
 */
class SynchronousLevels {
  readonly #database: BetterSqlite3DatabaseLike;
  readonly #durable: number;
  /** Tracked rather than read, so a loan after a loan of the same kind runs no pragma. */
  #current: number;

  constructor(database: BetterSqlite3DatabaseLike) {
    this.#database = database;
    this.#current = Number(database.pragma('synchronous', { simple: true }));
    // A build that opens at EXTRA keeps EXTRA for durable commits.
    this.#durable = Math.max(SYNCHRONOUS_FULL, this.#current);
  }

  /** Before a statement run outside a transaction: the level `commitDurability` asks for. */
  setFor(commitDurability: CommitDurability): void {
    const level = commitDurability === 'redeliverable' ? SYNCHRONOUS_NORMAL : this.#durable;
    if (level === this.#current) return;
    this.#database.pragma(`synchronous = ${level}`);
    this.#current = level;
  }
}

/** A write waiting for the handle, to commit with the writes waiting beside it. */
interface WaitingWrite {
  readonly statement: BoundStatement;
  readonly resolve: (result: QueryResult) => void;
  readonly reject: (error: unknown) => void;
}

/** What one write of a group came to. */
type WriteOutcome = { readonly result: QueryResult } | { readonly failure: unknown };

/**
 * Group commit of the writes that wait for the handle together. A write that finds no group
 * waiting for the handle asks for a loan and starts one; writes of the same durability that come
 * while it waits join it, and the loan runs them all in one transaction (`SqliteConnection.
 * runGroup`). Nothing is held back: a write that finds the handle free runs at once, alone, as
 * autocommit. A commit is most of what a lease settlement costs SQLite (a settlement that
 * commits alone took 52 to 68 µs a message in a loop over better-sqlite3, three of four
 * committed together 37 to 40), and with four workers three settlements of every four claimed
 * found the handle busy (a claim or another settlement on it).
 */
class WriteGroups {
  readonly #waiting = new Map<CommitDurability, WaitingWrite[]>();

  add(statement: BoundStatement, commitDurability: CommitDurability, lend: () => Promise<LentSession>): Promise<QueryResult> {
    return new Promise((resolve, reject) => {
      const write = { statement, resolve, reject };
      const group = this.#waiting.get(commitDurability);
      if (group !== undefined) {
        group.push(write);
        return;
      }
      this.#waiting.set(commitDurability, [write]);
      void this.#commit(commitDurability, lend);
    });
  }

  async #commit(commitDurability: CommitDurability, lend: () => Promise<LentSession>): Promise<void> {
    let connection: LentSession | undefined;
    let failure: unknown;
    try {
      connection = await lend();
    } catch (error) {
      failure = error;
    }
    // Writes that come from here on start the next group.
    const writes = this.#waiting.get(commitDurability) ?? [];
    this.#waiting.delete(commitDurability);
    if (connection === undefined) {
      for (const write of writes) write.reject(failure);
      return;
    }
    let outcomes: readonly WriteOutcome[];
    try {
      outcomes = await (connection as SqliteConnection).runGroup(writes.map((write) => write.statement));
    } catch (error) {
      connection.destroy();
      for (const write of writes) write.reject(error);
      return;
    }
    connection.release();
    writes.forEach((write, index) => {
      const outcome = outcomes[index]!;
      if ('result' in outcome) write.resolve(outcome.result);
      else write.reject(outcome.failure);
    });
  }
}

/** Group commit's statements: the write lock taken at BEGIN, so no statement inside finds it taken. */
const BEGIN_GROUP_SQL = 'BEGIN IMMEDIATE';
const COMMIT_GROUP_SQL = 'COMMIT';
const SAVEPOINT_SQL = 'SAVEPOINT tablequeue_write';
const ROLLBACK_TO_SAVEPOINT_SQL = 'ROLLBACK TO tablequeue_write';
const RELEASE_SAVEPOINT_SQL = 'RELEASE tablequeue_write';

class SqliteConnection implements LentSession {
  readonly #database: BetterSqlite3DatabaseLike;
  readonly #statements: StatementCache;
  readonly #loan: ConnectionLoan;
  readonly #synchronous: { readonly levels: SynchronousLevels; readonly commitDurability: CommitDurability } | undefined;

  /** Statements run inside their call: none is ever found running by `cancelRunning`. */
  readonly runningSessionId = undefined;
  /** Whether a statement of this connection opened the transaction the handle is in now. */
  #hasOpenedTransaction = false;

  constructor(
    database: BetterSqlite3DatabaseLike,
    context: {
      ledger: PoolLedger | undefined;
      statements: StatementCache;
      ending: LoanEnding;
      onEnded?: () => void;
      synchronous?: { readonly levels: SynchronousLevels; readonly commitDurability: CommitDurability } | undefined;
    },
  ) {
    this.#database = database;
    this.#statements = context.statements;
    this.#synchronous = context.synchronous;
    const { ledger, ending, onEnded } = context;
    this.#loan = new ConnectionLoan({ ledger, database: DATABASE, describeFailure, ending, ...(onEnded === undefined ? {} : { onEnded }) });
  }

  execute(statement: BoundStatement): Promise<QueryResult> {
    return this.run(statement);
  }

  get hasOpenedTransaction(): boolean {
    return this.#hasOpenedTransaction && this.#database.open && this.#database.inTransaction;
  }

  run(statement: BoundStatement, caller?: Error): Promise<QueryResult> {
    return this.#loan.run(
      statement.name,
      async () => {
        const values = statement.values.map(encodeValue);
        const wasInTransaction = this.#database.inTransaction;
        if (!wasInTransaction) this.#synchronous?.levels.setFor(this.#synchronous.commitDurability);
        try {
          return await runWhileBusy(
            () => runStatement(this.#statements.prepare(this.#database, statement.sql), values),
            () => this.#loan.isEnded,
          );
        } finally {
          if (!this.#database.inTransaction) this.#hasOpenedTransaction = false;
          else if (!wasInTransaction) this.#hasOpenedTransaction = true;
        }
      },
      caller,
    );
  }

  /**
   * Runs writes that would each commit on their own in one transaction, each under a savepoint:
   * one that fails is rolled back alone and the others commit. One write, or a handle already in
   * a transaction (the service's, on its own handle), runs each statement as `run` would. An
   * error that ends the transaction (SQLite may roll it back whole on a full disk or an I/O
   * error) fails the writes before it, whose work it undid, and the ones after it run alone. A
   * failed commit fails every write it held. Never rejects for one write's failure.
   */
  runGroup(statements: readonly BoundStatement[]): Promise<WriteOutcome[]> {
    if (statements.length === 1 || this.#database.inTransaction) return this.#runEach(statements);
    return this.#loan.run(COMMIT_GROUP_SQL, async () => {
      const database = this.#database;
      this.#synchronous?.levels.setFor(this.#synchronous.commitDurability);
      await runWhileBusy(() => this.#statements.prepare(database, BEGIN_GROUP_SQL).run([]), () => this.#loan.isEnded);
      this.#hasOpenedTransaction = true;
      const outcomes: WriteOutcome[] = [];
      for (const [index, statement] of statements.entries()) {
        const outcome = this.#runUnderSavepoint(statement);
        if (database.inTransaction) {
          outcomes.push(outcome);
          continue;
        }
        const failure = 'failure' in outcome ? outcome.failure : describeFailure(new Error('the transaction ended'), statement.name);
        outcomes.forEach((earlier, earlierIndex) => {
          if ('result' in earlier) outcomes[earlierIndex] = { failure };
        });
        outcomes.push({ failure });
        this.#hasOpenedTransaction = false;
        return [...outcomes, ...(await this.#runEach(statements.slice(index + 1)))];
      }
      try {
        await runWhileBusy(() => this.#statements.prepare(database, COMMIT_GROUP_SQL).run([]), () => this.#loan.isEnded);
      } catch (error) {
        // A loan ended while the commit waited (the driver closing) rolled back already, and the
        // handle may be the next loan's by now.
        if (!this.#loan.isEnded) rollBackOpenTransaction(database);
        const failure = describeFailure(error, COMMIT_GROUP_SQL);
        return outcomes.map((outcome) => ('result' in outcome ? { failure } : outcome));
      } finally {
        this.#hasOpenedTransaction = false;
      }
      return outcomes;
    });
  }

  #runUnderSavepoint(statement: BoundStatement): WriteOutcome {
    const database = this.#database;
    this.#statements.prepare(database, SAVEPOINT_SQL).run([]);
    try {
      const result = runStatement(this.#statements.prepare(database, statement.sql), statement.values.map(encodeValue));
      this.#statements.prepare(database, RELEASE_SAVEPOINT_SQL).run([]);
      return { result };
    } catch (error) {
      if (database.inTransaction) {
        this.#statements.prepare(database, ROLLBACK_TO_SAVEPOINT_SQL).run([]);
        this.#statements.prepare(database, RELEASE_SAVEPOINT_SQL).run([]);
      }
      return { failure: describeFailure(error, statement.name) };
    }
  }

  async #runEach(statements: readonly BoundStatement[]): Promise<WriteOutcome[]> {
    const outcomes: WriteOutcome[] = [];
    for (const statement of statements) {
      try {
        outcomes.push({ result: await this.run(statement) });
      } catch (failure) {
        outcomes.push({ failure });
      }
    }
    return outcomes;
  }

  async prepare(statement: BoundStatement): Promise<void> {
    await this.#loan.run(statement.name, () =>
      runWhileBusy(() => this.#statements.prepare(this.#database, statement.sql), () => this.#loan.isEnded),
    );
  }

  release(): void {
    this.#loan.release();
  }

  destroy(): void {
    this.#loan.destroy();
  }
}

/**
 * One mutex per handle, shared by every driver over it: two brokers given the same service handle
 * must not run statements inside each other's transactions.
 */
const handleMutexes = new WeakMap<object, HandleMutex>();

function mutexOf(database: object): HandleMutex {
  let mutex = handleMutexes.get(database);
  if (mutex === undefined) {
    mutex = new HandleMutex();
    handleMutexes.set(database, mutex);
  }
  return mutex;
}

/** The right to use the one handle, handed to waiters in the order they asked. */
class HandleMutex {
  #isLocked = false;
  #waiting: { owner: object; grant: () => void; refuse: (error: Error) => void }[] = [];

  get isLocked(): boolean {
    return this.#isLocked;
  }

  get waitingCount(): number {
    return this.#waiting.length;
  }

  lock(owner: object): Promise<void> {
    if (!this.#isLocked) {
      this.#isLocked = true;
      return Promise.resolve();
    }
    return new Promise((grant, refuse) => this.#waiting.push({ owner, grant, refuse }));
  }

  unlock(): void {
    const next = this.#waiting.shift();
    if (next === undefined) this.#isLocked = false;
    else next.grant();
  }

  /** Refuses the waiters of one owner (a closing driver); others keep their place. */
  refuseWaiting(owner: object, reason: () => Error): void {
    const refused = this.#waiting.filter((waiter) => waiter.owner === owner);
    this.#waiting = this.#waiting.filter((waiter) => waiter.owner !== owner);
    for (const waiter of refused) waiter.refuse(reason());
  }
}

/** Prepared statements by SQL text; the oldest is dropped when the cache is full. */
class StatementCache {
  readonly #statements = new Map<string, BetterSqlite3StatementLike>();

  prepare(database: BetterSqlite3DatabaseLike, sql: string): BetterSqlite3StatementLike {
    const cached = this.#statements.get(sql);
    if (cached !== undefined) return cached;
    const statement = database.prepare(sql);
    if (this.#statements.size >= MAX_CACHED_STATEMENTS) {
      const oldest = this.#statements.keys().next();
      if (oldest.done !== true) this.#statements.delete(oldest.value);
    }
    this.#statements.set(sql, statement);
    return statement;
  }
}

/**
 * A reader's column names are read only when asked for (the schema probes ask): better-sqlite3
 * builds them anew on every `columns()` call, 3.7 µs for five columns against 2 µs for running the
 * select that returns one such row, and a lease claim on SQLite is a reader (`RETURNING`).
 */
function runStatement(statement: BetterSqlite3StatementLike, values: readonly unknown[]): QueryResult {
  if (statement.reader) {
    const rows = statement.all(values);
    return {
      rows,
      affectedRows: rows.length,
      get columns() {
        return statement.columns().map((column) => column.name);
      },
    };
  }
  return { rows: [], affectedRows: statement.run(values).changes, columns: [] };
}

/**
 * Retries `attempt` while another connection holds the lock it needs, sleeping 1 ms, then twice
 * as long each time up to 50 ms, for at most 30 s. A stale snapshot (SQLITE_BUSY_SNAPSHOT) is not
 * retried: only rolling back the transaction clears it.
 */
async function runWhileBusy<T>(attempt: () => T, isAbandoned: () => boolean): Promise<T> {
  const startedAt = Date.now();
  for (let retry = 1; ; retry += 1) {
    try {
      return attempt();
    } catch (error) {
      if (!isBusy(error) || Date.now() - startedAt >= BUSY_GIVE_UP_MS) throw error;
    }
    await delay(backoffDelayMs(BUSY_BACKOFF, retry));
    if (isAbandoned()) throw new Error('the connection was released while its statement waited for a lock');
  }
}

function isBusy(error: unknown): boolean {
  const code = sqliteCode(error);
  if (code === undefined || code === 'SQLITE_BUSY_SNAPSHOT') return false;
  return code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED');
}

/**
 * The driver's protocol (ARCHITECTURE.md, Boundaries): a connection's loan ends
 * with the handle out of any transaction, since the handle is the session.
 */
const ROLLBACK_SQL = 'ROLLBACK';

function rollBackOpenTransaction(database: BetterSqlite3DatabaseLike): void {
  if (database.open && database.inTransaction) database.exec(ROLLBACK_SQL);
}

/**
 * A value as better-sqlite3 binds it. A Date becomes fixed-width UTC text, the layout of
 * `strftime('%Y-%m-%dT%H:%M:%f+00:00')`, so text order is time order. better-sqlite3 binds every
 * JS number as a REAL, which a TEXT column stores as `42.0`: a publisher-supplied id of 42 came
 * back to its handler as "42.0". A whole number is bound as an INTEGER instead, which a TEXT
 * column stores as `42` and an INTEGER or REAL column as before.
 */
function encodeValue(value: unknown): unknown {
  if (typeof value === 'number') return Number.isSafeInteger(value) ? BigInt(value) : value;
  if (value instanceof Date) return value.toISOString().replace('Z', '+00:00');
  if (typeof value === 'boolean') return value ? 1 : 0;
  return value ?? null;
}

function sqliteCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | undefined)?.code;
  return typeof code === 'string' && code.startsWith('SQLITE_') ? code : undefined;
}

function describeFailure(error: unknown, statementName: string): StatementError {
  const sqlState = sqliteCode(error);
  return new StatementError({ statement: statementName, database: DATABASE, sqlState, cause: error });
}
