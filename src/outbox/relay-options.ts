import { DeclarationError } from '../errors.js';
import { MAX_LEASE_MS, positiveInteger, positiveMilliseconds } from '../option-checks.js';

export interface RelayOptions {
  /** Records of one name per send. Default 100. */
  batch?: number;
  /** Names in work at once (each a claim, a send and a mark). Default 4; never more than the pool's size minus one. */
  concurrency?: number;
  /** How long the relay waits after it found nothing to send. Default: the broker's. */
  pollIntervalMs?: number;
  /** The lease on records being sent, whole seconds, renewed every half lease. Default: the broker's. */
  leaseMs?: number;
  /**
   * After a failed send, the name waits `initialMs * 2^(failures-1)`, capped at `maxMs`, rounded
   * up to whole seconds (the wait is the records' lease). Default 1 s to 60 s.
   */
  retryBackoff?: { initialMs?: number; maxMs?: number };
}

export interface ResolvedRelayOptions {
  readonly batch: number;
  readonly concurrency: number;
  readonly pollIntervalMs: number;
  readonly leaseMs: number;
  readonly retryBackoff: { readonly initialMs: number; readonly maxMs: number };
}

export const DEFAULT_RELAY_BATCH = 100;
export const DEFAULT_RELAY_CONCURRENCY = 4;
export const DEFAULT_RELAY_BACKOFF_INITIAL_MS = 1_000;
export const DEFAULT_RELAY_BACKOFF_MAX_MS = 60_000;

const OPTION_KEYS = new Set(['batch', 'concurrency', 'pollIntervalMs', 'leaseMs', 'retryBackoff']);

export function resolveRelayOptions(
  options: RelayOptions,
  defaults: { pollIntervalMs: number; leaseMs: number },
  where: string,
): ResolvedRelayOptions {
  if (options === null || typeof options !== 'object') throw new DeclarationError(`${where}: options must be an object`);
  for (const key of Object.keys(options)) {
    if (!OPTION_KEYS.has(key)) {
      throw new DeclarationError(`${where}: unknown relay option "${key}"; the options are ${[...OPTION_KEYS].join(', ')}`);
    }
  }
  const initialMs = positiveMilliseconds(options.retryBackoff?.initialMs ?? DEFAULT_RELAY_BACKOFF_INITIAL_MS, 'retryBackoff.initialMs', where);
  const maxMs = positiveMilliseconds(options.retryBackoff?.maxMs ?? DEFAULT_RELAY_BACKOFF_MAX_MS, 'retryBackoff.maxMs', where);
  if (maxMs < initialMs) {
    throw new DeclarationError(`${where}: retryBackoff.maxMs (${maxMs}) must be at least retryBackoff.initialMs (${initialMs})`);
  }
  return Object.freeze({
    batch: positiveInteger(options.batch ?? DEFAULT_RELAY_BATCH, 'batch', where),
    concurrency: positiveInteger(options.concurrency ?? DEFAULT_RELAY_CONCURRENCY, 'concurrency', where),
    pollIntervalMs: positiveMilliseconds(options.pollIntervalMs ?? defaults.pollIntervalMs, 'pollIntervalMs', where),
    leaseMs: positiveMilliseconds(options.leaseMs ?? defaults.leaseMs, 'leaseMs', where, MAX_LEASE_MS),
    retryBackoff: Object.freeze({ initialMs, maxMs }),
  });
}
