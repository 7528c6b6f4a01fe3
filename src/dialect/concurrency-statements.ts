/**
 * Concurrency limits (`subscribe(…, { concurrency: { global, perKey } })`), lease form: the claim
 * runs in a transaction behind a guard that serializes every claim of one queue across brokers
 * and processes, counts the queue's rows in work, and takes at most what the limits leave. The
 * guard is what makes the count true until the claim commits: without it two replicas could both
 * read 2 of 3 in work and take a row each.
 */
import type { Statement } from '../statement.js';
import type { TableSpec } from '../table/table-spec.js';
import { claimConditions, claimOrder, columnList, requirePartitionKey, rowsInWork, skipLockedSelect, slotKeyCondition, tableOf, whereAll, type SlotKey } from './claim-clauses.js';
import type { DialectName, TableColumns } from './dialect.js';
import {
  BACKTICK_STYLE,
  DOUBLE_QUOTE_STYLE,
  fixedSql,
  identifier,
  joinSql,
  param,
  qualifiedName,
  renderDdl,
  renderStatement,
  sql,
  textLiteral,
  type SqlStyle,
  type SqlText,
} from './quoting.js';

/** The MySQL/MariaDB guard rows' table, beside the queue table (in its schema when it names one). */
export const CONCURRENCY_GUARDS_TABLE = 'tablequeue_concurrency_guards';

/** The row lock form's slot rows: `global` rows per queue, each locked by one transaction in work. */
export const CONCURRENCY_SLOTS_TABLE = 'tablequeue_concurrency_slots';

/** The row lock form's slot rows per partition key: `perKey` rows per key, each locked by one transaction in work. */
export const CONCURRENCY_KEY_SLOTS_TABLE = 'tablequeue_concurrency_key_slots';

/** The one column of `inWork`'s one row. */
export const IN_WORK_COLUMN = 'in_work';

export interface ConcurrencyStatements {
  /**
   * `CREATE TABLE IF NOT EXISTS` of the guard rows (MySQL, MariaDB), run when a limited
   * subscription opens; undefined where the guard needs no table.
   */
  createGuardTable(spec: TableSpec): string | undefined;
  /**
   * Run first in the claim's transaction (param `group` on grouped tables); it waits while another
   * claim of the queue holds it, and the transaction's end frees it.
   * - Postgres: `pg_advisory_xact_lock` on a 64-bit hash of the table and queue.
   * - MySQL, MariaDB: an upsert of the queue's guard row, whose row lock is exclusive even when
   *   the row exists (a locking read of a row that may be missing would lock nothing).
   * - SQLite: undefined; the claim's `BEGIN IMMEDIATE` takes the database's one write lock.
   */
  guard(spec: TableSpec): Statement | undefined;
  /** The queue's rows with a live lease (params `group`, `leaseNow`): one row, column `IN_WORK_COLUMN`. */
  inWork(spec: TableSpec): Statement;
  /**
   * Row lock form, where the database has row locks (Postgres, MySQL, MariaDB; undefined on
   * SQLite): a semaphore of slot rows, `global` per queue. A claim locks free slots with SKIP
   * LOCKED in its own transaction and takes at most as many rows; the locks end with that
   * transaction, at the settlement's commit or when the process dies.
   */
  readonly slots: SlotStatements | undefined;
  /**
   * Row lock form, `perKey` (Postgres, MySQL, MariaDB; undefined on SQLite): the same semaphore
   * per partition key. A claim locks a free slot of the key whose first claimable row comes first,
   * then takes rows of that key, and rows without a key for what is left; keys get their slots
   * when a claim first finds none.
   */
  readonly keySlots: KeySlotStatements | undefined;
}

/**
 * Which keys' slots a claim takes first.
 * - `claimOrder` (Postgres): the keys whose first claimable row comes first in claim order.
 *   `heads` reads them without locks, a page at a time (params `group`, `now`, `ids`,
 *   `passedKeys`, `window`, `limit`, `offset`; column `tablequeue_key`): past `:passedKeys` (a
 *   text array: keys this claim found a slot of but no free row, see row-lock-form.ts), and
 *   leaving out the rows `:ids` (an array of ids: the rows this claimer holds in work, which no
 *   claim can take). `lock` locks up to `:limit` free slots of the keys `:keys` (a text array, in
 *   that order), without waiting (params `group`, `keys`, `perKey`, `limit`); `FOR UPDATE` applies
 *   after the sort and the limit, so only the slots returned are locked. In one statement, the
 *   slots joined to the keys' first rows, a planner without statistics of fresh tables chose a
 *   nested loop that compared every slot with every key: 67 ms a take with 520 keys.
 * - `roundRobin` (MySQL, MariaDB): InnoDB keeps the lock on each row a locking read visits, the
 *   ones its WHERE refuses too, at read committed as well. Sorted by the keys' first rows, a take
 *   locked every free slot of the queue (a second broker found none); read in primary key order,
 *   it still locked the slots of keys without claimable rows on its way, and a claim's
 *   transaction held them until its rows settled (measured on MariaDB 10.11: a key whose slot a
 *   claim had passed waited for that claim's handler, and an idle claim held all 80 slots of a
 *   queue while another's prune ran). So `after` and `upTo` read free slot candidates without
 *   locks, in primary key order (params `group`, `key`, `perKey`, `now`, `window`, `limit`,
 *   `offset`): `after` the keys past `:key` (the last key this claimer took), `upTo` wrapping
 *   around to the rest, so each key gets its turn; and `lock` locks one candidate by its primary
 *   key alone, without waiting (params `group`, `key`, `slot`; columns `key_value`, `slot`).
 */
