/**
 * The schedules table: one row per recurring schedule (`broker.schedule(...)`), holding the last
 * tick fired. Every replica that declares a schedule fires a tick by advancing `last_tick_at`
 * from the value it read to the tick (a compare-and-set), in the transaction that writes the
 * tick's message: of replicas racing for one tick exactly one update finds the value it read,
 * and the others change no row and roll back. Times are bound by the driver (host instants of
 * ticks); only `updated_at`, when a replica last declared the schedule, is the database's now.
 */
import type { Statement } from '../statement.js';
import { MYSQL_CLOCK, POSTGRES_CLOCK, SQLITE_CLOCK } from './database-clock.js';
import { exactTextCharset } from './mysql/mysql-collation.js';
import {
  BACKTICK_STYLE,
  DOUBLE_QUOTE_STYLE,
  fixedSql,
  identifier,
  joinSql,
  param,
  renderStatement,
  sql,
  type SqlStyle,
  type SqlText,
} from './quoting.js';
import { parseSideTable, renderCreateSideTable, sideTableName, sideTableTypes, type SideTable, type SideTableDatabase } from './side-table.js';

/** The table brokers keep their schedules in when the `schedulesTable` option names none. */
export const DEFAULT_SCHEDULES_TABLE = 'tablequeue_schedules';

/** The longest schedule name: the primary key is a VARCHAR(200) on MySQL and MariaDB. */
export const MAX_SCHEDULE_NAME_LENGTH = 200;

/** Where the schedule rows live: `name` or `schema.name`. */
export type SchedulesTable = SideTable;

export type SchedulesDatabase = SideTableDatabase;

/** Column names of the schedules table, fixed: the CLI and the dashboard read any broker's rows. */
export const SCHEDULE_COLUMNS = Object.freeze({
  name: 'name',
  queueTable: 'queue_table',
  queueName: 'queue_name',
  cron: 'cron',
  timeZone: 'time_zone',
  lastTickAt: 'last_tick_at',
  firedCount: 'fired_count',
  missedCount: 'missed_count',
  updatedAt: 'updated_at',
});

/**
 * Statements over the schedules table. Values are bound as `column:<name>` of the columns above;
 * `column:fired_count` and `column:missed_count` in `advance` are the counts to add, and
 * `column:seen_last_tick_at` the `last_tick_at` the caller read (null before the first tick).
 */
export interface ScheduleStatements {
  /** `CREATE TABLE IF NOT EXISTS`, run by a broker with schedules at start, or by `init --schedules`. */
  createTable(table: SchedulesTable): string;
  /**
   * Declares a schedule at a broker's start: inserts its row with `last_tick_at` the latest tick
   * at or before now (so a new schedule does not fire its past), or updates the definition
   * (queue, cron, time zone) and `updated_at` of the row there. When the cron or the time zone
   * changed, `last_tick_at` moves to the bound tick of the new definition, which fires from its
   * next tick; otherwise the row's own stays. Params `column:name`, `column:queue_table`,
   * `column:queue_name`, `column:cron`, `column:time_zone`, `column:last_tick_at`.
   */
  register(table: SchedulesTable): Statement;
  /** One schedule's row (`column:name`). */
  read(table: SchedulesTable): Statement;
  /**
   * The guard: moves `last_tick_at` to the tick fired and adds the counts, only where the row
   * still holds the tick the caller read and the definition the caller declared. One row changed
   * means this caller fires; none means another replica fired first, or declared another
   * definition since. Params `column:last_tick_at`, `column:fired_count`, `column:missed_count`,
   * `column:name`, `column:seen_last_tick_at`, `column:cron`, `column:time_zone`,
   * `column:queue_table`, `column:queue_name`.
   */
  advance(table: SchedulesTable): Statement;
  /** Every row, by name, for the CLI and the dashboard. */
  list(table: SchedulesTable): Statement;
}

/** How one database spells what differs. */
interface ScheduleSpelling {
  readonly style: SqlStyle;
  readonly now: string;
  readonly types: {
    readonly name: string;
    readonly text: string;
    readonly zone: string;
    readonly count: string;
  };
  /** `INSERT INTO` target, with the alias the update list reads the existing row through, if any. */
  insertTarget(table: SqlText): SqlText;
  /** What follows the VALUES list so a declaration of an existing schedule updates its row. */
  upsert(assignments: readonly Assignment[]): SqlText;
  /** NULL-safe equality of a column and a bound value: a row never fired holds NULL. */
  isSameAs(column: string, value: SqlText): SqlText;
}

