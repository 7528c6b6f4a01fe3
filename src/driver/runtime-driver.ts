import { ClosedError, ConnectionError } from '../errors.js';
import type { BoundStatement } from '../statement.js';
import { withCallerStack } from './connection-loan.js';
import type {
  Connection,
  DatabaseKind,
  Driver,
  NotificationClient,
  NotificationHandlers,
  PoolerFinding,
  PoolStats,
  QueryResult,
} from './driver.js';
import { type PoolCounts, PoolLedger } from './pool-ledger.js';
import {
  DEFAULT_ACQUIRE_TIMEOUT_MS,
  describeExhaustion,
  poolGateFor,
  type AcquireOptions,
  type CommitDurability,
  type PoolGate,
} from './pool-gate.js';

/** A session a client adapter lent: a connection that also tells which server session runs a statement. */
export interface LentSession extends Connection {
  /** Runs one statement; `caller`, when given, is an error made before the caller's first await, for its stack. */
  run(statement: BoundStatement, caller?: Error): Promise<QueryResult>;
  /** The server's id of the session while a statement runs on it (for `cancelRunning`); undefined otherwise. */
  readonly runningSessionId: number | undefined;
}

/**
 * What one client library gives the runtime driver: its pool, its sessions and its protocol.
 * Everything they share (the pool gate, the ledger, lent connections, closing) is the runtime
 * driver's.
 */
export interface ClientAdapter {
  readonly kind: DatabaseKind;
  /** For messages; may change once the server answered (a mysql:// URL that reaches MariaDB). */
  readonly description: string;
  readonly ownsPool: boolean;
  readonly poolIdentity: object;
  readonly databaseIdentity?: unknown;
  /**
   * Whether connections pass the pool gate shared by every driver on the pool (a connection kept
   * for renewals, `acquireTimeoutMs`). SQLite's one handle waits behind its own mutex instead.
   */
  readonly isGated: boolean;
  /** Whether there is a pool to lend from: the service's, or one `open` opened. */
  readonly hasPool: boolean;
  /** What the pool says about itself now; `held` is what this driver holds, for a pool that cannot tell. */
  counts(held: number): PoolCounts;
  /** Postgres, once open: see `Driver.pooler`. */
  readonly pooler?: PoolerFinding | undefined;
  /** MySQL and MariaDB, once open: see `Driver.isGaleraNode`. */
  readonly isGaleraNode?: boolean | undefined;
  /**
   * Opens the pool the driver owns, then checks the server answers, running its probe through
   * `execute` or on a session from `lend`; a failure closes a pool it opened and throws a `ConnectionError`.
   */
  open(execute: (statement: BoundStatement) => Promise<QueryResult>, lend: () => Promise<LentSession>): Promise<void>;
  /**
   * Takes a session from the pool; `onEnded` runs once, when its loan ends. The loan's commits
   * survive what `commitDurability` asks for; an adapter whose commits are always durable ignores it.
   */
  lend(ledger: PoolLedger, onEnded: () => void, commitDurability: CommitDurability): Promise<LentSession>;
  /**
   * `Driver.executeWrite` where the adapter commits writes that wait at the same moment together;
   * `lend` lends as `lend` above, through the runtime driver. Absent: each is `execute` alone.
   */
  executeWrite?(statement: BoundStatement, commitDurability: CommitDurability, lend: () => Promise<LentSession>): Promise<QueryResult>;
  /** The service's own connection (a `tx`), as `Driver.adopt` describes. */
  adopt(connection: unknown): Connection;
  /** Cancels the statements running on these server sessions, through a session of its own. */
  cancel(sessionIds: readonly number[]): Promise<void>;
  /** Refuses waiting lenders, and ends the pool when the driver opened it. */
  close(): Promise<void>;
  openNotificationClient?(handlers: NotificationHandlers, url?: string): Promise<NotificationClient>;
}

/**
 * A driver over a client adapter: the same lending, counting, cancelling and closing for every
 * database. A statement borrowed for one statement (`execute`) goes through the same lending.
 */
export class RuntimeDriver implements Driver {
  readonly #adapter: ClientAdapter;
  readonly #acquireTimeoutMs: number;
  readonly #ledger = new PoolLedger();
  readonly #gate: PoolGate | undefined;
  /** Connections lent and not yet ended, for `cancelRunning` and `close`. */
  readonly #lent = new Set<LentSession>();
  #isClosed = false;
  readonly openNotificationClient?: (handlers: NotificationHandlers, url?: string) => Promise<NotificationClient>;