export type KeySlotTake =
  | { readonly kind: 'claimOrder'; readonly heads: Statement; readonly lock: Statement }
  | { readonly kind: 'roundRobin'; readonly after: Statement; readonly upTo: Statement; readonly lock: Statement };

/**
 * How a claim takes rows: of a key whose slot it holds, or without a key.
 * - `locking` (Postgres): one locking read in claim order (params `group`, `now`, `key` for a
 *   key's rows, `limit`); Postgres locks only the rows it returns.
 * - `readThenLock` (MySQL, MariaDB): InnoDB keeps the lock on every row a locking read visits in
 *   the claim index, even one its WHERE then refuses, at read committed too. Measured on MariaDB
 *   10.11: a claim for key a's rows held the lock on key b's row ahead of them until its handler
 *   ended, and b's slot claim found nothing to take. So `candidates` reads ids without locks, in
 *   claim order (params `group`, `now`, `key` for a key's rows, `limit`, `offset`), and `lock`
 *   locks one of them by its primary key alone if it is still claimable (params `id`, `group`,
 *   `now`), without waiting.
 */
export type KeySlotClaim =
  | { readonly kind: 'locking'; readonly statement: Statement }
  | { readonly kind: 'readThenLock'; readonly candidates: Statement; readonly lock: Statement };

/**
 * How unused key slots are deleted: the slots of keys with no claimable row, which no delivery
 * holds. Without it a key's slots would stay after its last row, and a queue keyed by customer or
 * tenant would keep a slot row for every key it ever saw, which each take reads past.
 * - `oneStatement` (Postgres): deletes them all, each locked without waiting (params `group`,
 *   `now`).
 * - `lockThenDelete` (MySQL, MariaDB): `unused` reads up to `:limit` of them past slot `:slot` of
 *   key `:key`, in primary key order, without locks (params `group`, `key`, `slot`, `now`,
 *   `limit`; columns `key_value`, `slot`); `lock` locks `KEY_SLOTS_PER_DELETE` of those by their
 *   primary keys, without waiting (columns `key_value`, `slot`, a slot named twice returned
 *   twice); and `delete` removes as many locked slots by their primary keys. `lock` and `delete` bind `group`, then
 *   `key` and `slot` once per slot (`bindRepeated`, padded with the last). A READ COMMITTED
 *   transaction per page behind the queue's guard row, as `add` runs. MySQL cannot delete from a
 *   table its own subquery reads; a delete that met a slot another claim holds would wait for it
 *   (a claim can hold the slot of a key whose last row another claim took, until the rows it took
 *   beside it settle); and a locking read of the unused slots kept the lock on every slot it
 *   visited, those of keys with rows too, so a claim running beside the prune found them taken.
 */
export type KeySlotPrune =
  | { readonly kind: 'oneStatement'; readonly statement: Statement }
  | { readonly kind: 'lockThenDelete'; readonly unused: Statement; readonly lock: Statement; readonly delete: Statement };

/** The slots one `lockThenDelete` lock or delete statement names. */
export const KEY_SLOTS_PER_DELETE = 100;

