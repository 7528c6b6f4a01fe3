import type { RateClaim } from '../claim/form-context.js';
import type { DdlDialectName } from '../definition/define-table.js';
import type { Dialect } from '../dialect/dialect.js';
import {
  createRateLimitStatements,
  DEFAULT_RATE_LIMITS_TABLE,
  parseRateLimitsTable,
  FREE_SLOTS_COLUMN,
  OLDEST_USE_COLUMN,
  RATE_LIMIT_COLUMNS,
  type RateLimitsTable,
} from '../dialect/rate-limit-statements.js';
import type { Connection, Driver } from '../driver/driver.js';
import { DeclarationError, UnsupportedError } from '../errors.js';
import { bindStatement, type ParamValues, type Statement } from '../statement.js';
import type { TableSpec } from '../table/table-spec.js';

/**
 * The rate limits table's `CREATE TABLE IF NOT EXISTS`, for a migration of the service's own: a
 * subscription with `rate` creates it when it opens if missing, so running this first is optional.
 * `table` is `name` or `schema.name` (default `tablequeue_rate_limits`, the broker's default
 * `rateLimitsTable`).
 */
export function createRateLimitsTableSql(database: DdlDialectName, table: string = DEFAULT_RATE_LIMITS_TABLE): string {
  return createRateLimitStatements(database).createTable(parseRateLimitsTable(table, database));
}

/** The subscribe option `rate`. */
export interface RateOption {
  /** Claims (rows taken) of the queue within any window of `perMs`, across every broker and process. */
  readonly limit: number;
  /** The window, in milliseconds. */
  readonly perMs: number;
}

export interface RateLimitSettings {
  readonly limit: number;
  readonly perMs: number;
}

/**
 * One slot row per claim a window allows, each read by every claim of the queue: 1,000 rows cost
 * a claim about a millisecond to count, and MySQL's recursive CTE that adds them stops at 1,000
 * by default. A higher rate is the same rate over a shorter window (1,000 per 6 s, not 10,000 a
 * minute).
 */
export const MAX_RATE_LIMIT = 1_000;

/** A window beyond a day is a schedule, not a rate. */
export const MAX_RATE_WINDOW_MS = 86_400_000;

const KEYS = new Set(['limit', 'perMs']);

export function resolveRate(value: RateOption | undefined, where: string): RateLimitSettings | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new DeclarationError(`${where}: rate must be an object such as { limit: 50, perMs: 1000 }`);
  }
  for (const key of Object.keys(value)) {
    if (key === 'key') {
      throw new DeclarationError(
        `${where}: rate.key (a rate per partition key) is not built; rate limits the whole queue, so remove key`,
      );
    }
    if (!KEYS.has(key)) throw new DeclarationError(`${where}: unknown rate option "${key}"; the options are limit and perMs`);
  }
  const { limit, perMs } = value;
  if (typeof limit !== 'number' || !Number.isInteger(limit) || limit < 1 || limit > MAX_RATE_LIMIT) {
    throw new DeclarationError(
      `${where}: rate.limit must be a whole number of claims from 1 to ${MAX_RATE_LIMIT}, got ${String(limit)} (for a higher rate, shorten perMs)`,
    );
  }
  if (typeof perMs !== 'number' || !Number.isInteger(perMs) || perMs < 1 || perMs > MAX_RATE_WINDOW_MS) {
    throw new DeclarationError(
      `${where}: rate.perMs must be a whole number of milliseconds from 1 to ${MAX_RATE_WINDOW_MS}, got ${String(perMs)}`,
    );
  }
  return Object.freeze({ limit, perMs });
}

/**
 * At open: the slots are taken in the lease claim's own short transaction; the row lock form's
 * claim transaction lasts as long as its handler, so it would hold the rate guard through every
 * handler, and the advisory form claims without one. FIFO group claims run behind a guard of
 * their own that the rate's is not built to join.
 */
export function checkRateFits(spec: TableSpec, dialect: Dialect, subscription: string): void {
  const where = `subscription "${subscription}"`;
  if (spec.form !== 'lease') {
    const form = spec.form === 'rowLock' ? 'row lock' : 'advisory lock';
    throw new UnsupportedError({
      database: dialect.name,
      feature: `rate limits in the ${form} form`,
      message: `${where}: a rate limit takes its slots inside the lease claim's own transaction; table "${spec.qualifiedName}" uses the ${form} form: declare a lockedUntil column (lease form) or remove rate`,
    });
  }
  if (spec.group?.fifo === true) {
    throw new UnsupportedError({
      database: dialect.name,
      feature: 'rate limits on FIFO groups',
      message: `${where}: table "${spec.qualifiedName}" has FIFO groups, whose claims run behind a guard of their own; rate limits are built for other lease tables: remove rate`,
    });
  }
}

