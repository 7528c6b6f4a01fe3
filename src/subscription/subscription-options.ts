import type { HandlerTransaction } from '../delivery/delivery-transaction.js';
import type { Message } from '../delivery/message.js';
import type { Outcome } from '../delivery/outcome.js';
import type { Queue } from '../definition/define-table.js';
import type { PublishOptions } from '../publish/publish-options.js';
import type { ConcurrencyLimits } from '../claim/form-context.js';
import { DeclarationError } from '../errors.js';
import { resolveConcurrency, type ConcurrencyOption } from './concurrency-limits.js';
import { resolveRate, type RateLimitSettings, type RateOption } from './rate-limit.js';
import type { StandardSchemaV1 } from '../delivery/standard-schema.js';
import { validateQueueName } from '../definition/queue-name.js';
import { MAX_LEASE_MS, MAX_TIMER_MS, millisecondsFromZero, positiveInteger, positiveMilliseconds } from '../option-checks.js';

/** What a handler may use besides its message. */
export interface HandlerContext {
  /** Runs a query on a pool connection that is not the delivery's. `$1` placeholders on Postgres, `?` elsewhere. */
  query<Row = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<Row[]>;
  /** Publishes through the broker (on a connection of its own); wakes this broker's subscriptions. */
  publish<Payload>(queue: Queue<Payload>, payload: Payload, options?: PublishOptions): Promise<string>;
  /**
   * Aborted when the delivery's `timeoutMs` passes (reason: a `HandlerTimeoutError`), when its
   * message is cancelled (`broker.cancel`; reason: a `CancelledError`, and the message is removed
   * whatever the handler returns), and when the broker stops and the handler ran past the stop timeout.
   */
  readonly signal: AbortSignal;
  /**
   * Transactional mode (`transactional: true`): the delivery's transaction. Writes through it,
   * and publishes with `{ tx: context.tx }`, commit with an ack and roll back otherwise.
   */
  readonly tx?: HandlerTransaction;
}

export type Handler<Payload> = (
  message: Message<Payload>,
  context: HandlerContext,
) => Outcome | void | undefined | Promise<Outcome | void | undefined>;

/** A batch handler: one outcome for the whole batch, or one per message in order. */
export type BatchHandler<Payload> = (
  messages: Message<Payload>[],
  context: HandlerContext,
) => Outcome | Outcome[] | void | undefined | Promise<Outcome | Outcome[] | void | undefined>;

/** Handlers on dedicated worker threads (WP-12). */
export interface ThreadOptions {
  /** Worker threads; each runs one delivery at a time. */
  threads: number;
  /** Pool connections each thread opens for its handlers' queries. Default 1. */
  connections?: number;
  /** Route rows to threads by partition key, as keyed lanes do (WP-10). */
  byKey?: boolean;
  /** The module that exports the handler: a path or a file: URL. */
  module: string | URL;
  /** The export that is the handler. Default 'default'. */
  export?: string;
}

/** A payload decoder: a function of the bytes, or a Standard Schema validator over the JSON value. */
export type Decoder<Payload> =
  | ((raw: Buffer, row: Readonly<Record<string, unknown>>) => Payload | Promise<Payload>)
  | StandardSchemaV1<unknown, Payload>;

/** What happens to a row whose payload does not decode. */
export type DecodeFailurePolicy = 'drop' | 'retry' | { readonly retryAfterMs: number };

