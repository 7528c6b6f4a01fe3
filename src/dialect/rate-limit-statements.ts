/**
 * The rate limits table (`subscribe(…, { rate: { limit, perMs } })`): a sliding window of `limit`
 * slot rows per queue, each holding when it was last used (`used_at_ms`, milliseconds since the
 * epoch on the claiming host's clock). A claim takes only slots unused for `perMs`, stamps one per
 * row it took, and the claim's transaction holds slot 1's row lock (the queue's rate guard) so no
 * other claim of the queue reads the same slots free.
 *
 * Why slots and not a token bucket: a bucket of `limit` tokens refilled at `limit` per `perMs`
 * lets a full bucket go at once and then the refill, so 50 per second can be 100 claims within one
 * second (the test's own numbers). A slot is reused only `perMs` after its last use, so any window
 * of `perMs` holds at most `limit` claims, at the cost of `limit` rows per queue and a count over
 * them in each claim (see MAX_RATE_LIMIT in subscription/rate-limit.ts for the cap of 1,000).
 *
 * Why the host clock: the claim already carries the host's now (its lease is stamped from it), and
 * the wait before the next claim is a host timer set from `oldest_use_ms`. Hosts whose clocks
 * differ by δ shorten the window by δ: with clocks kept by NTP (a few ms), 50 per 1,000 ms is at
 * worst 50 per 995 ms.
 */
import type { Statement } from '../statement.js';
import { identifier, joinSql, param, renderStatement, sql, type SqlText } from './quoting.js';
import { parseSideTable, renderCreateSideTable, sideTableName, sideTableStyle, sideTableTypes, type SideTable } from './side-table.js';

/** The table the rate slots live in when the broker option `rateLimitsTable` names none. */
export const DEFAULT_RATE_LIMITS_TABLE = 'tablequeue_rate_limits';

/** Where the rate limits table lives; its uses table per key is named after it. */
export type RateLimitsTable = SideTable;

export type RateLimitDatabase = 'postgres' | 'mysql' | 'mariadb' | 'sqlite';

export const RATE_LIMIT_COLUMNS = Object.freeze({
  /** The queue table's qualified name as declared. */
  queueTable: 'queue_table',
  /** The queue's group, or empty text on a table without groups. */
  queueName: 'queue_name',
  /** 1 to `limit`; slots above a lowered limit are kept and never taken. */
  slot: 'slot',
  /** When the slot was last used, host milliseconds since the epoch; 0 for never. */
  usedAtMs: 'used_at_ms',
});

/**
 * The uses table of a rate per partition key (`rate: { key: true }`): how many rows of each key
 * claims took at each host millisecond. Keys are many and mostly idle, so they get no slot rows of
 * their own: a key's uses within the window are summed in the claim statement, which takes a key's
 * rows only up to the room the sum leaves, and uses older than the window are deleted.
 */
export const RATE_KEY_USE_COLUMNS = Object.freeze({
  queueTable: 'queue_table',
  queueName: 'queue_name',
  /** The partition key's value. */
  rateKey: 'rate_key',
  /** When the rows were taken, host milliseconds since the epoch. */
  usedAtMs: 'used_at_ms',
  /** Rows of the key taken at that millisecond. */
  uses: 'uses',
});

/** The uses table of rates per key is named after the rate limits table: `<name>_by_key`. */
export function rateKeyUsesTableOf(table: RateLimitsTable): RateLimitsTable {
  return Object.freeze({ schema: table.schema, name: `${table.name}_by_key` });
}

/** `free`'s columns: slots free now, and the oldest use among the queue's slots. */
export const FREE_SLOTS_COLUMN = 'free_slots';
export const OLDEST_USE_COLUMN = 'oldest_use_ms';

/**
 * Statements over the rate limits table. The queue is bound as `column:queue_table` and
 * `column:queue_name`; `slots` is the limit, `freeSince` the host's now less `perMs` (a slot used at
 * or before it is free), `usedAt` the host's now, `taken` the rows the claim took.
 */