export interface KeySlotStatements {
  /** `CREATE TABLE IF NOT EXISTS` of the key slot rows, beside the queue table. */
  createTable(spec: TableSpec): string;
  /**
   * Adds the slots 1 to `:perKey` that are missing for each key among the queue's first `:window`
   * claimable rows in claim order (params `group` on grouped tables, `now`, `perKey`, `window`).
   * Never waits on a slot a delivery holds:
   * Postgres skips a conflict with a committed row without locking it; MySQL and MariaDB insert
   * only the pairs a read found missing, so `addInTransaction` says how to run it.
   */
  add(spec: TableSpec): Statement;
  /**
   * MySQL, MariaDB: run `add` in a READ COMMITTED transaction behind the queue's guard row. Read
   * committed, so that reading the queue table locks none of its rows (at repeatable read an
   * INSERT … SELECT locks the rows it reads, and waits on every row in work); the guard, so that
   * no two adds insert the same pair, as a duplicate key waits on the row it meets.
   */
  readonly addInTransaction: boolean;
  /**
   * Takes up to `:limit` free slots numbered up to `:perKey` of the keys among the queue's first
   * `:window` claimable rows, without waiting (columns `key_value`, the key as text, and `slot`;
   * the statements and their params in `KeySlotTake`). Only the slot rows are locked, never the
   * queue rows read to find the keys.
   */
  take(spec: TableSpec): KeySlotTake;
  /** Deletes unused slots: those of keys without claimable rows that no delivery holds (see `KeySlotPrune`). */
  prune(spec: TableSpec): KeySlotPrune;
  /** Claimable rows of `:key`, a key whose slot the claim holds: rows of other keys need their own. */
  claimOfKey(spec: TableSpec, columns: TableColumns): KeySlotClaim;
  /** Claimable rows without a key, which count toward no key and need no slot. */
  claimWithoutKey(spec: TableSpec, columns: TableColumns): KeySlotClaim;
}

export interface SlotStatements {
  /** `CREATE TABLE IF NOT EXISTS` of the slot rows, beside the queue table. */
  createTable(spec: TableSpec): string;
  /**
   * The queue's highest slot number (0 without any), column `highest`: a plain read, which waits
   * on no slot another transaction holds.
   */
  highest(spec: TableSpec): Statement;
  /**
   * Adds the queue's slots `:firstSlot` to `:global` (param `group` on grouped tables), run only
   * above the highest slot: an insert that met an existing slot would wait while a delivery holds it.
   */
  add(spec: TableSpec): Statement;
  /**
   * Locks up to `:limit` free slots numbered up to `:global`, without waiting: one row per slot,
   * column `slot`.
   */
  take(spec: TableSpec): Statement;
}

export function createConcurrencyStatements(database: DialectName): ConcurrencyStatements {
  const style = database === 'postgres' ? DOUBLE_QUOTE_STYLE : BACKTICK_STYLE;
  const inWork = (spec: TableSpec) =>
    renderStatement(
      style,
      'concurrency.inWork',
      sql`SELECT COUNT(*) AS ${identifier(IN_WORK_COLUMN)} FROM ${tableOf(spec)}${whereAll(rowsInWork(spec))}`,
    );
  switch (database) {
    case 'postgres':
      return { createGuardTable: () => undefined, guard: renderPostgresGuard, inWork, slots: POSTGRES_SLOTS, keySlots: POSTGRES_KEY_SLOTS };
    case 'mysql':
      return { createGuardTable: renderMysqlGuardTable, guard: renderMysqlGuard, inWork, slots: MYSQL_SLOTS, keySlots: MYSQL_KEY_SLOTS };
    case 'sqlite':
      return { createGuardTable: () => undefined, guard: () => undefined, inWork, slots: undefined, keySlots: undefined };
  }
}

function slotsTableOf(spec: TableSpec): SqlText {
  return qualifiedName(spec.schema, CONCURRENCY_SLOTS_TABLE);
}

/** The queue's name in a guard or slot row: its group, or '' on a table without groups. */
function queueName(spec: TableSpec): SqlText {
  return spec.group === undefined ? textLiteral('') : param('group');
}

/** Names a queue's slot rows: its table and queue, the columns qualified by `of` where given. */
function slotsOfQueue(spec: TableSpec, of?: SqlText): SqlText {
  const column = (name: string) => (of === undefined ? identifier(name) : sql`${of}.${identifier(name)}`);
  return sql`${column('table_name')} = ${textLiteral(spec.qualifiedName)} AND ${column('queue_name')} = ${queueName(spec)}`;
}

function renderSlotsTable(style: SqlStyle, spec: TableSpec, text: (length: number) => SqlText): string {
  const key = sql`${identifier('table_name')}, ${identifier('queue_name')}, ${identifier('slot')}`;
  return renderDdl(
    style,
    sql`CREATE TABLE IF NOT EXISTS ${slotsTableOf(spec)} (
  ${identifier('table_name')} ${text(129)},
  ${identifier('queue_name')} ${text(255)},
  ${identifier('slot')} integer NOT NULL,
  PRIMARY KEY (${key})
)`,
  );
}

function renderHighestSlot(style: SqlStyle, spec: TableSpec): Statement {
  return renderStatement(
    style,
    'concurrency.highestSlot',
    sql`SELECT COALESCE(MAX(${identifier('slot')}), 0) AS ${identifier('highest')} FROM ${slotsTableOf(spec)} WHERE ${slotsOfQueue(spec)}`,
  );
}

