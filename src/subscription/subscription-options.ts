import type { Message } from '../delivery/message.js';
import type { Outcome } from '../delivery/outcome.js';
import type { Queue } from '../definition/define-table.js';
import type { PublishOptions } from '../publish/publish-options.js';
import { DeclarationError } from '../errors.js';
import type { StandardSchemaV1 } from '../delivery/standard-schema.js';

/** What a handler may use besides its message. */
export interface HandlerContext {
  /** Runs a query on a pool connection that is not the delivery's. `$1` placeholders on Postgres, `?` elsewhere. */
  query<Row = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<Row[]>;
  /** Publishes through the broker (on a connection of its own); wakes this broker's subscriptions. */
  publish<Payload>(queue: Queue<Payload>, payload: Payload, options?: PublishOptions): Promise<string>;
  /** Aborted when the broker stops and the handler ran past the stop timeout. */
  readonly signal: AbortSignal;
}

export type Handler<Payload> = (
  message: Message<Payload>,
  context: HandlerContext,
) => Outcome | void | undefined | Promise<Outcome | void | undefined>;

/** A payload decoder: a function of the bytes, or a Standard Schema validator over the JSON value. */
export type Decoder<Payload> =
  | ((raw: Buffer, row: Readonly<Record<string, unknown>>) => Payload | Promise<Payload>)
  | StandardSchemaV1<unknown, Payload>;

/** What happens to a row whose payload does not decode. */
export type DecodeFailurePolicy = 'drop' | 'retry' | { readonly retryAfterMs: number };

export interface SubscribeOptions<Payload = unknown> {
  /** Deliveries in work at once. Default 1. */
  workers?: number;
  /** The poll interval of this subscription; default the broker's. */
  pollIntervalMs?: number;
  /** The lease of this subscription (lease form); default the broker's. */
  leaseMs?: number;
  /** Decodes the payload bytes; default JSON. */
  decode?: Decoder<Payload>;
  /** Default `'drop'`. */
  onDecodeFailure?: DecodeFailurePolicy;
  /** With `deadLetter`: the delivery that would retry at this attempt moves to the dead letter instead. */
  maxAttempts?: number;
  /** A group (on a grouped table) or a table (`name` or `schema.name`) with the same columns. */
  deadLetter?: string;
  /** The growing delay after a handler throws: `initialMs * 2^(attempt-1)` with jitter, capped at `maxMs`. */
  retryBackoff?: { initialMs?: number; maxMs?: number };
}

export interface ResolvedSubscribeOptions {
  readonly workers: number;
  readonly pollIntervalMs: number;
  readonly leaseMs: number;
  readonly decode: Decoder<unknown> | undefined;
  readonly onDecodeFailure: DecodeFailurePolicy;
  readonly maxAttempts: number | undefined;
  readonly deadLetter: string | undefined;
  readonly retryBackoff: { readonly initialMs: number; readonly maxMs: number };
}

export const DEFAULT_RETRY_BACKOFF_INITIAL_MS = 1_000;
export const DEFAULT_RETRY_BACKOFF_MAX_MS = 3_600_000;

const OPTION_KEYS = new Set([
  'workers',
  'pollIntervalMs',
  'leaseMs',
  'decode',
  'onDecodeFailure',
  'maxAttempts',
  'deadLetter',
  'retryBackoff',
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
  const workers = positiveInteger(options.workers ?? 1, 'workers', where);
  const pollIntervalMs = positiveNumber(options.pollIntervalMs ?? defaults.pollIntervalMs, 'pollIntervalMs', where);
  const leaseMs = positiveNumber(options.leaseMs ?? defaults.leaseMs, 'leaseMs', where);
  if ((options.maxAttempts === undefined) !== (options.deadLetter === undefined)) {
    throw new DeclarationError(
      `${where}: maxAttempts and deadLetter come together; declare both (for example { maxAttempts: 5, deadLetter: 'failed' })`,
    );
  }
  const maxAttempts =
    options.maxAttempts === undefined ? undefined : positiveInteger(options.maxAttempts, 'maxAttempts', where);
  const policy = options.onDecodeFailure ?? 'drop';
  if (
    policy !== 'drop' &&
    policy !== 'retry' &&
    !(typeof policy === 'object' && policy !== null && Number.isFinite(policy.retryAfterMs) && policy.retryAfterMs >= 0)
  ) {
    throw new DeclarationError(`${where}: onDecodeFailure must be 'drop', 'retry' or { retryAfterMs }`);
  }
  if (options.decode !== undefined && typeof options.decode !== 'function' && !isStandardSchema(options.decode)) {
    throw new DeclarationError(`${where}: decode must be a function or a Standard Schema validator`);
  }
  return Object.freeze({
    workers,
    pollIntervalMs,
    leaseMs,
    decode: options.decode,
    onDecodeFailure: policy,
    maxAttempts,
    deadLetter: options.deadLetter,
    retryBackoff: Object.freeze({
      initialMs: positiveNumber(options.retryBackoff?.initialMs ?? DEFAULT_RETRY_BACKOFF_INITIAL_MS, 'retryBackoff.initialMs', where),
      maxMs: positiveNumber(options.retryBackoff?.maxMs ?? DEFAULT_RETRY_BACKOFF_MAX_MS, 'retryBackoff.maxMs', where),
    }),
  });
}

export function isStandardSchema(value: unknown): value is StandardSchemaV1<unknown, unknown> {
  return typeof value === 'object' && value !== null && '~standard' in value;
}

function positiveInteger(value: unknown, name: string, where: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1) {
    throw new DeclarationError(`${where}: ${name} must be a whole number of at least 1, got ${String(value)}`);
  }
  return value;
}

function positiveNumber(value: unknown, name: string, where: string): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
    throw new DeclarationError(`${where}: ${name} must be a number of milliseconds above 0, got ${String(value)}`);
  }
  return value;
}