export interface RateLimitStatements {
  /** `CREATE TABLE IF NOT EXISTS`, run when a subscription with `rate` opens. */
  createTable(table: RateLimitsTable): string;
  /** Adds the queue's slots 1 to `:slots` that are missing, never used. */
  addSlots(table: RateLimitsTable): Statement;
  /**
   * Locks slot 1's row until the claim's transaction ends, so claims of one queue read and use
   * the slots one at a time; undefined on SQLite, whose `BEGIN IMMEDIATE` already does.
   */
  guard(table: RateLimitsTable): Statement | undefined;
  /** One row: `free_slots` among slots 1 to `:slots`, and their `oldest_use_ms`. */
  free(table: RateLimitsTable): Statement;
  /** Stamps `:usedAt` on the `:taken` free slots used longest ago. */
  use(table: RateLimitsTable): Statement;
  /**
   * Frees `:unused` slots stamped `:usedAt`: a reservation made before a claim (row lock and
   * advisory forms) that took fewer rows. Any slot so stamped will do: they are alike, and a
   * taken slot was free before, so 0 reads as free as its earlier use did.
   */
  release(table: RateLimitsTable): Statement;
  /** The uses table of rates per key (`RATE_KEY_USE_COLUMNS`), bound with the queue as the slots are. */
  readonly byKey: RateKeyUseStatements;
}

/**
 * Statements over a rate's uses per key. The claim statement itself reads the room of each key
 * (claim-clauses.ts `rateKeyConditions`); these record, forget and look ahead.
 */
export interface RateKeyUseStatements {
  /** `CREATE TABLE IF NOT EXISTS`, keyed by queue, use time and key, so the window is one range. */
  createTable(table: RateLimitsTable): string;
  /** Adds `:uses` rows of key `:rateKey` taken at `:usedAt` (adding to a use of the same millisecond). */
  record(table: RateLimitsTable): Statement;
  /** Deletes the queue's uses at or before `:freeSince`, which no window counts any more. */
  forget(table: RateLimitsTable): Statement;
  /** `oldest_use_ms`: the queue's oldest use within the window (after `:freeSince`), NULL when none. */
  oldest(table: RateLimitsTable): Statement;
}

const c = RATE_LIMIT_COLUMNS;
const QUEUE_TABLE = param(`column:${c.queueTable}`);
const QUEUE_NAME = param(`column:${c.queueName}`);

interface RateSpelling {
  /** Inserts the numbers 1 to `:slots` as new slots, keeping those that exist. */
  addSlots(into: SqlText, columns: SqlText): SqlText;
  /** Stamps the `:taken` free slots used longest ago; `free` is the condition naming free slots. */
  use(table: SqlText, queue: SqlText, free: SqlText): SqlText;
  /** Sets `:unused` slots matching `stamped` back to never used. */
  release(table: SqlText, queue: SqlText, stamped: SqlText): SqlText;
  /** Adds to the uses of a key at a millisecond: `conflict` names the primary key's columns. */
  addUses(into: SqlText, columns: SqlText, conflict: SqlText): SqlText;
}

const order = sql`${identifier(c.usedAtMs)}, ${identifier(c.slot)}`;
const stamp = sql`${identifier(c.usedAtMs)} = ${param('usedAt')}`;
const unstamp = sql`${identifier(c.usedAtMs)} = 0`;
const k = RATE_KEY_USE_COLUMNS;
const USE_VALUES = sql`${QUEUE_TABLE}, ${QUEUE_NAME}, ${param('rateKey')}, ${param('usedAt')}, ${param('uses')}`;

function releaseBySubquery(table: SqlText, queue: SqlText, stamped: SqlText): SqlText {
  const chosen = sql`SELECT ${identifier(c.slot)} FROM ${table} WHERE ${queue} AND ${stamped} LIMIT ${param('unused')}`;
  return sql`UPDATE ${table} SET ${unstamp} WHERE ${queue} AND ${identifier(c.slot)} IN (${chosen})`;
}

/** Postgres and SQLite spell the upsert alike. */
function addUsesOnConflict(into: SqlText, columns: SqlText, conflict: SqlText): SqlText {
  const uses = identifier(k.uses);
  return sql`INSERT INTO ${into} (${columns}) VALUES (${USE_VALUES}) ON CONFLICT (${conflict}) DO UPDATE SET ${uses} = ${into}.${uses} + excluded.${uses}`;
}

