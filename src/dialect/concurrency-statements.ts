/**
 * Concurrency limits (`subscribe(…, { concurrency: { global, perKey } })`), lease form: the claim
 * runs in a transaction behind a guard that serializes every claim of one queue across brokers
 * and processes, counts the queue's rows in work, and takes at most what the limits leave. The
 * guard is what makes the count true until the claim commits: without it two replicas could both
 * read 2 of 3 in work and take a row each.
 */
import type { Statement } from '../statement.js';
import type { TableSpec } from '../table/table-spec.js';
import { rowsInWork, tableOf, whereAll } from './claim-clauses.js';
import type { DialectName } from './dialect.js';
import {
  BACKTICK_STYLE,
  DOUBLE_QUOTE_STYLE,
  fixedSql,
  identifier,
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
      return { createGuardTable: () => undefined, guard: renderPostgresGuard, inWork, slots: POSTGRES_SLOTS };
    case 'mysql':
      return { createGuardTable: renderMysqlGuardTable, guard: renderMysqlGuard, inWork, slots: MYSQL_SLOTS };
    case 'sqlite':
      return { createGuardTable: () => undefined, guard: () => undefined, inWork, slots: undefined };
  }
}

function slotsTableOf(spec: TableSpec): SqlText {
  return qualifiedName(spec.schema, CONCURRENCY_SLOTS_TABLE);
}

/** The queue's name in a guard or slot row: its group, or '' on a table without groups. */
function queueName(spec: TableSpec): SqlText {
  return spec.group === undefined ? textLiteral('') : param('group');
}

/** Names a queue's slot rows: its table and queue. */
function slotsOfQueue(spec: TableSpec): SqlText {
  return sql`${identifier('table_name')} = ${textLiteral(spec.qualifiedName)} AND ${identifier('queue_name')} = ${queueName(spec)}`;
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