function renderTakeSlots(style: SqlStyle, spec: TableSpec): Statement {
  const slot = identifier('slot');
  return renderStatement(
    style,
    'concurrency.takeSlots',
    sql`SELECT ${slot} FROM ${slotsTableOf(spec)} WHERE ${slotsOfQueue(spec)} AND ${slot} <= ${param('global')} ORDER BY ${slot} LIMIT ${param('limit')} FOR UPDATE SKIP LOCKED`,
  );
}

const slotColumns = sql`${identifier('table_name')}, ${identifier('queue_name')}, ${identifier('slot')}`;

const POSTGRES_SLOTS: SlotStatements = {
  createTable: (spec) => renderSlotsTable(DOUBLE_QUOTE_STYLE, spec, () => fixedSql('text NOT NULL')),
  add: (spec) =>
    renderStatement(
      DOUBLE_QUOTE_STYLE,
      'concurrency.addSlots',
      sql`INSERT INTO ${slotsTableOf(spec)} (${slotColumns}) SELECT ${textLiteral(spec.qualifiedName)}, ${queueName(spec)}, tablequeue_slot FROM generate_series(${param('firstSlot')}::integer, ${param('global')}::integer) AS tablequeue_slot ON CONFLICT DO NOTHING`,
    ),
  highest: (spec) => renderHighestSlot(DOUBLE_QUOTE_STYLE, spec),
  take: (spec) => renderTakeSlots(DOUBLE_QUOTE_STYLE, spec),
};

/**
 * The numbers come from a recursive CTE, which MySQL 8 and MariaDB both read in INSERT … SELECT;
 * the no-op update keeps a slot another broker added meanwhile, and refuses every other error
 * INSERT IGNORE would hide.
 */
const MYSQL_SLOTS: SlotStatements = {
  createTable: (spec) =>
    renderSlotsTable(BACKTICK_STYLE, spec, (length) => fixedSql(`varchar(${length}) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL`)),
  add: (spec) => {
    const numbers = sql`WITH RECURSIVE tablequeue_slots (n) AS (SELECT CAST(${param('firstSlot')} AS UNSIGNED) UNION ALL SELECT n + 1 FROM tablequeue_slots WHERE n < ${param('global')})`;
    return renderStatement(
      BACKTICK_STYLE,
      'concurrency.addSlots',
      sql`INSERT INTO ${slotsTableOf(spec)} (${slotColumns}) ${numbers} SELECT ${textLiteral(spec.qualifiedName)}, ${queueName(spec)}, n FROM tablequeue_slots ON DUPLICATE KEY UPDATE ${identifier('slot')} = ${identifier('slot')}`,
    );
  },
  highest: (spec) => renderHighestSlot(BACKTICK_STYLE, spec),
  take: (spec) => renderTakeSlots(BACKTICK_STYLE, spec),
};

/** Names the queue in a guard: the table, and the group on grouped tables. */
function queueKey(spec: TableSpec, prefix: string): SqlText {
  const table = textLiteral(`${prefix}${spec.qualifiedName}`);
  return spec.group === undefined ? table : sql`${table} || ':' || ${param('group')}::text`;
}

/**
 * Prefixed so the key never equals a FIFO guard's (`<table>:<group>`); two queues whose hashes
 * collide only take turns claiming.
 */
function renderPostgresGuard(spec: TableSpec): Statement {
  return renderStatement(
    DOUBLE_QUOTE_STYLE,
    'concurrency.guard',
    sql`SELECT pg_advisory_xact_lock(hashtextextended(${queueKey(spec, 'concurrency:')}, 0))`,
  );
}

function guardsTableOf(spec: TableSpec): SqlText {
  return qualifiedName(spec.schema, CONCURRENCY_GUARDS_TABLE);
}

/**
 * utf8mb4_bin, as the heartbeat table: names compare exactly in both flavours. A qualified table
 * name is at most 129 characters (two identifiers of 64 and a dot); a queue name at most 255.
 */
function renderMysqlGuardTable(spec: TableSpec): string {
  const text = (length: number) => fixedSql(`varchar(${length}) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL`);
  return renderDdl(
    BACKTICK_STYLE,
    sql`CREATE TABLE IF NOT EXISTS ${guardsTableOf(spec)} (\n  ${identifier('table_name')} ${text(129)},\n  ${identifier('queue_name')} ${text(255)},\n  ${identifier('claims')} bigint NOT NULL,\n  PRIMARY KEY (${identifier('table_name')}, ${identifier('queue_name')})\n)`,
  );
}

/** The write counts the guarded claims, so the upsert always changes the row it locks. */
function renderMysqlGuard(spec: TableSpec): Statement {
  const queue = queueName(spec);
  const claims = identifier('claims');
  return renderStatement(
    BACKTICK_STYLE,
    'concurrency.guard',
    sql`INSERT INTO ${guardsTableOf(spec)} (${identifier('table_name')}, ${identifier('queue_name')}, ${claims}) VALUES (${textLiteral(spec.qualifiedName)}, ${queue}, 1) ON DUPLICATE KEY UPDATE ${claims} = ${claims} + 1`,
  );
}