/** Postgres and SQLite update no ordered prefix of rows directly: the slots are named by a subquery. */
function useBySubquery(table: SqlText, queue: SqlText, free: SqlText): SqlText {
  const chosen = sql`SELECT ${identifier(c.slot)} FROM ${table} WHERE ${queue} AND ${free} ORDER BY ${order} LIMIT ${param('taken')}`;
  return sql`UPDATE ${table} SET ${stamp} WHERE ${queue} AND ${identifier(c.slot)} IN (${chosen})`;
}

const POSTGRES: RateSpelling = {
  addSlots: (into, columns) =>
    sql`INSERT INTO ${into} (${columns}) SELECT ${QUEUE_TABLE}::text, ${QUEUE_NAME}::text, tablequeue_slot, 0 FROM generate_series(1, ${param('slots')}::integer) AS tablequeue_slot ON CONFLICT DO NOTHING`,
  use: useBySubquery,
  release: releaseBySubquery,
  addUses: addUsesOnConflict,
};

/**
 * Binary keys, as the queue controls table: names compare exactly on both flavours. The numbers
 * come from a recursive CTE, which MySQL stops at 1,000 rows by default (`cte_max_recursion_depth`),
 * the cap on `limit`; the no-op update keeps slots that exist.
 */
const MYSQL: RateSpelling = {
  addSlots: (into, columns) =>
    sql`INSERT INTO ${into} (${columns}) WITH RECURSIVE tablequeue_slots (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM tablequeue_slots WHERE n < ${param('slots')}) SELECT ${QUEUE_TABLE}, ${QUEUE_NAME}, n, 0 FROM tablequeue_slots ON DUPLICATE KEY UPDATE ${identifier(c.slot)} = ${identifier(c.slot)}`,
  use: (table, queue, free) => sql`UPDATE ${table} SET ${stamp} WHERE ${queue} AND ${free} ORDER BY ${order} LIMIT ${param('taken')}`,
  release: (table, queue, stamped) => sql`UPDATE ${table} SET ${unstamp} WHERE ${queue} AND ${stamped} LIMIT ${param('unused')}`,
  // The added uses are bound again: MySQL 8.0.20 deprecates VALUES(col) and MariaDB has no row alias.
  addUses: (into, columns) => {
    const uses = identifier(k.uses);
    return sql`INSERT INTO ${into} (${columns}) VALUES (${USE_VALUES}) ON DUPLICATE KEY UPDATE ${uses} = ${uses} + ${param('uses')}`;
  },
};

/** `WHERE true` tells SQLite's parser that ON CONFLICT belongs to the INSERT, not to a join. */
const SQLITE: RateSpelling = {
  addSlots: (into, columns) =>
    sql`WITH RECURSIVE tablequeue_slots (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM tablequeue_slots WHERE n < ${param('slots')}) INSERT INTO ${into} (${columns}) SELECT ${QUEUE_TABLE}, ${QUEUE_NAME}, n, 0 FROM tablequeue_slots WHERE true ON CONFLICT DO NOTHING`,
  use: useBySubquery,
  release: releaseBySubquery,
  addUses: addUsesOnConflict,
};

const SPELLINGS: Record<RateLimitDatabase, RateSpelling> = { postgres: POSTGRES, mysql: MYSQL, mariadb: MYSQL, sqlite: SQLITE };

/** Parses and validates `name` or `schema.name` for the rate limits table on `database`. */
export function parseRateLimitsTable(value: string, database: RateLimitDatabase): RateLimitsTable {
  const table = parseSideTable(value, database, 'rate limits table');
  parseSideTable(`${table.name}_by_key`, database, 'rate limits table with "_by_key" after it (the uses of rates per key)');
  return table;
}

