/**
 * The subset of mysql2 tablequeue uses, described structurally so that mysql2 stays an optional
 * peer dependency. The driver works on the callback API; a promise pool (`mysql2/promise`) is
 * reached through the callback pool it wraps.
 */

export interface Mysql2FieldLike {
  readonly name: string;
}

/** What a statement that returns no rows answers. */
export interface Mysql2ResultHeaderLike {
  readonly affectedRows: number | string;
  readonly insertId: number | string;
}

/** Per-statement options; the reading options override the pool's own for this statement. */
export interface Mysql2QueryOptionsLike {
  readonly sql: string;
  readonly values?: unknown[];
  readonly timezone?: string;
  readonly supportBigNumbers?: boolean;
  readonly bigNumberStrings?: boolean;
}

export type Mysql2QueryCallback = (
  error: Error | null,
  result?: Record<string, unknown>[] | Mysql2ResultHeaderLike,
  fields?: readonly Mysql2FieldLike[],
) => void;

export type Mysql2ErrorListener = (error: Error) => void;

export interface Mysql2ConnectionLike {
  /** Server-side prepared statement, cached per connection by SQL text. */
  execute(options: Mysql2QueryOptionsLike, callback: Mysql2QueryCallback): unknown;
  query(options: Mysql2QueryOptionsLike, callback: Mysql2QueryCallback): unknown;
  prepare(sql: string, callback: (error: Error | null) => void): unknown;
  /** Drops a statement from the connection's cache and closes it on the server. */
  unprepare(sql: string): unknown;
  release(): void;
  destroy(): void;
  on(event: 'error', listener: Mysql2ErrorListener): unknown;
  removeListener(event: 'error', listener: Mysql2ErrorListener): unknown;
  readonly config?: Mysql2ConnectionConfigLike;
  /** The server's id of the session: what `KILL QUERY` takes. */
  readonly threadId?: number | null;
}

/** A mysql2 connection of our own, opened and ended here, never from a pool. */
export interface Mysql2StandaloneConnectionLike {
  query(sql: string, callback: (error: Error | null) => void): unknown;
  end(callback?: (error?: Error | null) => void): unknown;
  destroy(): void;
  on(event: 'error', listener: Mysql2ErrorListener): unknown;
}

export interface Mysql2ConnectionConfigLike {
  readonly host?: string;
  readonly port?: number;
  readonly clientFlags?: number;
}

export interface Mysql2PoolLike {
  getConnection(callback: (error: Error | null, connection?: Mysql2ConnectionLike) => void): void;
  end(callback: (error?: Error | null) => void): void;
  readonly config?: {
    /** 0 means no limit. */
    readonly connectionLimit?: number;
    readonly connectionConfig?: Mysql2ConnectionConfigLike;
  };
}

/** A pool from `mysql2/promise`; `pool` is the callback pool underneath it. */
export interface Mysql2PromisePoolLike {
  readonly pool: Mysql2PoolLike;
}

export interface Mysql2PoolConfigLike {
  readonly host: string;
  readonly port: number;
  readonly user: string | undefined;
  readonly password: string | undefined;
  readonly database: string | undefined;
  readonly connectionLimit: number;
  readonly maxIdle: number;
  readonly waitForConnections: boolean;
  readonly supportBigNumbers: boolean;
  readonly bigNumberStrings: boolean;
  readonly timezone: string;
  readonly dateStrings: boolean;
  readonly multipleStatements: boolean;
  readonly enableKeepAlive: boolean;
}

export interface Mysql2ModuleLike {
  createPool(config: Mysql2PoolConfigLike): Mysql2PoolLike;
  /** Takes the connection settings of a pool's `config.connectionConfig`, or host, port, user… */
  createConnection(config: object): Mysql2StandaloneConnectionLike;
}

/** A mysql2 pool: the callback pool (`mysql2`) or the promise pool (`mysql2/promise`). */
export function isMysql2PoolLike(value: unknown): value is Mysql2PoolLike | Mysql2PromisePoolLike {
  return isCallbackPool(value) || isCallbackPool((value as Partial<Mysql2PromisePoolLike> | null | undefined)?.pool);
}

/** The callback pool under either form. */
export function toCallbackPool(pool: Mysql2PoolLike | Mysql2PromisePoolLike): Mysql2PoolLike {
  return isCallbackPool(pool) ? pool : (pool as Mysql2PromisePoolLike).pool;
}

function isCallbackPool(value: unknown): value is Mysql2PoolLike {
  const candidate = value as { getConnection?: unknown; config?: unknown } | null | undefined;
  return typeof candidate?.getConnection === 'function' && typeof candidate.config === 'object';
}

/**
 * The callback connection under a mysql2 connection of either API (a `mysql2/promise`
 * connection wraps one as `connection`), or undefined for anything else, a pool included.
 */
export function toCallbackConnection(value: unknown): Mysql2ConnectionLike | undefined {
  const inner = (value as { connection?: unknown } | null | undefined)?.connection;
  if (isCallbackConnection(inner)) return inner;
  return isCallbackConnection(value) ? value : undefined;
}

function isCallbackConnection(value: unknown): value is Mysql2ConnectionLike {
  const candidate = value as { execute?: unknown; unprepare?: unknown; getConnection?: unknown } | null | undefined;
  return (
    typeof candidate?.execute === 'function' &&
    typeof candidate.unprepare === 'function' &&
    typeof candidate.getConnection !== 'function'
  );
}