function keySlotsTableOf(spec: TableSpec): SqlText {
  return qualifiedName(spec.schema, CONCURRENCY_KEY_SLOTS_TABLE);
}

/** How each database spells a partition key as the slot rows' text, and the text column for it. */
interface KeyText {
  readonly style: SqlStyle;
  /** The key column as text that compares with `key_value` exactly. */
  of(column: SqlText): SqlText;
  /** A text column type of at most `length` characters (unbounded where the database allows). */
  column(length: number): SqlText;
}

const POSTGRES_KEY_TEXT: KeyText = {
  style: DOUBLE_QUOTE_STYLE,
  of: (column) => sql`CAST(${column} AS text)`,
  column: () => fixedSql('text NOT NULL'),
};

/**
 * utf8mb4_bin as the other side tables, whatever the connection's character set; keys are at most
 * 255 characters here (a primary key of InnoDB holds 3,072 bytes: 129 + 255 + 255 characters of
 * four bytes and the slot fit).
 */
const MYSQL_KEY_TEXT: KeyText = {
  style: BACKTICK_STYLE,
  of: (column) => sql`CONVERT(${column} USING utf8mb4) COLLATE utf8mb4_bin`,
  column: (length) => fixedSql(`varchar(${length}) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL`),
};

function renderKeySlotsTable(text: KeyText, spec: TableSpec): string {
  const key = sql`${identifier('table_name')}, ${identifier('queue_name')}, ${identifier('key_value')}, ${identifier('slot')}`;
  return renderDdl(
    text.style,
    sql`CREATE TABLE IF NOT EXISTS ${keySlotsTableOf(spec)} (
  ${identifier('table_name')} ${text.column(129)},
  ${identifier('queue_name')} ${text.column(255)},
  ${identifier('key_value')} ${text.column(255)},
  ${identifier('slot')} integer NOT NULL,
  PRIMARY KEY (${key})
)`,
  );
}

/** ` FROM <table> WHERE …`: the queue's claimable rows that have a key. */
function fromClaimableKeyedRows(spec: TableSpec, also: readonly SqlText[] = []): SqlText {
  const key = identifier(requirePartitionKey(spec, 'a key slot'));
  return sql` FROM ${tableOf(spec)}${whereAll([...claimConditions(spec, 'rowLock'), sql`${key} IS NOT NULL`, ...also])}`;
}

/** The partition key column as text that compares with `key_value`. */
function keyTextOf(text: KeyText, spec: TableSpec): SqlText {
  return text.of(identifier(requirePartitionKey(spec, 'a key slot')));
}

/** The distinct keys of the queue's claimable rows, as text: column `tablequeue_key`. */
function claimableKeys(text: KeyText, spec: TableSpec): SqlText {
  return sql`SELECT DISTINCT ${keyTextOf(text, spec)} AS tablequeue_key${fromClaimableKeyedRows(spec)}`;
}

/**
 * The distinct keys among the first `:window` claimable keyed rows in claim order, as text:
 * column `tablequeue_key`. Read through the claim order index, so its cost follows the window,
 * not the backlog: the keys of all 1,000,000 claimable rows took 165 ms on PostgreSQL.
 */
function windowKeys(text: KeyText, spec: TableSpec): SqlText {
  const window = sql`SELECT ${keyTextOf(text, spec)} AS tablequeue_key${fromClaimableKeyedRows(spec)} ORDER BY ${claimOrder(spec)} LIMIT ${param('window')}`;
  return sql`SELECT DISTINCT tablequeue_window.tablequeue_key FROM (${window}) AS tablequeue_window`;
}

/**
 * `numbers` names a relation `tablequeue_numbers (n)` holding 1 to `:perKey`; `onConflict` ends
 * the insert where two adds can race (Postgres: another subscription's add, or one after a prune,
 * inserting the same slot between this one's read and its insert).
 */
function renderAddKeySlots(text: KeyText, spec: TableSpec, numbers: { with: SqlText; from: SqlText }, onConflict: SqlText = sql``): Statement {
  const columns = sql`${identifier('table_name')}, ${identifier('queue_name')}, ${identifier('key_value')}, ${identifier('slot')}`;
  const missing = sql`NOT EXISTS (SELECT 1 FROM ${keySlotsTableOf(spec)} AS tablequeue_held WHERE ${slotsOfQueue(spec, sql`tablequeue_held`)} AND tablequeue_held.${identifier('key_value')} = tablequeue_keys.tablequeue_key AND tablequeue_held.${identifier('slot')} = tablequeue_numbers.n)`;
  const select = sql`SELECT ${textLiteral(spec.qualifiedName)}, ${queueName(spec)}, tablequeue_keys.tablequeue_key, tablequeue_numbers.n FROM (${windowKeys(text, spec)}) AS tablequeue_keys CROSS JOIN ${numbers.from} WHERE ${missing}`;
  return renderStatement(text.style, 'concurrency.addKeySlots', sql`INSERT INTO ${keySlotsTableOf(spec)} (${columns}) ${numbers.with}${select}${onConflict}`);
}