  constructor(adapter: ClientAdapter, options: { readonly acquireTimeoutMs?: number | undefined } = {}) {
    this.#adapter = adapter;
    this.#acquireTimeoutMs = options.acquireTimeoutMs ?? DEFAULT_ACQUIRE_TIMEOUT_MS;
    this.#gate = adapter.isGated ? poolGateFor(adapter.poolIdentity, () => adapter.counts(this.#ledger.held).size) : undefined;
    const openNotificationClient = adapter.openNotificationClient?.bind(adapter);
    if (openNotificationClient !== undefined) {
      this.openNotificationClient = (handlers, url) => {
        this.#refuseWhenClosed();
        return openNotificationClient(handlers, url);
      };
    }
  }

  get kind(): DatabaseKind {
    return this.#adapter.kind;
  }

  get description(): string {
    return this.#adapter.description;
  }

  get ownsPool(): boolean {
    return this.#adapter.ownsPool;
  }

  get poolIdentity(): object {
    return this.#adapter.poolIdentity;
  }

  get databaseIdentity(): unknown {
    return this.#adapter.databaseIdentity;
  }

  get pooler(): PoolerFinding | undefined {
    return this.#adapter.pooler;
  }

  get isGaleraNode(): boolean | undefined {
    return this.#adapter.isGaleraNode;
  }

  async open(): Promise<void> {
    this.#refuseWhenClosed();
    await this.#adapter.open(
      (statement) => this.execute(statement),
      () => this.#lend(),
    );
  }

  acquire(options?: AcquireOptions): Promise<Connection> {
    return this.#lend(options);
  }

  holdForRenewals(): () => void {
    return this.#gate?.holdForRenewals() ?? (() => undefined);
  }

  execute(statement: BoundStatement): Promise<QueryResult> {
    return this.#executeAlone(statement);
  }

  async #executeAlone(statement: BoundStatement, options?: AcquireOptions): Promise<QueryResult> {
    let connection: LentSession;
    try {
      connection = await this.#lend(options);
    } catch (error) {
      // Made after the await, it carries the awaiting callers' frames (see ConnectionLoan.run).
      throw withCallerStack(error as Error, new Error());
    }
    try {
      return await connection.run(statement);
    } finally {
      connection.release();
    }
  }

  async executeWrite(statement: BoundStatement, options?: AcquireOptions): Promise<QueryResult> {
    const adapter = this.#adapter;
    if (adapter.executeWrite === undefined) return this.#executeAlone(statement, options);
    try {
      return await adapter.executeWrite(statement, options?.commitDurability ?? 'durable', () => this.#lend(options));
    } catch (error) {
      throw withCallerStack(error as Error, new Error());
    }
  }

  adopt(connection: unknown): Connection {
    return this.#adapter.adopt(connection);
  }

  stats(): PoolStats {
    return this.#ledger.stats(this.#adapter.counts(this.#ledger.held), this.#gate);
  }

  async cancelRunning(): Promise<void> {
    const sessions = [...this.#lent].flatMap(({ runningSessionId }) => (runningSessionId === undefined ? [] : [runningSessionId]));
    if (sessions.length > 0) await this.#adapter.cancel(sessions);
  }

  async cancelRunningOn(connection: Connection): Promise<void> {
    const session = this.#lent.has(connection as LentSession) ? (connection as LentSession).runningSessionId : undefined;
    if (session !== undefined) await this.#adapter.cancel([session]);
  }

  async close(): Promise<void> {
    if (this.#isClosed) return;
    this.#isClosed = true;
    for (const connection of [...this.#lent]) connection.destroy();
    await this.#adapter.close();
  }

  async #lend(options?: AcquireOptions): Promise<LentSession> {
    const adapter = this.#adapter;
    if (this.#isClosed || !adapter.hasPool) {
      throw new ClosedError(`the driver for ${adapter.description} is ${this.#isClosed ? 'closed' : 'not open'}`);
    }
    const gate = this.#gate;
    await gate?.enter({
      purpose: options?.purpose ?? 'work',
      timeoutMs: this.#acquireTimeoutMs,
      describe: (timeoutMs) => describeExhaustion(adapter.description, adapter.counts(this.#ledger.held).size, gate, timeoutMs),
    });
    let connection: LentSession | undefined;
    try {
      connection = await adapter.lend(
        this.#ledger,
        () => {
          if (connection !== undefined) this.#lent.delete(connection);
          gate?.leave();
        },
        options?.commitDurability ?? 'durable',
      );
    } catch (error) {
      gate?.leave();
      throw error;
    }
    this.#lent.add(connection);
    return connection;
  }

  #refuseWhenClosed(): void {
    if (this.#isClosed) throw new ClosedError(`the driver for ${this.#adapter.description} is closed`);
  }
}

/** A server that could not be reached (or its pool opened), named with its host. */
export function connectionErrorOf(server: string, address: { readonly host: string; readonly port: number }, error: unknown): ConnectionError {
  const host = `${address.host}:${address.port}`;
  const reason = error instanceof Error ? error.message : String(error);
  return new ConnectionError({ host, message: `could not connect to ${server} at ${host}: ${reason}`, cause: error });
}