/** What every subscription takes; `SubscribeOptions` adds the dead-letter pair. */
export interface SubscribeOptionsBase<Payload = unknown> {
  /** Deliveries in work at once. Default 1. */
  workers?: number;
  /** Sequential lanes by partition key (WP-10), instead of `workers`. */
  workersByKey?: number;
  /** Rows per claim; the handler receives an array. */
  batch?: number;
  /**
   * Lends the handler the delivery's transaction as `context.tx`: an ack commits its writes with
   * the settlement, every other outcome and a throw roll them back. Single deliveries only; each
   * holds a connection until it settles.
   */
  transactional?: boolean;
  /** Runs the handler on worker threads instead of the main thread (WP-12). */
  onThreads?: ThreadOptions;
  /** The poll interval of this subscription; default the broker's. */
  pollIntervalMs?: number;
  /** The lease of this subscription (lease form); default the broker's. */
  leaseMs?: number;
  /**
   * How long a handler may run, in ms: then `context.signal` aborts, a lease is no longer
   * renewed, and a handler that has not returned within a grace (the smaller of `timeoutMs` and
   * one second) is given up on: its delivery fails by the retry rules (backoff, or dead letter at
   * `maxAttempts`) and what it returns later is ignored. A message published with `timeoutMs`
   * overrides it. Default none. In-process handlers only (not `onThreads`).
   */
  timeoutMs?: number;
  /**
   * Lease form: settlements that arrive within `settlementWindowMs` of each other go to the
   * database in one statement per kind, each row still fenced by its own token. Default true;
   * transactional subscriptions settle each delivery in its own transaction whatever this says.
   */
  coalesceSettlements?: boolean;
  /** How long the first settlement of a window waits for others, in ms (0: the same event-loop turn). Default 2. */
  settlementWindowMs?: number;
  /**
   * Lease form, opt-in: keeps up to this many rows claimed ahead of the workers, leased and
   * renewed while they wait (WP-9), so a worker that finishes starts its next row at once. Claims
   * then run one at a time, each for what the workers and this buffer lack. Default 0: one
   * claim of one row per idle worker (WP-1).
   */
  prefetch?: number;
  /**
   * Rows of this queue in work at once across every broker and process (`global`), and per
   * partition key (`perKey`, lease form only), enforced inside each claim: lease tables behind a
   * guard per queue, row lock tables by locking one of `global` slot rows per row in work. A
   * claim that finds the limit reached takes nothing and waits as after an empty claim.
   */
  concurrency?: ConcurrencyOption;
  /**
   * Lease form: at most `limit` claims (rows taken) of this queue within any `perMs` across
   * every broker and process, kept in the rate limits table. A claim the rate holds back waits
   * until the next slot frees.
   */
  rate?: RateOption;
  /** Decodes the payload bytes; default JSON. */
  decode?: Decoder<Payload>;
  /** Default `'drop'`. */
  onDecodeFailure?: DecodeFailurePolicy;
  /** The growing delay after a handler throws: `initialMs * 2^(attempt-1)` with jitter, capped at `maxMs`. */
  retryBackoff?: { initialMs?: number; maxMs?: number };
  /**
   * Skips messages whose outbox record id (header `tablequeue-outbox-id`) this subscription
   * already handled, noting them in a seen table (`defineDedupeTable`); see docs/outbox.md.
   */
  dedupe?: { readonly table: string; readonly schema?: string | undefined };
}

/**
 * `maxAttempts` and `deadLetter` come together or not at all: a row that may not be retried
 * needs somewhere to go. Declaring one without the other is a type error here, and a
 * `DeclarationError` at `subscribe()` for code the types do not check.
 */
export type DeadLetterOptions =
  | {
      /** The delivery that would retry at this attempt moves to `deadLetter` instead. */
      maxAttempts: number;
      /** A group (on a grouped table) or a table (`name` or `schema.name`) with the same columns. */
      deadLetter: string;
    }
  | { maxAttempts?: undefined; deadLetter?: undefined };

export type SubscribeOptions<Payload = unknown> = SubscribeOptionsBase<Payload> & DeadLetterOptions;

export interface ResolvedSubscribeOptions {
  /** Workers, lanes or threads: the deliveries in work at once. */
  readonly workers: number;
  readonly isKeyed: boolean;
  readonly batch: number | undefined;
  readonly transactional: boolean;
  readonly onThreads: Readonly<Required<Omit<ThreadOptions, 'module'>> & { module: string }> | undefined;
  readonly pollIntervalMs: number;
  readonly leaseMs: number;
  readonly timeoutMs: number | undefined;
  readonly coalesceSettlements: boolean;
  readonly settlementWindowMs: number;
  readonly prefetch: number;
  readonly concurrency: ConcurrencyLimits | undefined;
  readonly rate: RateLimitSettings | undefined;
  readonly decode: Decoder<unknown> | undefined;
  readonly onDecodeFailure: DecodeFailurePolicy;
  readonly maxAttempts: number | undefined;
  readonly deadLetter: string | undefined;
  readonly retryBackoff: { readonly initialMs: number; readonly maxMs: number };
}

export const DEFAULT_RETRY_BACKOFF_INITIAL_MS = 1_000;
export const DEFAULT_RETRY_BACKOFF_MAX_MS = 3_600_000;
/** See docs/benchmarks.md, "Settlement coalescing", for the drains this was chosen from. */
export const DEFAULT_SETTLEMENT_WINDOW_MS = 2;

/**
 * Deliveries in work at once (`workers`, `workersByKey`). Past the pool's size more workers only
 * help handlers that wait on something other than this database (an HTTP call); a thousand such
 * waits per subscription is generous, and more processes scale further. `workers: 10_000_000`
 * took 2.2 s and 80 MB to start before this bound.
 */
