import type { Queue } from '../definition/define-table.js';
import { encodeHeaders, encodePayload, payloadColumnValue, requirePayloadSize } from '../delivery/codec.js';
import { MAX_SCHEDULE_NAME_LENGTH } from '../dialect/schedule-statements.js';
import { DeclarationError, EncodeError } from '../errors.js';
import { millisecondsFromZero, positiveInteger, positiveMilliseconds } from '../option-checks.js';
import { checkTimeZone, DEFAULT_TIME_ZONE, parseCron, type CronSchedule } from './cron.js';
import type { MissedPolicy, TickPolicy } from './tick-plan.js';

/**
 * The header every scheduled message carries: the instant of its tick, ISO 8601 in UTC with
 * milliseconds (`2026-03-08T07:00:00.000Z`), the same for the one message of that tick whichever
 * replica wrote it, so a handler can be idempotent per tick.
 */
export const SCHEDULED_AT_HEADER = 'tablequeue-scheduled-at';

export interface ScheduleOptions<Payload = unknown> {
  /**
   * Five fields (minute hour day-of-month month day-of-week) or six (seconds first); names such
   * as `MON-FRI` and `JAN`; or `@yearly`, `@monthly`, `@weekly`, `@daily`, `@hourly`.
   */
  cron: string;
  /** The IANA zone the cron reads its times in (`America/New_York`). Default `UTC`. */
  timezone?: string;
  /** The payload of every tick's message. Default null. */
  payload?: Payload;
  /** Headers of every tick's message, beside `tablequeue-scheduled-at`. */
  headers?: Record<string, string>;
  /**
   * Ticks that passed while no replica ran: `'skip'` (default) fires the latest only if it is at
   * most `missedGraceMs` old, `'once'` fires the latest whatever its age, `'all'` fires each, in
   * order, up to `backfillLimit`. Ticks that get no message count as missed.
   */
  missed?: MissedPolicy;
  /** How late the latest missed tick may still fire under `'skip'`. Default 60,000 ms; above jitterMs. */
  missedGraceMs?: number;
  /** Under `'all'`: the most missed ticks fired at once, the newest; older ones are counted missed. Default 100. */
  backfillLimit?: number;
  /** Each replica waits a random 0..jitterMs before firing a tick, to spread their attempts. Default 0. */
  jitterMs?: number;
}

/** A schedule as declared and checked, ready for the scheduler. */
export interface ScheduleDeclaration extends TickPolicy {
  readonly name: string;
  readonly queue: Queue<unknown>;
  readonly cron: CronSchedule;
  readonly payload: unknown;
  readonly headers: Readonly<Record<string, string>>;
  readonly jitterMs: number;
}

/**
 * Long enough for a late firing (the jitter, a slow database, a retry after an error) to still
 * fire its tick; short enough that a replica back after an outage does not fire a stale tick as
 * if it were on time: a minute, which covers a rolling deploy's gap for a schedule of minutes
 * while an hourly report missed by a night is skipped.
 */
export const DEFAULT_MISSED_GRACE_MS = 60_000;
export const DEFAULT_BACKFILL_LIMIT = 100;
/** A firing writes its backfill in one transaction: bounded well under a publishMany chunk. */
const MAX_BACKFILL_LIMIT = 10_000;

const OPTION_KEYS = new Set(['cron', 'timezone', 'payload', 'headers', 'missed', 'missedGraceMs', 'backfillLimit', 'jitterMs']);
const MISSED_POLICIES: readonly MissedPolicy[] = ['skip', 'once', 'all'];

/** Letters, digits and `_ - . :`, starting with a letter, digit or `_`: a name that reads the same in logs, metrics and SQL. */
const SCHEDULE_NAME = /^[A-Za-z0-9_][A-Za-z0-9_.:-]*$/;

/** Checks a `broker.schedule(name, queue, options)` declaration; every refusal is a `DeclarationError`. */
export function resolveScheduleDeclaration(
  name: unknown,
  queue: Queue<unknown>,
  options: ScheduleOptions,
  context: { maxPayloadBytes: number },
): ScheduleDeclaration {
  if (typeof name !== 'string' || !SCHEDULE_NAME.test(name) || name.length > MAX_SCHEDULE_NAME_LENGTH) {
    throw new DeclarationError(
      `schedule: the name must be 1 to ${MAX_SCHEDULE_NAME_LENGTH} letters, digits, "_", "-", "." or ":", starting with a letter, digit or "_", got ${JSON.stringify(name) ?? typeof name}`,
    );
  }
  const where = `schedule "${name}"`;
  if (options === null || typeof options !== 'object') {
    throw new DeclarationError(`${where}: options must be an object such as { cron: '0 * * * *' }`);
  }
  for (const key of Object.keys(options)) {
    if (!OPTION_KEYS.has(key)) throw new DeclarationError(`${where}: unknown option "${key}"; the options are ${[...OPTION_KEYS].join(', ')}`);
  }
  const spec = queue.table.spec;
  if (spec.headers === undefined) {
    throw new DeclarationError(
      `${where}: table "${spec.qualifiedName}" has no headers column, and each tick's message carries its time in the ${SCHEDULED_AT_HEADER} header; declare headers in defineTable`,
    );
  }
  const timeZone = checkTimeZone(options.timezone ?? DEFAULT_TIME_ZONE, where);
  const cron = parseCron(options.cron, timeZone, where);
  const missed = options.missed ?? 'skip';
  if (!MISSED_POLICIES.includes(missed)) {
    throw new DeclarationError(`${where}: missed must be 'skip', 'once' or 'all', got ${JSON.stringify(missed) ?? typeof missed}`);
  }
  const jitterMs = millisecondsFromZero(options.jitterMs ?? 0, 'jitterMs', where);
  const missedGraceMs = positiveMilliseconds(options.missedGraceMs ?? DEFAULT_MISSED_GRACE_MS, 'missedGraceMs', where);
  if (missedGraceMs <= jitterMs) {
    throw new DeclarationError(
      `${where}: missedGraceMs (${missedGraceMs}) must be above jitterMs (${jitterMs}), or a tick fired late by its jitter would count as missed`,
    );
  }
  const backfillLimit = positiveInteger(options.backfillLimit ?? DEFAULT_BACKFILL_LIMIT, 'backfillLimit', where, MAX_BACKFILL_LIMIT);
  const headers = options.headers ?? {};
  const payload = options.payload ?? null;
  asDeclarationError(() => {
    encodeHeaders(headers, where);
    if (spec.payload !== undefined) {
      const encoded = requirePayloadSize(encodePayload(payload, where), context.maxPayloadBytes, where);
      payloadColumnValue(encoded, spec.payloadHolds, payload instanceof Uint8Array, where);
    }
  });
  if (Object.hasOwn(headers, SCHEDULED_AT_HEADER)) {
    throw new DeclarationError(`${where}: the ${SCHEDULED_AT_HEADER} header is each tick's own time; remove it from headers`);
  }
  return Object.freeze({ name, queue, cron, payload, headers: Object.freeze({ ...headers }), jitterMs, missed, missedGraceMs, backfillLimit });
}

/** The codec's refusals, which name the field, as declaration errors: nothing is published yet. */
function asDeclarationError(check: () => void): void {
  try {
    check();
  } catch (error) {
    if (!(error instanceof EncodeError)) throw error;
    throw new DeclarationError(error.message.replace(/; nothing was written$/, ''), { cause: error });
  }
}