/**
 * `claimOrder`'s heads: the keys ordered by their first claimable row not in work here, a rank
 * over those rows in claim order (claim orders run over several columns, so a MIN of one would
 * not do), its least per key.
 */
function renderKeyHeads(text: KeyText, spec: TableSpec): Statement {
  const keyText = keyTextOf(text, spec);
  const outside = [sql`${identifier(spec.id.column)} <> ALL(${param('ids')})`, sql`${keyText} <> ALL(${param('passedKeys')})`];
  const positions = sql`SELECT ${keyText} AS tablequeue_key, ROW_NUMBER() OVER (ORDER BY ${claimOrder(spec)}) AS tablequeue_position${fromClaimableKeyedRows(spec, outside)} ORDER BY ${claimOrder(spec)} LIMIT ${param('window')}`;
  return renderStatement(
    text.style,
    'concurrency.keyHeads',
    sql`SELECT tablequeue_positions.tablequeue_key FROM (${positions}) AS tablequeue_positions GROUP BY tablequeue_positions.tablequeue_key ORDER BY MIN(tablequeue_positions.tablequeue_position) LIMIT ${param('limit')} OFFSET ${param('offset')}`,
  );
}

/** `claimOrder`'s lock: free slots of the keys `:keys`, in their order, by the slots' primary key. */
function renderLockSlotsOfKeys(text: KeyText, spec: TableSpec): Statement {
  const keyValue = identifier('key_value');
  const slot = identifier('slot');
  return renderStatement(
    text.style,
    'concurrency.lockSlotsOfKeys',
    sql`SELECT ${keyValue}, ${slot} FROM ${keySlotsTableOf(spec)} WHERE ${slotsOfQueue(spec)} AND ${keyValue} = ANY(${param('keys')}) AND ${slot} <= ${param('perKey')} ORDER BY array_position(CAST(${param('keys')} AS text[]), ${keyValue}), ${slot} LIMIT ${param('limit')} FOR UPDATE SKIP LOCKED`,
  );
}

/** Candidates of `roundRobin`: the slots of keys with claimable rows on one side of `:key`, in primary key order, read without locks. */
function renderKeySlotsInTurn(text: KeyText, spec: TableSpec, side: '>' | '<='): Statement {
  const slot = sql`tablequeue_slots.${identifier('slot')}`;
  const keyValue = sql`tablequeue_slots.${identifier('key_value')}`;
  const ofQueue = slotsOfQueue(spec, sql`tablequeue_slots`);
  const withRows = sql`${keyValue} IN (SELECT tablequeue_keys.tablequeue_key FROM (${windowKeys(text, spec)}) AS tablequeue_keys)`;
  return renderStatement(
    text.style,
    side === '>' ? 'concurrency.keySlotsAfter' : 'concurrency.keySlotsUpTo',
    sql`SELECT ${keyValue}, ${slot} FROM ${keySlotsTableOf(spec)} AS tablequeue_slots WHERE ${ofQueue} AND ${keyValue} ${fixedSql(side)} ${param('key')} AND ${slot} <= ${param('perKey')} AND ${withRows} ORDER BY ${keyValue}, ${slot} LIMIT ${param('limit')} OFFSET ${param('offset')}`,
  );
}

/** `roundRobin`'s lock: one slot by its whole primary key, so InnoDB visits and locks that row alone. */
function renderLockKeySlot(text: KeyText, spec: TableSpec): Statement {
  const ofSlot = sql`${slotsOfQueue(spec)} AND ${identifier('key_value')} = ${text.of(param('key'))} AND ${identifier('slot')} = ${param('slot')}`;
  return renderStatement(
    text.style,
    'concurrency.lockKeySlot',
    sql`SELECT ${identifier('key_value')}, ${identifier('slot')} FROM ${keySlotsTableOf(spec)} WHERE ${ofSlot} FOR UPDATE SKIP LOCKED`,
  );
}

/**
 * Postgres: the slot rows of the queue and its claimable rows' keys are grouped together by key,
 * and the groups with no claimable row give the slots' row addresses (`ctid`); those are locked
 * and deleted by address. No join, so no plan can read one side again for every row of the other:
 * on tables the planner had no statistics for yet, a semi-join of the slots to themselves ran as a
 * nested loop (a prune of 200,000 slots beside 4,000 rows ran for minutes), and a key list
 * matched with `= ANY` was searched element by element for each slot (138 s). Grouped, 507 ms.
 * A slot row is never updated, so its address holds for the statement.
 */