/**
 * A subscription's rate limit: its slot rows in the rate limits table, the claims' reads and
 * stamps of them, and what the claim loop needs to wait for the next free slot rather than poll.
 */
export class RateLimiter implements RateClaim {
  readonly settings: RateLimitSettings;
  readonly #guard: Statement | undefined;
  readonly #free: Statement;
  readonly #use: Statement;
  readonly #createTable: string;
  readonly #addSlots: Statement;
  readonly #queue: ParamValues;
  /** Host milliseconds at which the next slot frees, set by a claim that found none free. */
  #nextFreeAt: number | undefined;
  /** Claims that found every slot used within the window, so took nothing. */
  heldBack = 0;

  constructor(options: {
    dialect: Dialect;
    table: RateLimitsTable;
    spec: TableSpec;
    group: string | undefined;
    settings: RateLimitSettings;
  }) {
    const statements = createRateLimitStatements(options.dialect.name);
    this.settings = options.settings;
    this.#guard = statements.guard(options.table);
    this.#free = statements.free(options.table);
    this.#use = statements.use(options.table);
    this.#createTable = statements.createTable(options.table);
    this.#addSlots = statements.addSlots(options.table);
    this.#queue = {
      [`column:${RATE_LIMIT_COLUMNS.queueTable}`]: options.spec.qualifiedName,
      [`column:${RATE_LIMIT_COLUMNS.queueName}`]: options.group ?? '',
      slots: options.settings.limit,
    };
  }

  get statements(): readonly Statement[] {
    return [...(this.#guard ? [this.#guard] : []), this.#free, this.#use];
  }

  /**
   * Creates the table and the queue's slots. Brokers starting at once can collide on `CREATE
   * TABLE IF NOT EXISTS` or on the same new slots, so a failure is tried once more, when the
   * other's work is there and the statement does nothing (as the heartbeat table's). The slots
   * are written here, not in the claim, so the claims' guard row always exists.
   */
  async ensure(driver: Driver): Promise<void> {
    await onceMoreAfterFailure(() => driver.execute({ name: 'rate.createTable', sql: this.#createTable, values: [] }));
    await onceMoreAfterFailure(() => driver.execute(bindStatement(this.#addSlots, this.#queue)));
  }

  async guard(connection: Connection): Promise<void> {
    if (this.#guard !== undefined) await connection.execute(bindStatement(this.#guard, this.#queue));
  }

  async free(connection: Connection, values: ParamValues): Promise<number> {
    const nowMs = hostMilliseconds(values);
    const freeSince = nowMs - this.settings.perMs;
    const row = (await connection.execute(bindStatement(this.#free, { ...this.#queue, freeSince }))).rows[0];
    const free = Number(row?.[FREE_SLOTS_COLUMN] ?? 0);
    if (free > 0) return free;
    this.heldBack += 1;
    const oldestUse = Number(row?.[OLDEST_USE_COLUMN] ?? nowMs);
    this.#nextFreeAt = oldestUse + this.settings.perMs;
    return 0;
  }

  async use(connection: Connection, values: ParamValues, taken: number): Promise<void> {
    const usedAt = hostMilliseconds(values);
    const freeSince = usedAt - this.settings.perMs;
    await connection.execute(bindStatement(this.#use, { ...this.#queue, usedAt, freeSince, taken }));
  }

  /**
   * After a claim that took nothing: milliseconds until the slot it found used longest ago frees,
   * when the rate held it back; undefined otherwise. Read once: the next claim decides again.
   */
  takeWaitMs(nowMs: number): number | undefined {
    const at = this.#nextFreeAt;
    this.#nextFreeAt = undefined;
    return at === undefined ? undefined : Math.max(1, at - nowMs);
  }
}

/** The claim's now in milliseconds: `values.now`, the Date on the host's clock its lease is stamped from. */
function hostMilliseconds(values: ParamValues): number {
  const now = values.now;
  if (!(now instanceof Date)) throw new TypeError('a claim under a rate limit is bound with its now as a Date');
  return now.getTime();
}

async function onceMoreAfterFailure(run: () => Promise<unknown>): Promise<void> {
  try {
    await run();
  } catch {
    await run();
  }
}
