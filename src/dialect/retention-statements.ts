/**
 * Retention: deleting processed rows and dead letters older than an age, in bounded batches, and
 * the maintenance table whose lease lets one replica at a time do it (no leader election: a row
 * per task, taken by a conditional update while its lease has expired or is the taker's own).
 *
 * A batch deletes by primary key at most `batchSize` rows, in id order, skipping rows another
 * transaction locked, so it never waits on a claim's row nor makes a claim wait for long:
 * - Postgres: one `DELETE … WHERE id = ANY(ARRAY(SELECT id … LIMIT n FOR UPDATE SKIP LOCKED))`
 *   (through the primary key, as every statement that joins rows back to the table here);
 * - MySQL, MariaDB: `SELECT id … LIMIT n FOR UPDATE SKIP LOCKED` then `DELETE … WHERE id IN (…)`
 *   in one READ COMMITTED transaction (so InnoDB keeps no lock on the rows it read and passed
 *   over); a DELETE with ORDER BY and LIMIT would wait on every locked row in its way;
 * - SQLite: `DELETE … WHERE id IN (SELECT id … LIMIT n)`: one writer at a time, no row locks.
 *
 * How old a row is:
 * - processed: its processedAt, which the settlement stamped;
 * - a dead letter: its retryAfter. A dead letter keeps the row as it was (the group, or the copy
 *   in a dead-letter table, with the last error in its headers) and no column records when it
 *   died; retryAfter is when its last attempt became due, so it died after that, by as long as
 *   it waited for a worker plus its handler's run. Its age is counted from there, and a table
 *   without retryAfter cannot prune dead letters by age.
 * The cutoff is the host's now less the age, or on a `clock: 'database'` table the database's.
 */
