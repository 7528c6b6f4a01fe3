/**
 * The subset of node-postgres (`pg`) tablequeue uses, described structurally so that `pg` stays
 * an optional peer dependency and a service's own `pg.Pool` fits without type imports.
 */

export interface PgQueryConfigLike {
  /** A named statement is parsed once per connection and reused by name. */
  readonly name?: string;
  readonly text: string;
  readonly values?: unknown[];
}

export interface PgQueryResultLike {
  readonly rows: Record<string, unknown>[];
  /** Null for statements that report no count (`PREPARE`, `SET`). */
  readonly rowCount: number | null;
  readonly fields: readonly { readonly name: string }[];
}

export type PgErrorListener = (error: Error) => void;

export interface PgClientLike {
  query(config: PgQueryConfigLike): Promise<PgQueryResultLike>;
  /** The server process of the session, once connected: what pg_cancel_backend takes (a pooler's own number behind one). */
  readonly processID?: number | null;
  /** The other half of the session's cancel key, for a CancelRequest. */
  readonly secretKey?: number | null;
  /**
   * node-postgres 8.23 and later, on a client made with `pipeline: true`: each query is written
   * at once, without waiting for the answer to the one before. Undefined on older versions.
   */
  readonly pipeline?: boolean;
  /** node-postgres' protocol connection, not part of its documented API: its socket, corked around a pipeline's writes. */
  readonly connection?: { readonly stream?: { cork?(): void; uncork?(): void } };
  /** `true` (or an error) ends the session instead of returning it to the pool. */
  release(destroy?: boolean | Error): void;
  on(event: 'error', listener: PgErrorListener): unknown;
  removeListener(event: 'error', listener: PgErrorListener): unknown;
}

export interface PgPoolOptionsLike {
  readonly max?: number;
  readonly host?: string;
  readonly port?: number;
  readonly connectionString?: string;
  readonly connectionTimeoutMillis?: number;
  /** The name pg_stat_activity shows when neither the settings nor the URL give one. */
  readonly fallback_application_name?: string;
}

/** What `pg.Client` takes. A pool's options are the same settings, so they pass on whole. */
export interface PgClientConfigLike extends PgPoolOptionsLike {
  readonly keepAlive?: boolean;
  readonly keepAliveInitialDelayMillis?: number;
}

/** A `NOTIFY` as node-postgres reports it. */
export interface PgNotificationLike {
  readonly channel: string;
  readonly payload?: string;
}

/** A `pg.Client` of our own: one session, connected and ended here, never from a pool. */
export interface PgStandaloneClientLike {
  connect(): Promise<void>;
  query(config: PgQueryConfigLike): Promise<PgQueryResultLike>;
  end(): Promise<void>;
  on(event: 'notification', listener: (message: PgNotificationLike) => void): unknown;
  on(event: 'error', listener: PgErrorListener): unknown;
  on(event: 'end', listener: () => void): unknown;
}

export type PgClientClassLike = new (config: PgClientConfigLike) => PgStandaloneClientLike;

export interface PgPoolLike {
  connect(): Promise<PgClientLike>;
  end(): Promise<void>;
  on(event: 'error', listener: PgErrorListener): unknown;
  readonly totalCount: number;
  readonly idleCount: number;
  readonly waitingCount: number;
  readonly options?: PgPoolOptionsLike;
  /** The client class the pool was built with (pg-pool keeps it): the service's own copy of pg. */
  readonly Client?: PgClientClassLike;
}

export interface PgPoolConfigLike {
  readonly connectionString: string;
  readonly max: number;
  /** node-postgres 8.23 and later: the pool's clients pipeline their queries; older versions ignore it. */
  readonly pipeline?: boolean;
}

export interface PgModuleLike {
  readonly Pool: new (config: PgPoolConfigLike) => PgPoolLike;
  readonly Client: PgClientClassLike;
}

/** A `pg.Pool`: it lends clients (`connect`) and counts them (`totalCount`). */
export function isPgPoolLike(value: unknown): value is PgPoolLike {
  const candidate = value as Partial<Record<keyof PgPoolLike, unknown>> | null | undefined;
  return typeof candidate?.connect === 'function' && typeof candidate.totalCount === 'number';
}

/** A client holding one session (a `pg.Client` or a pool's client), not a pool. */
export function isPgClientLike(value: unknown): value is PgClientLike {
  const candidate = value as Partial<Record<keyof PgClientLike, unknown>> | null | undefined;
  return typeof candidate?.query === 'function' && typeof candidate.on === 'function' && !isPgPoolLike(value);
}