export const MAX_WORKERS = 1_000;
/**
 * Rows per claim (`batch`) and rows claimed ahead (`prefetch`). A MySQL/MariaDB lease claim
 * stamps its rows in one statement with a parameter per row, padded to a power of two: idle
 * workers plus prefetch stay at most 11,000 rows, 16,384 parameters, under MySQL's limit of
 * 65,535 and SQLite's of 32,766. A batch is also one handler call and (row lock form) one
 * transaction rolled back whole, so a thousand rows is already a long one.
 */
export const MAX_BATCH = 1_000;
export const MAX_PREFETCH = 10_000;
/**
 * Each thread is a V8 isolate of its own (8.7 MB of RSS each before any module loads, Node 20)
 * with a pool of its own: 256 threads of one connection already need more than PostgreSQL's
 * default max_connections (100) and MySQL's (151), and more threads than most machines have cores.
 */
export const MAX_THREADS = 256;
/** Connections of one thread's pool: more than a server's default max_connections (100) could never all open. */
export const MAX_THREAD_CONNECTIONS = 100;

const OPTION_KEYS = new Set([
  'workers',
  'workersByKey',
  'batch',
  'transactional',
  'onThreads',
  'pollIntervalMs',
  'leaseMs',
  'timeoutMs',
  'coalesceSettlements',
  'settlementWindowMs',
  'prefetch',
  'concurrency',
  'rate',
  'decode',
  'onDecodeFailure',
  'maxAttempts',
  'deadLetter',
  'retryBackoff',
  'dedupe',
]);

export function resolveSubscribeOptions(
  options: SubscribeOptions<unknown>,
  defaults: { pollIntervalMs: number; leaseMs: number },
  where: string,
): ResolvedSubscribeOptions {
  for (const key of Object.keys(options)) {
    if (!OPTION_KEYS.has(key)) {
      throw new DeclarationError(`${where}: unknown subscription option "${key}"; the options are ${[...OPTION_KEYS].join(', ')}`);
    }
  }
  if (options.workers !== undefined && options.workersByKey !== undefined) {
    throw new DeclarationError(`${where}: give workers or workersByKey, not both (workersByKey: n runs n lanes by partition key)`);
  }
  if (options.batch !== undefined && options.workersByKey !== undefined) {
    throw new DeclarationError(`${where}: batch cannot be combined with workersByKey: a batch would mix keys on one lane`);
  }
  const onThreads = resolveThreadOptions(options.onThreads, where);
  const transactional = resolveTransactional(options, onThreads !== undefined, where);
  if (onThreads !== undefined && (options.workers !== undefined || options.workersByKey !== undefined)) {
    throw new DeclarationError(`${where}: onThreads sets its own concurrency (threads, byKey); remove workers and workersByKey`);
  }
  const isKeyed = options.workersByKey !== undefined || onThreads?.byKey === true;
  const workers =
    onThreads?.threads ??
    positiveInteger(
      options.workersByKey ?? options.workers ?? 1,
      options.workersByKey === undefined ? 'workers' : 'workersByKey',
      where,
      MAX_WORKERS,
    );
  const batch = options.batch === undefined ? undefined : positiveInteger(options.batch, 'batch', where, MAX_BATCH);
  const pollIntervalMs = positiveMilliseconds(options.pollIntervalMs ?? defaults.pollIntervalMs, 'pollIntervalMs', where);
  const leaseMs = positiveMilliseconds(options.leaseMs ?? defaults.leaseMs, 'leaseMs', where, MAX_LEASE_MS);
  const timeoutMs = options.timeoutMs === undefined ? undefined : positiveMilliseconds(options.timeoutMs, 'timeoutMs', where);
  if (timeoutMs !== undefined && onThreads !== undefined) {
    throw new DeclarationError(
      `${where}: timeoutMs aborts the handler's context.signal, which a handler on a worker thread does not share; remove timeoutMs or onThreads`,
    );
  }
  const coalesceSettlements = options.coalesceSettlements ?? true;
  if (typeof coalesceSettlements !== 'boolean') throw new DeclarationError(`${where}: coalesceSettlements must be true or false`);
  const settlementWindowMs = options.settlementWindowMs ?? DEFAULT_SETTLEMENT_WINDOW_MS;
  if (
    typeof settlementWindowMs !== 'number' ||
    !Number.isFinite(settlementWindowMs) ||
    settlementWindowMs < 0 ||
    settlementWindowMs > MAX_TIMER_MS
  ) {
    throw new DeclarationError(
      `${where}: settlementWindowMs must be a number of milliseconds from 0 to ${MAX_TIMER_MS}, got ${String(settlementWindowMs)}; to settle each delivery on its own, set coalesceSettlements: false`,
    );
  }
  const prefetch = options.prefetch ?? 0;
  if (typeof prefetch !== 'number' || !Number.isInteger(prefetch) || prefetch < 0 || prefetch > MAX_PREFETCH) {
    throw new DeclarationError(`${where}: prefetch must be a whole number of rows from 0 to ${MAX_PREFETCH}, got ${String(prefetch)}`);
  }
  if (prefetch > 0 && batch !== undefined) {
    throw new DeclarationError(`${where}: a batch claim already takes up to its batch size; remove prefetch or batch`);
  }
  if (prefetch > 0 && transactional) {
    throw new DeclarationError(
      `${where}: a transactional delivery holds its connection from its claim, so rows cannot wait claimed ahead; remove prefetch or transactional`,
    );
  }
  if ((options.maxAttempts === undefined) !== (options.deadLetter === undefined)) {
    throw new DeclarationError(
      `${where}: maxAttempts and deadLetter come together; declare both (for example { maxAttempts: 5, deadLetter: 'failed' })`,
    );
  }
  const maxAttempts =
    options.maxAttempts === undefined ? undefined : positiveInteger(options.maxAttempts, 'maxAttempts', where);
  const policy = options.onDecodeFailure ?? 'drop';
  if (policy !== 'drop' && policy !== 'retry') {
    if (typeof policy !== 'object' || policy === null) {
      throw new DeclarationError(`${where}: onDecodeFailure must be 'drop', 'retry' or { retryAfterMs }`);
    }
    millisecondsFromZero(policy.retryAfterMs, 'onDecodeFailure.retryAfterMs', where);
  }
  if (options.deadLetter !== undefined) validateQueueName(options.deadLetter, `${where}: deadLetter`);
  if (options.decode !== undefined && typeof options.decode !== 'function' && !isStandardSchema(options.decode)) {
    throw new DeclarationError(`${where}: decode must be a function or a Standard Schema validator`);
  }
  return Object.freeze({
    workers,
    isKeyed,
    batch,
    transactional,
    onThreads,
    pollIntervalMs,
    leaseMs,
    timeoutMs,
    coalesceSettlements,
    settlementWindowMs,
    prefetch,
    concurrency: resolveConcurrency(options.concurrency, where),
    rate: resolveRate(options.rate, where),
    decode: options.decode,
    onDecodeFailure: policy,
    maxAttempts,
    deadLetter: options.deadLetter,
    retryBackoff: Object.freeze({
      initialMs: positiveMilliseconds(
        options.retryBackoff?.initialMs ?? DEFAULT_RETRY_BACKOFF_INITIAL_MS,
        'retryBackoff.initialMs',
        where,
      ),
      maxMs: positiveMilliseconds(options.retryBackoff?.maxMs ?? DEFAULT_RETRY_BACKOFF_MAX_MS, 'retryBackoff.maxMs', where),
    }),
  });
}