import { DeclarationError } from '../errors.js';
import type { Statement } from '../statement.js';
import type { TableSpec } from '../table/table-spec.js';
import { tableOf } from './claim-clauses.js';
import { MYSQL_CLOCK, POSTGRES_CLOCK, SQLITE_CLOCK } from './database-clock.js';
import type { DeadLetterTarget } from './dialect.js';
import { deadLetterTableOf } from './portable-statements.js';
import {
  BACKTICK_STYLE,
  databaseClock,
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

export type RetentionDatabase = SideTableDatabase;

/** The table the maintenance leases live in when the retain options name none. */
export const DEFAULT_MAINTENANCE_TABLE = 'tablequeue_maintenance';

/** Where the maintenance leases live: `name` or `schema.name`. */
export type MaintenanceTable = SideTable;

/** Column names of the maintenance table, fixed: any replica reads any other's row. */
export const MAINTENANCE_COLUMNS = Object.freeze({
  task: 'task',
  holder: 'holder',
  lockedUntil: 'locked_until',
});

/** What a prune deletes: processed rows, or the dead letters at a destination. */
export type PruneTarget =
  | { readonly kind: 'processed' }
  | { readonly kind: 'deadLetter'; readonly destination: DeadLetterTarget };

/**
 * The label of `tablequeue_pruned_rows_total` and of the retention stats: the queue table's rows
 * by target, and `dedupeWindow`, the table's `dedupeForMs` windows that passed.
 */
export type PrunedKind = PruneTarget['kind'] | 'dedupeWindow';

/**
 * One batch's statements. `oneStatement`: the delete alone, its affected rows the count.
 * `lockThenDelete`: in a READ COMMITTED transaction, `lock` selects the ids (column `id`),
 * then `deleteIds(n)` deletes them, rendered for `n` ids and bound with `bindRepeated`.
 */
export type PruneBatch =
  | { readonly shape: 'oneStatement'; readonly delete: Statement }
  | { readonly shape: 'lockThenDelete'; readonly lock: Statement; deleteIds(rowCount: number): Statement };

/** The column `count` returns. */
export const PRUNE_COUNT_COLUMN = 'row_count';

/**
 * Params of the prune statements: `olderThan` (host clock) or `cutoffDelayMicroseconds`
 * (database clock, negative); `deadLetterGroup` for dead letters in a group; `now` for dead
 * letters in a group of a lease table (a row under a live lease is in work, and stays).
 */
export interface RetentionStatements {
  /** `CREATE TABLE IF NOT EXISTS`, run before the first lease, so retention needs no migration. */
  createMaintenanceTable(table: MaintenanceTable): string;
  /** Inserts the task's row, expired, unless it is there. Param `column:task`. */
  addTask(table: MaintenanceTable): Statement;
  /**
   * Takes or renews the task's lease for `delayMicroseconds` on the database clock, only while
   * it has expired or `column:holder` holds it: one affected row means held.
   */
  takeLease(table: MaintenanceTable): Statement;
  /** Ends the holder's lease now, so another replica need not wait for it to expire. */
  releaseLease(table: MaintenanceTable): Statement;
  /** One batch of at most `batchSize` rows. */
  pruneBatch(spec: TableSpec, target: PruneTarget, batchSize: number): PruneBatch;
  /** How many rows the batches would delete now (`tablequeue prune --dry-run`). */
  count(spec: TableSpec, target: PruneTarget): Statement;
}

interface RetentionSpelling {
  readonly style: SqlStyle;
  readonly clock: DatabaseClockSpelling;
  /** What follows an INSERT so that an existing row is left as it is. */
  readonly keepExisting: SqlText;
  readonly shape: PruneBatch['shape'];
  /** Postgres compares through `= ANY(ARRAY(…))`, the others `IN (…)`. */
  idsIn(id: SqlText, select: SqlText): SqlText;
  readonly skipLocked: boolean;
}

const POSTGRES: RetentionSpelling = {
  style: { ...DOUBLE_QUOTE_STYLE, clock: POSTGRES_CLOCK },
  clock: POSTGRES_CLOCK,
  keepExisting: sql` ON CONFLICT (${identifier(MAINTENANCE_COLUMNS.task)}) DO NOTHING`,
  shape: 'oneStatement',
  idsIn: (id, select) => sql`${id} = ANY(ARRAY(${select}))`,
  skipLocked: true,
};

const MYSQL: RetentionSpelling = {
  style: { ...BACKTICK_STYLE, clock: MYSQL_CLOCK },
  clock: MYSQL_CLOCK,
  keepExisting: sql` ON DUPLICATE KEY UPDATE ${identifier(MAINTENANCE_COLUMNS.task)} = ${identifier(MAINTENANCE_COLUMNS.task)}`,
  shape: 'lockThenDelete',
  idsIn: (id, select) => sql`${id} IN (${select})`,
  skipLocked: true,
};

const SQLITE: RetentionSpelling = {
  style: { ...BACKTICK_STYLE, clock: SQLITE_CLOCK },
  clock: SQLITE_CLOCK,
  keepExisting: sql` ON CONFLICT (${identifier(MAINTENANCE_COLUMNS.task)}) DO NOTHING`,
  shape: 'oneStatement',
  idsIn: (id, select) => sql`${id} IN (${select})`,
  skipLocked: false,
};

const SPELLINGS: Record<RetentionDatabase, RetentionSpelling> = {
  postgres: POSTGRES,
  mysql: MYSQL,
  mariadb: MYSQL,
  sqlite: SQLITE,
};

/** The most rows one batch may delete: MySQL binds each id, and 65,535 placeholders is its limit. */
export const MAX_PRUNE_BATCH_SIZE = 10_000;

/** The largest batch padded to a power of two. */
const MAX_PADDED_IDS = 16_384;

/** Parses and validates `name` or `schema.name` for a maintenance table on `database`. */
export function parseMaintenanceTable(value: string, database: RetentionDatabase): MaintenanceTable {
  return parseSideTable(value, database, 'maintenance table');
}

/**
 * Refuses a prune the table cannot do, saying what to declare: processed rows need processedAt,
 * dead letters need retryAfter (their age) and, in a group, the group column. `where` starts
 * the message (`broker.retain(jobs)`, `tablequeue prune`).
 */
export function checkPrunable(spec: TableSpec, target: PruneTarget, where: string): void {
  if (target.kind === 'processed') {
    if (spec.processedAt === undefined) {
      throw new DeclarationError(
        `${where}: table "${spec.qualifiedName}" has no processedAt column, so processed rows are deleted at once and there are none to keep; ` +
          'declare processedAt in defineTable to keep them for a while, or leave processedForMs out',
      );
    }
    return;
  }
  if (spec.retryAfter === undefined) {
    throw new DeclarationError(
      `${where}: table "${spec.qualifiedName}" has no retryAfter column, and a dead letter's age counts from it (when its last attempt became due: no column records when a row became a dead letter); ` +
        'declare retryAfter in defineTable, or leave the dead-letter age out',
    );
  }
  if (target.destination.kind === 'group' && spec.group === undefined) {
    throw new DeclarationError(
      `${where}: table "${spec.qualifiedName}" has no group column, so it holds no dead-letter group; name the dead-letter table instead`,
    );
  }
}

export function createRetentionStatements(database: RetentionDatabase): RetentionStatements {
  const spelling = SPELLINGS[database];
  const { style } = spelling;
  const maintenanceOf = sideTableName;
  const m = MAINTENANCE_COLUMNS;
  const now = fixedSql(spelling.clock.now);
  const taskIs = sql`${identifier(m.task)} = ${param(`column:${m.task}`)}`;
  const holderIs = sql`${identifier(m.holder)} = ${param(`column:${m.holder}`)}`;

  const prunedTable = (spec: TableSpec, target: PruneTarget): SqlText =>
    target.kind === 'deadLetter' && target.destination.kind === 'table' ? deadLetterTableOf(target.destination) : tableOf(spec);

  const conditions = (spec: TableSpec, target: PruneTarget): SqlText[] => {
    checkPrunable(spec, target, 'prune');
    const cutoff = spec.clock === 'database' ? databaseClock('cutoffDelayMicroseconds') : param('olderThan');
    if (target.kind === 'processed') return [sql`${identifier(spec.processedAt!)} < ${cutoff}`];
    const aged = sql`${identifier(spec.retryAfter!)} < ${cutoff}`;
    if (target.destination.kind === 'table') return [aged];
    // A subscription may read the dead-letter group: its finished rows are processed rows, and a
    // row under a live lease is in work. Lease tokens are host times, on every clock.
    const inGroup = [sql`${identifier(spec.group!.column)} = ${param('deadLetterGroup')}`, aged];
    if (spec.processedAt !== undefined) inGroup.push(sql`${identifier(spec.processedAt)} IS NULL`);
    if (spec.lockedUntil !== undefined) {
      const lockedUntil = identifier(spec.lockedUntil);
      inGroup.push(sql`(${lockedUntil} IS NULL OR ${lockedUntil} <= ${param('now')})`);
    }
    return inGroup;
  };

  const checkBatchSize = (batchSize: number): void => {
    if (!Number.isInteger(batchSize) || batchSize < 1 || batchSize > MAX_PRUNE_BATCH_SIZE) {
      throw new TypeError(`a prune batch is a whole number of rows from 1 to ${MAX_PRUNE_BATCH_SIZE}, got ${batchSize}`);
    }
  };

  const statementName = (target: PruneTarget, step: string) => `retention.${target.kind}.${step}`;

  const statements: RetentionStatements = {
    /** Task names and holders compare exactly whatever the database's default collation. */
    createMaintenanceTable: (table) => {
      const types = sideTableTypes(database);
      return renderCreateSideTable(database, table, {
        columns: [
          [m.task, `${types.exactText(255)} NOT NULL`],
          [m.holder, `${types.exactText(64)} NOT NULL`],
          [m.lockedUntil, `${types.time} NOT NULL`],
        ],
        primaryKey: [m.task],
      });
    },
    addTask: (table) =>
      renderStatement(
        style,
        'retention.addTask',
        sql`INSERT INTO ${maintenanceOf(table)} (${joinSql([m.task, m.holder, m.lockedUntil].map(identifier), ', ')}) VALUES (${param(`column:${m.task}`)}, '', ${now})${spelling.keepExisting}`,
      ),
    takeLease: (table) =>
      renderStatement(
        style,
        'retention.takeLease',
        sql`UPDATE ${maintenanceOf(table)} SET ${identifier(m.holder)} = ${param(`column:${m.holder}`)}, ${identifier(m.lockedUntil)} = ${databaseClock('delayMicroseconds')} WHERE ${taskIs} AND (${identifier(m.lockedUntil)} <= ${now} OR ${holderIs})`,
      ),
    releaseLease: (table) =>
      renderStatement(
        style,
        'retention.releaseLease',
        sql`UPDATE ${maintenanceOf(table)} SET ${identifier(m.lockedUntil)} = ${now} WHERE ${taskIs} AND ${holderIs}`,
      ),
    pruneBatch: (spec, target, batchSize) => {
      checkBatchSize(batchSize);
      const table = prunedTable(spec, target);
      const id = identifier(spec.id.column);
      const where = joinSql(conditions(spec, target), ' AND ');
      const lockClause = spelling.skipLocked ? fixedSql(' FOR UPDATE SKIP LOCKED') : fixedSql('');
      const select = sql`SELECT ${id} FROM ${table} WHERE ${where} ORDER BY ${id} LIMIT ${fixedSql(String(batchSize))}${lockClause}`;
      if (spelling.shape === 'oneStatement') {
        return {
          shape: 'oneStatement',
          delete: renderStatement(style, statementName(target, 'delete'), sql`DELETE FROM ${table} WHERE ${spelling.idsIn(id, select)}`),
        };
      }
      return {
        shape: 'lockThenDelete',
        lock: renderStatement(style, statementName(target, 'lock'), select),
        deleteIds: (rowCount) => {
          // The ids a batch locked, padded to a power of two (bindRepeated) so few texts are prepared.
          if (!Number.isInteger(rowCount) || rowCount < 1 || rowCount > MAX_PADDED_IDS) {
            throw new TypeError(`a prune deletes 1 to ${MAX_PADDED_IDS} ids at once, got ${rowCount}`);
          }
          const ids = joinSql(Array.from({ length: rowCount }, () => param('id')), ', ');
          return renderStatement(style, statementName(target, 'deleteIds'), sql`DELETE FROM ${table} WHERE ${id} IN (${ids})`);
        },
      };
    },
    count: (spec, target) =>
      renderStatement(
        style,
        statementName(target, 'count'),
        sql`SELECT COUNT(*) AS ${identifier(PRUNE_COUNT_COLUMN)} FROM ${prunedTable(spec, target)} WHERE ${joinSql(conditions(spec, target), ' AND ')}`,
      ),
  };
  return Object.freeze(statements);
}