function renderPruneKeySlots(spec: TableSpec): Statement {
  const ofQueue = sql`${identifier('table_name')} = ${textLiteral(spec.qualifiedName)} AND ${identifier('queue_name')} = ${queueName(spec)}`;
  const slotKeys = sql`SELECT ${identifier('key_value')} AS tablequeue_key, ctid AS tablequeue_slot_row, false AS tablequeue_has_rows FROM ${keySlotsTableOf(spec)} WHERE ${ofQueue}`;
  const rowKeys = sql`SELECT ${keyTextOf(POSTGRES_KEY_TEXT, spec)}, NULL, true${fromClaimableKeyedRows(spec)}`;
  const unused = sql`SELECT unnest(array_agg(tablequeue_keys.tablequeue_slot_row)) FROM (${slotKeys} UNION ALL ${rowKeys}) AS tablequeue_keys GROUP BY tablequeue_keys.tablequeue_key HAVING NOT bool_or(tablequeue_keys.tablequeue_has_rows)`;
  const locked = sql`SELECT tablequeue_unused.ctid FROM ${keySlotsTableOf(spec)} AS tablequeue_unused WHERE tablequeue_unused.ctid = ANY(ARRAY(${unused})) FOR UPDATE OF tablequeue_unused SKIP LOCKED`;
  return renderStatement(DOUBLE_QUOTE_STYLE, 'concurrency.pruneKeySlots', sql`DELETE FROM ${keySlotsTableOf(spec)} WHERE ctid = ANY(ARRAY(${locked}))`);
}

/**
 * MySQL, MariaDB: the keys with claimable rows are read in a subquery, which MariaDB materializes
 * once with an index on the key. Each page starts past the last slot of the one before
 * (`:key`, `:slot`): a slot it found locked is read again by the next prune, not the next page.
 */
function renderUnusedKeySlots(spec: TableSpec): Statement {
  const keyValue = sql`tablequeue_slots.${identifier('key_value')}`;
  const slot = sql`tablequeue_slots.${identifier('slot')}`;
  const ofQueue = slotsOfQueue(spec, sql`tablequeue_slots`);
  const withoutRows = sql`${keyValue} NOT IN (SELECT tablequeue_keys.tablequeue_key FROM (${claimableKeys(MYSQL_KEY_TEXT, spec)}) AS tablequeue_keys)`;
  return renderStatement(
    BACKTICK_STYLE,
    'concurrency.unusedKeySlots',
    sql`SELECT ${keyValue}, ${slot} FROM ${keySlotsTableOf(spec)} AS tablequeue_slots WHERE ${ofQueue} AND (${keyValue} > ${param('key')} OR ${keyValue} = ${param('key')} AND ${slot} > ${param('slot')}) AND ${withoutRows} ORDER BY ${keyValue}, ${slot} LIMIT ${param('limit')}`,
  );
}

/**
 * `KEY_SLOTS_PER_DELETE` slots as a derived table read first (STRAIGHT_JOIN), joined to their
 * rows by one unique lookup of the primary key each (FORCE INDEX): InnoDB visits, and locks, the
 * named slots alone. `delete` reads them the same way.
 */
function keySlotsNamed(spec: TableSpec): { readonly from: SqlText; readonly table: SqlText } {
  const text = (value: SqlText): SqlText => MYSQL_KEY_TEXT.of(value);
  const slots = joinSql(
    Array.from({ length: KEY_SLOTS_PER_DELETE }, (_, index) =>
      index === 0
        ? sql`SELECT ${text(param('key'))} AS tablequeue_key, ${param('slot')} AS tablequeue_slot`
        : sql`SELECT ${text(param('key'))}, ${param('slot')}`,
    ),
    ' UNION ALL ',
  );
  const table = keySlotsTableOf(spec);
  const matches = sql`${slotsOfQueue(spec, table)} AND ${table}.${identifier('key_value')} = tablequeue_named.tablequeue_key AND ${table}.${identifier('slot')} = tablequeue_named.tablequeue_slot`;
  return { from: sql`(${slots}) AS tablequeue_named STRAIGHT_JOIN ${table} FORCE INDEX (PRIMARY) ON ${matches}`, table };
}

/** `lockThenDelete`'s lock: those of the named slots that no claim holds. */
function renderLockKeySlots(spec: TableSpec): Statement {
  const { from, table } = keySlotsNamed(spec);
  return renderStatement(
    BACKTICK_STYLE,
    'concurrency.lockKeySlots',
    sql`SELECT ${table}.${identifier('key_value')}, ${table}.${identifier('slot')} FROM ${from} FOR UPDATE SKIP LOCKED`,
  );
}

