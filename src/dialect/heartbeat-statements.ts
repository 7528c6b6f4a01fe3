/**
 * The heartbeat table: one row per running broker that opted in (`heartbeat` broker option),
 * written every interval and deleted on stop, so the dashboard can list the brokers, their
 * subscriptions and their outbox relays (entries of the `subscriptions` JSON array marked
 * `kind: 'relay'`). Times are the database's own (`last_seen_at`, `started_at`) and ages are read
 * back computed by the database, so brokers and the dashboard on hosts whose clocks disagree
 * still agree on which brokers are alive.
 */
import type { Statement } from '../statement.js';
import { MYSQL_CLOCK, POSTGRES_CLOCK, SQLITE_CLOCK } from './database-clock.js';
import {
  BACKTICK_STYLE,
  DOUBLE_QUOTE_STYLE,
  fixedSql,
  identifier,
  joinSql,
  param,
  renderStatement,
  sql,
  type DatabaseClockSpelling,
  type SqlStyle,
  type SqlText,
} from './quoting.js';
import { parseSideTable, renderCreateSideTable, sideTableName, sideTableTypes, type SideTable, type SideTableDatabase } from './side-table.js';

/** The table brokers write to when the heartbeat option names none. */
export const DEFAULT_HEARTBEAT_TABLE = 'tablequeue_brokers';

/** Where the heartbeat rows live: `name` or `schema.name`. */
export type HeartbeatTable = SideTable;

/**
 * Statements over the heartbeat table. Values are bound as `column:<name>` of the columns below;
 * the times are never bound: the database writes its own now.
 */
export interface HeartbeatStatements {
  /** `CREATE TABLE IF NOT EXISTS`, run by a broker at start, so opting in needs no migration. */
  createTable(table: HeartbeatTable): string;
  /**
   * Writes the broker's row: inserted with `started_at` on the first beat, afterwards only
   * `last_seen_at`, `interval_ms` and `subscriptions` change. Params `column:broker_id`,
   * `column:host`, `column:pid`, `column:interval_ms`, `column:subscriptions`.
   */
  beat(table: HeartbeatTable): Statement;
  /** Deletes the broker's row on stop (`column:broker_id`). */
  remove(table: HeartbeatTable): Statement;
  /**
   * Every row with its ages in whole milliseconds as the database computes them (`seen_ms_ago`,
   * `started_ms_ago`), oldest broker first.
   */
  list(table: HeartbeatTable): Statement;
}

export type HeartbeatDatabase = SideTableDatabase;

/** Column names of the heartbeat table, fixed: the dashboard reads any broker's rows. */
export const HEARTBEAT_COLUMNS = Object.freeze({
  brokerId: 'broker_id',
  host: 'host',
  pid: 'pid',
  startedAt: 'started_at',
  lastSeenAt: 'last_seen_at',
  intervalMs: 'interval_ms',
  subscriptions: 'subscriptions',
});

/** The ages `list` computes, in whole milliseconds to the database's now. */
export const HEARTBEAT_AGE_COLUMNS = Object.freeze({
  seenMsAgo: 'seen_ms_ago',
  startedMsAgo: 'started_ms_ago',
});

/** How one database spells what differs: types, the upsert, and an age in milliseconds. */
interface HeartbeatSpelling {
  readonly style: SqlStyle;
  readonly clock: DatabaseClockSpelling;
  readonly types: {
    readonly brokerId: string;
    readonly host: string;
    readonly integer: string;
    readonly json: string;
  };
  /** What follows the VALUES list so a second beat of one broker updates its row. */
  upsert(updated: readonly string[]): SqlText;
  /** Milliseconds from a time column to the database's now, as a whole number. */
  millisecondsSince(column: string): SqlText;
}

/** Written back on every beat; `started_at` and the identity stay as the first beat wrote them. */
const UPDATED_COLUMNS = [HEARTBEAT_COLUMNS.lastSeenAt, HEARTBEAT_COLUMNS.intervalMs, HEARTBEAT_COLUMNS.subscriptions];

const POSTGRES: HeartbeatSpelling = {
  style: DOUBLE_QUOTE_STYLE,
  clock: POSTGRES_CLOCK,
  types: { brokerId: 'text', host: 'text', integer: 'integer', json: 'text' },
  upsert: (updated) =>
    sql` ON CONFLICT (${identifier(HEARTBEAT_COLUMNS.brokerId)}) DO UPDATE SET ${joinSql(
      updated.map((column) => sql`${identifier(column)} = EXCLUDED.${identifier(column)}`),
      ', ',
    )}`,
  millisecondsSince: (column) =>
    sql`CAST(EXTRACT(EPOCH FROM (${fixedSql(POSTGRES_CLOCK.now)} - ${identifier(column)})) * 1000 AS bigint)`,
};

