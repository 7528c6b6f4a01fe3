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
import { withTransaction, type TransactionStatements } from '../driver/connection-scope.js';
import type { Connection, Driver } from '../driver/driver.js';
import { createSideTable } from '../driver/side-table-creation.js';
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

/**
 * The `CREATE TABLE IF NOT EXISTS` of the uses table that rates per key (`rate: { key: true }`)
 * keep beside the rate limits table, named `<rateLimitsTable>_by_key`; created when such a
 * subscription opens if missing, as the rate limits table is.
 */
export function createRateLimitsByKeyTableSql(database: DdlDialectName, table: string = DEFAULT_RATE_LIMITS_TABLE): string {
  return createRateLimitStatements(database).byKey.createTable(parseRateLimitsTable(table, database));
}

/** The subscribe option `rate`. */
export interface RateOption {
  /**
   * Claims (rows taken) of the queue within any window of `perMs`, across every broker and
   * process; with `key`, of each partition key.
   */
  readonly limit: number;
  /** The window, in milliseconds. */
  readonly perMs: number;
  /**
   * `true`: the limit holds per partition key (the table's `partitionKey` column), "100 a minute
   * per tenant"; rows without a key are not limited. Lease form only.
   */
  readonly key?: boolean;
}

export interface RateLimitSettings {
  readonly limit: number;
  readonly perMs: number;
  /** Per partition key (`rate.key`). */
  readonly key: boolean;
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

const KEYS = new Set(['limit', 'perMs', 'key']);

export function resolveRate(value: RateOption | undefined, where: string): RateLimitSettings | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new DeclarationError(`${where}: rate must be an object such as { limit: 50, perMs: 1000 }`);
  }
  for (const key of Object.keys(value)) {
    if (!KEYS.has(key)) throw new DeclarationError(`${where}: unknown rate option "${key}"; the options are limit, perMs and key`);
  }
  const { limit, perMs, key } = value;
  if (key !== undefined && typeof key !== 'boolean') {
    throw new DeclarationError(
      `${where}: rate.key must be true (a limit per partition key) or false, got ${JSON.stringify(key) ?? String(key)}`,
    );
  }
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
  return Object.freeze({ limit, perMs, key: key === true });
}

/**
 * At open. The lease form takes the slots inside its claim's own short transaction. The row lock
 * and advisory forms reserve slots in a transaction of their own before the claim (a row lock
 * claim's transaction lasts through its handler, so taking them there would hold the rate guard
 * through every handler) and give back what the claim did not take. A rate per key needs the
 * claim statement itself to read each key's room, and its uses committed before the handler runs:
 * only the lease claim does both. FIFO group claims run behind a guard of their own that the
 * rate's is not built to join.
 */
export function checkRateFits(settings: RateLimitSettings, spec: TableSpec, dialect: Dialect, subscription: string): void {
  const where = `subscription "${subscription}"`;
  if (settings.key && spec.form !== 'lease') {
    const form = spec.form === 'rowLock' ? 'row lock' : 'advisory lock';
    throw new UnsupportedError({
      database: dialect.name,
      feature: `rate limits per key in the ${form} form`,
      message: `${where}: a rate per key takes each key's room in the claim statement and records its uses before the handler runs, which only a lease claim's own transaction does; table "${spec.qualifiedName}" uses the ${form} form: declare a lockedUntil column (lease form), or remove rate.key to limit the whole queue`,
    });
  }
  if (settings.key && spec.partitionKey === undefined) {
    throw new DeclarationError(
      `${where}: rate.key limits each partition key; table "${spec.qualifiedName}" declares no partitionKey column: declare one in defineTable or remove rate.key`,
    );
  }
  if (spec.group?.fifo === true) {
    throw new UnsupportedError({
      database: dialect.name,
      feature: 'rate limits on FIFO groups',
      message: `${where}: table "${spec.qualifiedName}" has FIFO groups, whose claims run behind a guard of their own; rate limits are built for other tables: remove rate`,
    });
  }
}

/**
 * A subscription's rate limit: its slot rows in the rate limits table (or, per key, its uses in
 * the table beside it), the claims' reads and stamps of them, and what the claim loop needs to
 * wait for the next free slot rather than poll.
 */