/**
 * One assignment of the upsert: the column, and its new value given the existing row's column
 * and the declared value (each database names both its own way).
 */
interface Assignment {
  readonly column: string;
  value(existing: (column: string) => SqlText, declared: (column: string) => SqlText): SqlText;
}

const c = SCHEDULE_COLUMNS;

/**
 * `last_tick_at` comes first: MySQL evaluates ON DUPLICATE KEY UPDATE assignments left to right,
 * each seeing the ones before, so the comparison with the old cron must precede its update.
 */
function upsertAssignments(now: SqlText): Assignment[] {
  const sameDefinition = (existing: (column: string) => SqlText, declared: (column: string) => SqlText) =>
    sql`${existing(c.cron)} = ${declared(c.cron)} AND ${existing(c.timeZone)} = ${declared(c.timeZone)}`;
  return [
    {
      column: c.lastTickAt,
      value: (existing, declared) =>
        sql`CASE WHEN ${sameDefinition(existing, declared)} THEN ${existing(c.lastTickAt)} ELSE ${declared(c.lastTickAt)} END`,
    },
    ...[c.queueTable, c.queueName, c.cron, c.timeZone].map(
      (column): Assignment => ({ column, value: (_existing, declared) => declared(column) }),
    ),
    { column: c.updatedAt, value: () => now },
  ];
}

function renderAssignments(
  assignments: readonly Assignment[],
  existing: (column: string) => SqlText,
  declared: (column: string) => SqlText,
): SqlText {
  return joinSql(
    assignments.map((assignment) => sql`${identifier(assignment.column)} = ${assignment.value(existing, declared)}`),
    ', ',
  );
}

/** The existing row through the alias `existing`: Postgres would find a bare column ambiguous with EXCLUDED's. */
const POSTGRES: ScheduleSpelling = {
  style: DOUBLE_QUOTE_STYLE,
  now: POSTGRES_CLOCK.now,
  types: { name: 'text', text: 'text', zone: 'text', count: 'bigint' },
  insertTarget: (table) => sql`${table} AS ${identifier('existing')}`,
  upsert: (assignments) =>
    sql` ON CONFLICT (${identifier(c.name)}) DO UPDATE SET ${renderAssignments(
      assignments,
      (column) => sql`${identifier('existing')}.${identifier(column)}`,
      (column) => sql`EXCLUDED.${identifier(column)}`,
    )}`,
  isSameAs: (column, value) => sql`${identifier(column)} IS NOT DISTINCT FROM ${value}`,
};

/**
 * The name compares exactly (NO PAD binary: `daily` and `daily ` are two schedules), as the
 * queue tables' naming columns do. MySQL 8.0.20 deprecates `VALUES(col)` and MariaDB lacks the
 * row alias, so the update binds the declared values a second time; a bare column is the
 * existing row's.
 */
function mysqlSpelling(options: { mariadb: boolean }): ScheduleSpelling {
  const exact = exactTextCharset(options);
  return {
    style: BACKTICK_STYLE,
    now: MYSQL_CLOCK.now,
    types: {
      name: `varchar(${MAX_SCHEDULE_NAME_LENGTH}) ${exact}`,
      text: `varchar(255) ${exact}`,
      zone: `varchar(64) ${exact}`,
      count: 'bigint',
    },
    insertTarget: (table) => table,
    upsert: (assignments) =>
      sql` ON DUPLICATE KEY UPDATE ${renderAssignments(
        assignments,
        (column) => identifier(column),
        (column) => param(`column:${column}`),
      )}`,
    isSameAs: (column, value) => sql`${identifier(column)} <=> ${value}`,
  };
}