/**
 * The locked slots (`keySlotsNamed`). As an `OR` of the slots' keys MariaDB scanned the queue's
 * slots and waited on one a claim held (a lock wait timeout); this is the shape of
 * `rowLock.finishMany`, for the same reason. 1,000 slots go in 10 statements, not 1,000 round trips.
 */
function renderDeleteKeySlots(spec: TableSpec): Statement {
  const { from, table } = keySlotsNamed(spec);
  return renderStatement(BACKTICK_STYLE, 'concurrency.deleteKeySlots', sql`DELETE ${table} FROM ${from}`);
}

/** Postgres: one locking read of a key's rows, or of rows without a key. */
function renderLockingKeySlotClaim(spec: TableSpec, columns: TableColumns, slotKey: SlotKey): KeySlotClaim {
  const name = slotKey === 'ofKey' ? 'rowLock.claimOfKey' : 'rowLock.claimWithoutKey';
  return { kind: 'locking', statement: renderStatement(DOUBLE_QUOTE_STYLE, name, skipLockedSelect(spec, columns, 'rowLock', { slotKey })) };
}

/** MySQL, MariaDB: the candidates' ids read without locks, then each locked by its primary key (see `KeySlotClaim`). */
function renderReadThenLockKeySlotClaim(spec: TableSpec, columns: TableColumns, slotKey: SlotKey): KeySlotClaim {
  const id = identifier(spec.id.column);
  const conditions = claimConditions(spec, 'rowLock');
  const candidatesName = slotKey === 'ofKey' ? 'rowLock.candidatesOfKey' : 'rowLock.candidatesWithoutKey';
  return {
    kind: 'readThenLock',
    candidates: renderStatement(
      BACKTICK_STYLE,
      candidatesName,
      sql`SELECT ${id} FROM ${tableOf(spec)}${whereAll([...conditions, slotKeyCondition(spec, slotKey)])} ORDER BY ${claimOrder(spec)} LIMIT ${param('limit')} OFFSET ${param('offset')}`,
    ),
    lock: renderStatement(
      BACKTICK_STYLE,
      slotKey === 'ofKey' ? 'rowLock.lockOfKey' : 'rowLock.lockWithoutKey',
      sql`SELECT ${columnList(columns)} FROM ${tableOf(spec)}${whereAll([sql`${id} = ${param('id')}`, ...conditions])} FOR UPDATE SKIP LOCKED`,
    ),
  };
}

const POSTGRES_KEY_SLOTS: KeySlotStatements = {
  createTable: (spec) => renderKeySlotsTable(POSTGRES_KEY_TEXT, spec),
  add: (spec) =>
    renderAddKeySlots(POSTGRES_KEY_TEXT, spec, {
      with: sql``,
      from: sql`generate_series(1, ${param('perKey')}::integer) AS tablequeue_numbers (n)`,
    }, sql` ON CONFLICT DO NOTHING`),
  addInTransaction: false,
  take: (spec) => ({ kind: 'claimOrder', heads: renderKeyHeads(POSTGRES_KEY_TEXT, spec), lock: renderLockSlotsOfKeys(POSTGRES_KEY_TEXT, spec) }),
  prune: (spec) => ({ kind: 'oneStatement', statement: renderPruneKeySlots(spec) }),
  claimOfKey: (spec, columns) => renderLockingKeySlotClaim(spec, columns, 'ofKey'),
  claimWithoutKey: (spec, columns) => renderLockingKeySlotClaim(spec, columns, 'withoutKey'),
};

const MYSQL_KEY_SLOTS: KeySlotStatements = {
  createTable: (spec) => renderKeySlotsTable(MYSQL_KEY_TEXT, spec),
  add: (spec) =>
    renderAddKeySlots(MYSQL_KEY_TEXT, spec, {
      with: sql`WITH RECURSIVE tablequeue_numbers (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM tablequeue_numbers WHERE n < ${param('perKey')}) `,
      from: sql`tablequeue_numbers`,
    }),
  addInTransaction: true,
  take: (spec) => ({
    kind: 'roundRobin',
    after: renderKeySlotsInTurn(MYSQL_KEY_TEXT, spec, '>'),
    upTo: renderKeySlotsInTurn(MYSQL_KEY_TEXT, spec, '<='),
    lock: renderLockKeySlot(MYSQL_KEY_TEXT, spec),
  }),
  prune: (spec) => ({ kind: 'lockThenDelete', unused: renderUnusedKeySlots(spec), lock: renderLockKeySlots(spec), delete: renderDeleteKeySlots(spec) }),
  claimOfKey: (spec, columns) => renderReadThenLockKeySlotClaim(spec, columns, 'ofKey'),
  claimWithoutKey: (spec, columns) => renderReadThenLockKeySlotClaim(spec, columns, 'withoutKey'),
};