/**
 * MySQL 8.0.20 deprecates `VALUES(col)` in the update list and MariaDB lacks the row alias that
 * replaces it, so the update binds the values a second time instead.
 *
 * The broker id compares case-sensitively whatever the database's default collation (the side
 * tables' exact text); ids are UUIDs.
 */
const MYSQL: HeartbeatSpelling = {
  style: BACKTICK_STYLE,
  clock: MYSQL_CLOCK,
  types: {
    brokerId: sideTableTypes('mysql').exactText(64),
    host: 'varchar(255)',
    integer: 'int',
    json: 'longtext',
  },
  upsert: (updated) =>
    sql` ON DUPLICATE KEY UPDATE ${joinSql(
      updated.map((column) =>
        column === HEARTBEAT_COLUMNS.lastSeenAt
          ? sql`${identifier(column)} = ${fixedSql(MYSQL_CLOCK.now)}`
          : sql`${identifier(column)} = ${param(`column:${column}`)}`,
      ),
      ', ',
    )}`,
  millisecondsSince: (column) => sql`TIMESTAMPDIFF(MICROSECOND, ${identifier(column)}, ${fixedSql(MYSQL_CLOCK.now)}) DIV 1000`,
};

const SQLITE: HeartbeatSpelling = {
  style: BACKTICK_STYLE,
  clock: SQLITE_CLOCK,
  types: { brokerId: 'text', host: 'text', integer: 'integer', json: 'text' },
  upsert: (updated) =>
    sql` ON CONFLICT (${identifier(HEARTBEAT_COLUMNS.brokerId)}) DO UPDATE SET ${joinSql(
      updated.map((column) => sql`${identifier(column)} = excluded.${identifier(column)}`),
      ', ',
    )}`,
  // julianday reads the fixed-width text the clock writes, offset included; a day is 86,400,000 ms.
  millisecondsSince: (column) =>
    sql`CAST((julianday('now') - julianday(${identifier(column)})) * 86400000 AS integer)`,
};

const SPELLINGS: Record<HeartbeatDatabase, HeartbeatSpelling> = {
  postgres: POSTGRES,
  mysql: MYSQL,
  mariadb: MYSQL,
  sqlite: SQLITE,
};

/** Parses and validates `name` or `schema.name` for a heartbeat table on `database`. */
export function parseHeartbeatTable(value: string, database: HeartbeatDatabase): HeartbeatTable {
  return parseSideTable(value, database, 'heartbeat table');
}

export function createHeartbeatStatements(database: HeartbeatDatabase): HeartbeatStatements {
  const spelling = SPELLINGS[database];
  const { style } = spelling;
  const tableOf = sideTableName;
  const column = identifier;
  const now = fixedSql(spelling.clock.now);
  const c = HEARTBEAT_COLUMNS;
  const statements: HeartbeatStatements = {
    createTable: (table) => {
      const { types } = spelling;
      const { time } = sideTableTypes(database);
      return renderCreateSideTable(database, table, {
        columns: [
          [c.brokerId, `${types.brokerId} NOT NULL`],
          [c.host, `${types.host} NOT NULL`],
          [c.pid, `${types.integer} NOT NULL`],
          [c.startedAt, `${time} NOT NULL`],
          [c.lastSeenAt, `${time} NOT NULL`],
          [c.intervalMs, `${types.integer} NOT NULL`],
          [c.subscriptions, `${types.json} NOT NULL`],
        ],
        primaryKey: [c.brokerId],
      });
    },
    beat: (table) => {
      const inserted = [c.brokerId, c.host, c.pid, c.startedAt, c.lastSeenAt, c.intervalMs, c.subscriptions];
      const values = inserted.map((name) => (name === c.startedAt || name === c.lastSeenAt ? now : param(`column:${name}`)));
      return renderStatement(
        style,
        'heartbeat.beat',
        sql`INSERT INTO ${tableOf(table)} (${joinSql(inserted.map(column), ', ')}) VALUES (${joinSql(values, ', ')})${spelling.upsert(UPDATED_COLUMNS)}`,
      );
    },
    remove: (table) =>
      renderStatement(
        style,
        'heartbeat.remove',
        sql`DELETE FROM ${tableOf(table)} WHERE ${column(c.brokerId)} = ${param(`column:${c.brokerId}`)}`,
      ),
    list: (table) => {
      const read = [c.brokerId, c.host, c.pid, c.intervalMs, c.subscriptions].map(column);
      read.push(sql`${spelling.millisecondsSince(c.lastSeenAt)} AS ${column(HEARTBEAT_AGE_COLUMNS.seenMsAgo)}`);
      read.push(sql`${spelling.millisecondsSince(c.startedAt)} AS ${column(HEARTBEAT_AGE_COLUMNS.startedMsAgo)}`);
      return renderStatement(
        style,
        'heartbeat.list',
        sql`SELECT ${joinSql(read, ', ')} FROM ${tableOf(table)} ORDER BY ${column(c.startedAt)}, ${column(c.brokerId)}`,
      );
    },
  };
  return Object.freeze(statements);
}