/** SQLite's upsert reads the existing row through bare columns and the declared one through `excluded`. */
const SQLITE: ScheduleSpelling = {
  style: BACKTICK_STYLE,
  now: SQLITE_CLOCK.now,
  types: { name: 'text', text: 'text', zone: 'text', count: 'integer' },
  insertTarget: (table) => table,
  upsert: (assignments) =>
    sql` ON CONFLICT (${identifier(c.name)}) DO UPDATE SET ${renderAssignments(
      assignments,
      (column) => identifier(column),
      (column) => sql`excluded.${identifier(column)}`,
    )}`,
  isSameAs: (column, value) => sql`${identifier(column)} IS ${value}`,
};

const SPELLINGS: Record<SchedulesDatabase, ScheduleSpelling> = {
  postgres: POSTGRES,
  mysql: mysqlSpelling({ mariadb: false }),
  mariadb: mysqlSpelling({ mariadb: true }),
  sqlite: SQLITE,
};

/** Parses and validates `name` or `schema.name` for a schedules table on `database`. */
export function parseSchedulesTable(value: string, database: SchedulesDatabase): SchedulesTable {
  return parseSideTable(value, database, 'schedules table');
}

/** The columns `read` and `list` return, in order. */
const READ_COLUMNS = [c.name, c.queueTable, c.queueName, c.cron, c.timeZone, c.lastTickAt, c.firedCount, c.missedCount, c.updatedAt];

export function createScheduleStatements(database: SchedulesDatabase): ScheduleStatements {
  const spelling = SPELLINGS[database];
  const { style, types } = spelling;
  const tableOf = sideTableName;
  const column = identifier;
  const now = fixedSql(spelling.now);
  const readList = joinSql(READ_COLUMNS.map(column), ', ');
  const statements: ScheduleStatements = {
    createTable: (table) => {
      const { time } = sideTableTypes(database);
      return renderCreateSideTable(database, table, {
        columns: [
          [c.name, `${types.name} NOT NULL`],
          [c.queueTable, `${types.text} NOT NULL`],
          [c.queueName, `${types.text} NOT NULL`],
          [c.cron, `${types.text} NOT NULL`],
          [c.timeZone, `${types.zone} NOT NULL`],
          [c.lastTickAt, `${time} NULL`],
          [c.firedCount, `${types.count} NOT NULL DEFAULT 0`],
          [c.missedCount, `${types.count} NOT NULL DEFAULT 0`],
          [c.updatedAt, `${time} NOT NULL`],
        ],
        primaryKey: [c.name],
      });
    },
    register: (table) => {
      const declared = [c.name, c.queueTable, c.queueName, c.cron, c.timeZone, c.lastTickAt];
      const inserted = [...declared, c.firedCount, c.missedCount, c.updatedAt];
      const values = [...declared.map((name) => param(`column:${name}`)), fixedSql('0'), fixedSql('0'), now];
      return renderStatement(
        style,
        'schedule.register',
        sql`INSERT INTO ${spelling.insertTarget(tableOf(table))} (${joinSql(inserted.map(column), ', ')}) VALUES (${joinSql(values, ', ')})${spelling.upsert(upsertAssignments(now))}`,
      );
    },
    read: (table) =>
      renderStatement(
        style,
        'schedule.read',
        sql`SELECT ${readList} FROM ${tableOf(table)} WHERE ${column(c.name)} = ${param(`column:${c.name}`)}`,
      ),
    advance: (table) => {
      const definition = [c.cron, c.timeZone, c.queueTable, c.queueName].map(
        (name) => sql` AND ${column(name)} = ${param(`column:${name}`)}`,
      );
      return renderStatement(
        style,
        'schedule.advance',
        sql`UPDATE ${tableOf(table)} SET ${column(c.lastTickAt)} = ${param(`column:${c.lastTickAt}`)}, ${column(c.firedCount)} = ${column(c.firedCount)} + ${param(`column:${c.firedCount}`)}, ${column(c.missedCount)} = ${column(c.missedCount)} + ${param(`column:${c.missedCount}`)} WHERE ${column(c.name)} = ${param(`column:${c.name}`)} AND ${spelling.isSameAs(c.lastTickAt, param('column:seen_last_tick_at'))}${joinSql(definition, '')}`,
      );
    },
    list: (table) =>
      renderStatement(style, 'schedule.list', sql`SELECT ${readList} FROM ${tableOf(table)} ORDER BY ${column(c.name)}`),
  };
  return Object.freeze(statements);
}