function resolveTransactional(options: SubscribeOptions<unknown>, isOnThreads: boolean, where: string): boolean {
  const value = options.transactional ?? false;
  if (typeof value !== 'boolean') throw new DeclarationError(`${where}: transactional must be true or false`);
  if (!value) return false;
  if (options.batch !== undefined) {
    throw new DeclarationError(
      `${where}: transactional mode lends one delivery's transaction to the handler, so it cannot be combined with batch; remove one of them`,
    );
  }
  if (isOnThreads) {
    throw new DeclarationError(
      `${where}: a handler on a worker thread cannot use the delivery's connection, so transactional cannot be combined with onThreads; remove one of them`,
    );
  }
  return true;
}

function resolveThreadOptions(
  value: ThreadOptions | undefined,
  where: string,
): ResolvedSubscribeOptions['onThreads'] {
  if (value === undefined) return undefined;
  if (value === null || typeof value !== 'object') {
    throw new DeclarationError(`${where}: onThreads must be an object such as { threads: 4, module: new URL('./handler.js', import.meta.url) }`);
  }
  if (value.module === undefined || value.module === null || String(value.module).length === 0) {
    throw new DeclarationError(`${where}: onThreads needs the module that exports the handler (onThreads.module)`);
  }
  const exportName = value.export ?? 'default';
  if (typeof exportName !== 'string' || exportName.length === 0) {
    throw new DeclarationError(`${where}: onThreads.export must name an export of the module`);
  }
  return Object.freeze({
    threads: positiveInteger(value.threads, 'onThreads.threads', where, MAX_THREADS),
    connections: positiveInteger(value.connections ?? 1, 'onThreads.connections', where, MAX_THREAD_CONNECTIONS),
    byKey: value.byKey === true,
    module: String(value.module),
    export: exportName,
  });
}

export function isStandardSchema(value: unknown): value is StandardSchemaV1<unknown, unknown> {
  return typeof value === 'object' && value !== null && '~standard' in value;
}
