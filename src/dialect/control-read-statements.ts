/**
 * The one read a broker with subscriptions makes per poll interval: which of its queues an
 * operator paused (the queue controls table) and which of its messages in work were cancelled
 * (the cancellations table), as one statement and one round trip. Read apart, they were two
 * statements per subscription per interval (docs/benchmarks.md, "Pause and cancel reads").
 *
 * Each result row says what it is in `kind`: `paused`, with the paused row's queue name in
 * `item` (empty text for a whole table's row), or `cancelled`, with the cancelled row's id.
 */
import type { Statement } from '../statement.js';
import { CANCELLATION_COLUMNS } from './cancellation-statements.js';
import { QUEUE_CONTROL_COLUMNS } from './queue-control-statements.js';
import { BACKTICK_STYLE, DOUBLE_QUOTE_STYLE, fixedSql, identifier, joinSql, param, qualifiedName, renderStatement, sql, type SqlStyle, type SqlText } from './quoting.js';

export type ControlReadDatabase = 'postgres' | 'mysql' | 'mariadb' | 'sqlite';

/** `name` or `schema.name`, as the queue controls and cancellations statements parse them. */
export interface ControlReadTable {
  readonly schema: string | undefined;
  readonly name: string;
}

export interface ControlReadTables {
  readonly queueControls: ControlReadTable;
  readonly cancellations: ControlReadTable;
}

/** The result's columns. */
export const CONTROL_READ_COLUMNS = Object.freeze({ kind: 'kind', queueTable: 'queue_table', item: 'item' });

/** What a result row reports, in `kind`. */
export const CONTROL_READ_KINDS = Object.freeze({ paused: 'paused', cancelled: 'cancelled' });

/**
 * What the four lists bind as: the queue keys asked about (`column:queue_controls.queue_table`
 * and `column:queue_controls.queue_name`, a queue's own row and its table's whole-table row both
 * listed) and the rows in work (`column:cancellations.queue_table`, `column:cancellations.row_id`).
 */
export const CONTROL_READ_PARAMS = Object.freeze({
  controlTable: 'column:queue_controls.queue_table',
  controlName: 'column:queue_controls.queue_name',
  cancelTable: 'column:cancellations.queue_table',
  cancelRowId: 'column:cancellations.row_id',
} as const);

export interface ControlReadStatements {
  /**
   * `array`: each list binds as one text array, and one text serves any counts (Postgres).
   * `repeated`: each key or row in work binds its own pair of placeholders, and the caller pads
   * the lists with their last pair up to the counts it rendered.
   */
  readonly listParams: 'array' | 'repeated';
  /**
   * The paused rows among `queueKeys` keys and the cancellation records among `inWork` rows in
   * work; a count of 0 leaves that half out (at least one must be above 0).
   */
  read(tables: ControlReadTables, counts: { readonly queueKeys: number; readonly inWork: number }): Statement;
}

interface ControlReadSpelling {
  readonly style: SqlStyle;
  readonly listParams: 'array' | 'repeated';
  /** `(first, second) IN …` for a list of `count` pairs. */
  pairIn(first: string, second: string, params: readonly [StatementParam, StatementParam], count: number): SqlText;
}

type StatementParam = (typeof CONTROL_READ_PARAMS)[keyof typeof CONTROL_READ_PARAMS];

const pairs = (params: readonly [StatementParam, StatementParam], count: number) =>
  Array.from({ length: count }, () => sql`(${param(params[0])}, ${param(params[1])})`);

const POSTGRES: ControlReadSpelling = {
  style: DOUBLE_QUOTE_STYLE,
  listParams: 'array',
  pairIn: (first, second, params) =>
    sql`(${identifier(first)}, ${identifier(second)}) IN (SELECT * FROM unnest(${param(params[0])}::text[], ${param(params[1])}::text[]))`,
};

const MYSQL: ControlReadSpelling = {
  style: BACKTICK_STYLE,
  listParams: 'repeated',
  pairIn: (first, second, params, count) => sql`(${identifier(first)}, ${identifier(second)}) IN (${joinSql(pairs(params, count), ', ')})`,
};

/** SQLite compares a row value only with a subquery's rows, so the pairs are a VALUES list. */
const SQLITE: ControlReadSpelling = {
  style: BACKTICK_STYLE,
  listParams: 'repeated',
  pairIn: (first, second, params, count) =>
    sql`(${identifier(first)}, ${identifier(second)}) IN (VALUES ${joinSql(pairs(params, count), ', ')})`,
};

const SPELLINGS: Record<ControlReadDatabase, ControlReadSpelling> = { postgres: POSTGRES, mysql: MYSQL, mariadb: MYSQL, sqlite: SQLITE };

export function createControlReadStatements(database: ControlReadDatabase): ControlReadStatements {
  const spelling = SPELLINGS[database];
  const out = CONTROL_READ_COLUMNS;
  const controls = QUEUE_CONTROL_COLUMNS;
  const records = CANCELLATION_COLUMNS;
  const wholeCount = (count: number, what: string) => {
    if (!Number.isInteger(count) || count < 0) throw new TypeError(`controlRead.read needs a whole number of ${what}, got ${count}`);
  };
  return Object.freeze({
    listParams: spelling.listParams,
    read: (tables: ControlReadTables, counts: { readonly queueKeys: number; readonly inWork: number }) => {
      wholeCount(counts.queueKeys, 'queue keys');
      wholeCount(counts.inWork, 'rows in work');
      if (counts.queueKeys === 0 && counts.inWork === 0) throw new TypeError('controlRead.read needs queue keys or rows in work to read');
      const parts: SqlText[] = [];
      if (counts.queueKeys > 0) {
        const keys = spelling.pairIn(controls.queueTable, controls.queueName, [CONTROL_READ_PARAMS.controlTable, CONTROL_READ_PARAMS.controlName], counts.queueKeys);
        parts.push(
          sql`SELECT ${fixedSql(`'${CONTROL_READ_KINDS.paused}'`)} AS ${identifier(out.kind)}, ${identifier(controls.queueTable)} AS ${identifier(out.queueTable)}, ${identifier(controls.queueName)} AS ${identifier(out.item)} FROM ${qualifiedName(tables.queueControls.schema, tables.queueControls.name)} WHERE ${keys} AND ${identifier(controls.pausedAt)} IS NOT NULL`,
        );
      }
      if (counts.inWork > 0) {
        const rows = spelling.pairIn(records.queueTable, records.rowId, [CONTROL_READ_PARAMS.cancelTable, CONTROL_READ_PARAMS.cancelRowId], counts.inWork);
        parts.push(
          sql`SELECT ${fixedSql(`'${CONTROL_READ_KINDS.cancelled}'`)} AS ${identifier(out.kind)}, ${identifier(records.queueTable)} AS ${identifier(out.queueTable)}, ${identifier(records.rowId)} AS ${identifier(out.item)} FROM ${qualifiedName(tables.cancellations.schema, tables.cancellations.name)} WHERE ${rows}`,
        );
      }
      return renderStatement(spelling.style, 'controlRead.read', joinSql(parts, ' UNION ALL '));
    },
  });
}