export function createRateLimitStatements(database: RateLimitDatabase): RateLimitStatements {
  const spelling = SPELLINGS[database];
  const style = sideTableStyle(database);
  const keyType = sideTableTypes(database).binaryKey;
  const tableOf = sideTableName;
  const queue = sql`${identifier(c.queueTable)} = ${QUEUE_TABLE} AND ${identifier(c.queueName)} = ${QUEUE_NAME}`;
  const inLimit = sql`${identifier(c.slot)} <= ${param('slots')}`;
  const free = sql`${inLimit} AND ${identifier(c.usedAtMs)} <= ${param('freeSince')}`;
  const columns = joinSql([c.queueTable, c.queueName, c.slot, c.usedAtMs].map(identifier), ', ');
  const createTable = (table: RateLimitsTable, columns: [string, string][], primaryKey: [string, ...string[]]) =>
    renderCreateSideTable(database, table, { columns, primaryKey });
  const stamped = sql`${inLimit} AND ${identifier(c.usedAtMs)} = ${param('usedAt')}`;
  const usesOf = (table: RateLimitsTable) => tableOf(rateKeyUsesTableOf(table));
  const keyUseKey: [string, ...string[]] = [k.queueTable, k.queueName, k.usedAtMs, k.rateKey];
  const keyUseColumns = joinSql([k.queueTable, k.queueName, k.rateKey, k.usedAtMs, k.uses].map(identifier), ', ');
  const byKey: RateKeyUseStatements = Object.freeze({
    createTable: (table: RateLimitsTable) =>
      createTable(
        rateKeyUsesTableOf(table),
        [
          [k.queueTable, `${keyType} NOT NULL`],
          [k.queueName, `${keyType} NOT NULL`],
          [k.usedAtMs, 'bigint NOT NULL'],
          [k.rateKey, `${keyType} NOT NULL`],
          [k.uses, 'integer NOT NULL'],
        ],
        keyUseKey,
      ),
    record: (table: RateLimitsTable) =>
      renderStatement(
        style,
        'rate.recordKeyUse',
        spelling.addUses(usesOf(table), keyUseColumns, joinSql(keyUseKey.map(identifier), ', ')),
      ),
    forget: (table: RateLimitsTable) =>
      renderStatement(
        style,
        'rate.forgetKeyUses',
        sql`DELETE FROM ${usesOf(table)} WHERE ${queue} AND ${identifier(k.usedAtMs)} <= ${param('freeSince')}`,
      ),
    oldest: (table: RateLimitsTable) =>
      renderStatement(
        style,
        'rate.oldestKeyUse',
        sql`SELECT MIN(${identifier(k.usedAtMs)}) AS ${identifier(OLDEST_USE_COLUMN)} FROM ${usesOf(table)} WHERE ${queue} AND ${identifier(k.usedAtMs)} > ${param('freeSince')}`,
      ),
  });
  return Object.freeze({
    createTable: (table: RateLimitsTable) =>
      createTable(
        table,
        [
          [c.queueTable, `${keyType} NOT NULL`],
          [c.queueName, `${keyType} NOT NULL`],
          [c.slot, 'integer NOT NULL'],
          [c.usedAtMs, 'bigint NOT NULL'],
        ],
        [c.queueTable, c.queueName, c.slot],
      ),
    addSlots: (table: RateLimitsTable) => renderStatement(style, 'rate.addSlots', spelling.addSlots(tableOf(table), columns)),
    guard: (table: RateLimitsTable) =>
      spelling === SQLITE
        ? undefined
        : renderStatement(
            style,
            'rate.guard',
            sql`SELECT ${identifier(c.slot)} FROM ${tableOf(table)} WHERE ${queue} AND ${identifier(c.slot)} = 1 FOR UPDATE`,
          ),
    free: (table: RateLimitsTable) =>
      renderStatement(
        style,
        'rate.free',
        sql`SELECT COUNT(CASE WHEN ${identifier(c.usedAtMs)} <= ${param('freeSince')} THEN 1 END) AS ${identifier(FREE_SLOTS_COLUMN)}, MIN(${identifier(c.usedAtMs)}) AS ${identifier(OLDEST_USE_COLUMN)} FROM ${tableOf(table)} WHERE ${queue} AND ${inLimit}`,
      ),
    use: (table: RateLimitsTable) => renderStatement(style, 'rate.use', spelling.use(tableOf(table), queue, free)),
    release: (table: RateLimitsTable) => renderStatement(style, 'rate.release', spelling.release(tableOf(table), queue, stamped)),
    byKey,
  });
}