export class RateLimiter implements RateClaim {
  readonly settings: RateLimitSettings;
  /** The rate limits table when the claim statement reads each key's room; undefined for a whole-queue rate. */
  readonly byKeyTable: RateLimitsTable | undefined;
  readonly #guard: Statement | undefined;
  readonly #free: Statement;
  readonly #use: Statement;
  readonly #release: Statement;
  readonly #createTable: string;
  readonly #createKeyUsesTable: string | undefined;
  readonly #addSlots: Statement;
  readonly #recordKeyUse: Statement;
  readonly #forgetKeyUses: Statement;
  readonly #oldestKeyUse: Statement;
  readonly #partitionKey: string | undefined;
  readonly #reservation: TransactionStatements;
  readonly #queue: ParamValues;
  /** Host milliseconds at which the next slot frees, set by a claim that found none free. */
  #nextFreeAt: number | undefined;
  /** Per key: host milliseconds at which the oldest use in the window leaves it, after a claim that took nothing. */
  #nextKeyUseLeavesAt: number | undefined;
  /** Host milliseconds of the last delete of uses past the window (per key). */
  #forgottenAt = 0;
  /** Claims that found every slot used within the window, so took nothing. */
  heldBack = 0;

  constructor(options: {
    dialect: Dialect;
    table: RateLimitsTable;
    spec: TableSpec;
    group: string | undefined;
    settings: RateLimitSettings;
  }) {
    const { dialect, table, settings } = options;
    const statements = createRateLimitStatements(dialect.name);
    this.settings = settings;
    this.byKeyTable = settings.key ? table : undefined;
    this.#guard = statements.guard(table);
    this.#free = statements.free(table);
    this.#use = statements.use(table);
    this.#release = statements.release(table);
    this.#createTable = statements.createTable(table);
    this.#createKeyUsesTable = settings.key ? statements.byKey.createTable(table) : undefined;
    this.#addSlots = statements.addSlots(table);
    this.#recordKeyUse = statements.byKey.record(table);
    this.#forgetKeyUses = statements.byKey.forget(table);
    this.#oldestKeyUse = statements.byKey.oldest(table);
    this.#partitionKey = options.spec.partitionKey;
    // Read committed, so the free slots are read after the guard is taken; SQLite's IMMEDIATE is the guard.
    const begin = dialect.capabilities.isolationLevels.includes('read committed')
      ? dialect.session.begin({ isolation: 'read committed' })
      : dialect.session.begin({ sqliteBegin: 'immediate' });
    this.#reservation = { begin, commit: dialect.session.commit(), rollback: dialect.session.rollback() };
    this.#queue = {
      [`column:${RATE_LIMIT_COLUMNS.queueTable}`]: options.spec.qualifiedName,
      [`column:${RATE_LIMIT_COLUMNS.queueName}`]: options.group ?? '',
      // Per key, slot 1 is only the guard's row.
      slots: settings.key ? 1 : settings.limit,
    };
  }

  /** What a lease claim runs under the rate. */
  get statements(): readonly Statement[] {
    const guard = this.#guard ? [this.#guard] : [];
    if (this.byKeyTable !== undefined) return [...guard, this.#recordKeyUse, this.#forgetKeyUses, this.#oldestKeyUse];
    return [...guard, this.#free, this.#use];
  }

  /** What a reservation around a row lock or advisory claim runs. */
  get reservationStatements(): readonly Statement[] {
    return [...(this.#guard ? [this.#guard] : []), this.#free, this.#use, this.#release];
  }

  /**
   * Creates the tables (another broker creating them at the same moment counts as created) and
   * the queue's slots. Brokers starting at once can collide on the same new slots, so that
   * failure is tried once more, when the other's slots are there and the insert adds none. The
   * slots are written here, not in the claim, so the claims' guard row always exists.
   */
  async ensure(driver: Driver): Promise<void> {
    await createSideTable(driver, 'rate.createTable', this.#createTable);
    if (this.#createKeyUsesTable !== undefined) await createSideTable(driver, 'rate.createKeyUsesTable', this.#createKeyUsesTable);
    await onceMoreAfterFailure(() => driver.execute(bindStatement(this.#addSlots, this.#queue)));
  }

  async guard(connection: Connection): Promise<void> {
    if (this.#guard !== undefined) await connection.execute(bindStatement(this.#guard, this.#queue));
  }

  /**
   * How many rows the rate lets this claim take. Per key the claim statement reads each key's room
   * itself, so the rate sets no bound on the claim as a whole.
   */
  async free(connection: Connection, values: ParamValues): Promise<number> {
    if (this.byKeyTable !== undefined) return Number.POSITIVE_INFINITY;
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

  /** What the claim statement binds besides its own values: per key, the queue, the window and the limit. */
  claimValues(values: ParamValues): ParamValues {
    if (this.byKeyTable === undefined) return {};
    return { ...this.#queue, rateFreeSince: hostMilliseconds(values) - this.settings.perMs, rateLimit: this.settings.limit };
  }

  /** Uses one slot per row taken; per key, records each key's rows and now and then forgets uses past the window. */
  async use(connection: Connection, values: ParamValues, rows: readonly Record<string, unknown>[]): Promise<void> {
    const usedAt = hostMilliseconds(values);
    const freeSince = usedAt - this.settings.perMs;
    if (this.byKeyTable === undefined) {
      await connection.execute(bindStatement(this.#use, { ...this.#queue, usedAt, freeSince, taken: rows.length }));
      return;
    }
    const usesByKey = new Map<unknown, number>();
    for (const row of rows) {
      const key = row[this.#partitionKey ?? ''];
      if (key !== null && key !== undefined) usesByKey.set(key, (usesByKey.get(key) ?? 0) + 1);
    }
    for (const [rateKey, uses] of usesByKey) {
      await connection.execute(bindStatement(this.#recordKeyUse, { ...this.#queue, rateKey: rateKey as string, usedAt, uses }));
    }
    // Once a window: the uses a window no longer counts only cost the claims that read past them.
    if (usedAt - this.#forgottenAt >= this.settings.perMs) {
      this.#forgottenAt = usedAt;
      await connection.execute(bindStatement(this.#forgetKeyUses, { ...this.#queue, freeSince }));
    }
  }

  /**
   * After a claim that took nothing, per key: when the queue's oldest use in the window leaves it,
   * the earliest moment a key held back could have room again.
   */
  async tookNothing(connection: Connection, values: ParamValues): Promise<void> {
    if (this.byKeyTable === undefined) return;
    const freeSince = hostMilliseconds(values) - this.settings.perMs;
    const oldest = (await connection.execute(bindStatement(this.#oldestKeyUse, { ...this.#queue, freeSince }))).rows[0]?.[
      OLDEST_USE_COLUMN
    ];
    this.#nextKeyUseLeavesAt = oldest === null || oldest === undefined ? undefined : Number(oldest) + this.settings.perMs;
  }

  /**
   * The row lock and advisory forms: reserves up to `want` slots in a short transaction of its
   * own, claims at most that many rows, and gives back the slots the claim did not use (all of
   * them when it throws), then calls `onGivenBack`. A claim the rate holds back takes nothing and
   * notes the next free slot.
   */
  async aroundClaim<Row>(
    driver: Driver,
    want: number,
    claim: (limit: number) => Promise<Row[]>,
    on: { readonly releaseError: (error: unknown) => void; readonly givenBack: () => void },
  ): Promise<Row[]> {
    let usedAt = 0;
    const reserved = await withTransaction(driver, this.#reservation, async (_transaction, connection) => {
      await this.guard(connection);
      // The time the guard let this reservation through: one read before a wait on the guard
      // would stamp its slots early, and they would free before a window had passed.
      const values = { now: new Date() };
      usedAt = values.now.getTime();
      const taken = Math.min(want, await this.free(connection, values));
      if (taken > 0) await this.use(connection, values, Array.from({ length: taken }, () => ({})));
      return taken;
    });
    if (reserved === 0) return [];
    const release = async (unused: number) => {
      if (unused <= 0) return;
      try {
        await driver.execute(bindStatement(this.#release, { ...this.#queue, usedAt, unused }));
      } catch (error) {
        // The slots stay used until the window passes: the rate runs below its limit, never above.
        on.releaseError(error);
        return;
      }
      on.givenBack();
    };
    let rows: Row[];
    try {
      rows = await claim(reserved);
    } catch (error) {
      await release(reserved);
      throw error;
    }
    await release(reserved - rows.length);
    return rows;
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

  /**
   * Per key, after a claim that took nothing: milliseconds until the oldest use in the window
   * leaves it, so an empty wait is no longer than that; undefined when no use is in the window.
   * The queue may simply be empty, so wakes still end the wait. Read once.
   */
  takeEmptyWaitCapMs(nowMs: number): number | undefined {
    const at = this.#nextKeyUseLeavesAt;
    this.#nextKeyUseLeavesAt = undefined;
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
