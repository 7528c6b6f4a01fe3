import { describe, expect, it } from 'vitest';
import { createControlReadStatements, type ControlReadTables } from './control-read-statements.js';

const tables: ControlReadTables = {
  queueControls: { schema: undefined, name: 'tablequeue_queue_controls' },
  cancellations: { schema: 'ops', name: 'cancels' },
};

const PAUSED_BACKTICK =
  "SELECT 'paused' AS `kind`, `queue_table` AS `queue_table`, `queue_name` AS `item` FROM `tablequeue_queue_controls` WHERE (`queue_table`, `queue_name`) IN ";
const CANCELLED_BACKTICK = "SELECT 'cancelled' AS `kind`, `queue_table` AS `queue_table`, `row_id` AS `item` FROM `ops`.`cancels` WHERE (`queue_table`, `row_id`) IN ";

describe('the one read per poll interval of pauses and cancels', () => {
  it('postgres: both halves in one statement, four text arrays, one text for any counts', () => {
    const statements = createControlReadStatements('postgres');
    expect(statements.listParams).toBe('array');
    expect(statements.read(tables, { queueKeys: 2, inWork: 3 })).toEqual({
      name: 'controlRead.read',
      sql:
        `SELECT 'paused' AS "kind", "queue_table" AS "queue_table", "queue_name" AS "item" FROM "tablequeue_queue_controls" ` +
        `WHERE ("queue_table", "queue_name") IN (SELECT * FROM unnest($1::text[], $2::text[])) AND "paused_at" IS NOT NULL` +
        ` UNION ALL ` +
        `SELECT 'cancelled' AS "kind", "queue_table" AS "queue_table", "row_id" AS "item" FROM "ops"."cancels" ` +
        `WHERE ("queue_table", "row_id") IN (SELECT * FROM unnest($3::text[], $4::text[]))`,
      params: [
        'column:queue_controls.queue_table',
        'column:queue_controls.queue_name',
        'column:cancellations.queue_table',
        'column:cancellations.row_id',
      ],
    });
    expect(statements.read(tables, { queueKeys: 4, inWork: 128 })).toEqual(statements.read(tables, { queueKeys: 2, inWork: 1 }));
  });

  it('postgres: with nothing in work, only the paused rows; with no queue keys, only the records', () => {
    const statements = createControlReadStatements('postgres');
    expect(statements.read(tables, { queueKeys: 2, inWork: 0 })).toEqual({
      name: 'controlRead.read',
      sql:
        `SELECT 'paused' AS "kind", "queue_table" AS "queue_table", "queue_name" AS "item" FROM "tablequeue_queue_controls" ` +
        `WHERE ("queue_table", "queue_name") IN (SELECT * FROM unnest($1::text[], $2::text[])) AND "paused_at" IS NOT NULL`,
      params: ['column:queue_controls.queue_table', 'column:queue_controls.queue_name'],
    });
    expect(statements.read(tables, { queueKeys: 0, inWork: 5 })).toEqual({
      name: 'controlRead.read',
      sql:
        `SELECT 'cancelled' AS "kind", "queue_table" AS "queue_table", "row_id" AS "item" FROM "ops"."cancels" ` +
        `WHERE ("queue_table", "row_id") IN (SELECT * FROM unnest($1::text[], $2::text[]))`,
      params: ['column:cancellations.queue_table', 'column:cancellations.row_id'],
    });
  });

  for (const database of ['mysql', 'mariadb'] as const) {
    it(`${database}: a pair of placeholders per queue key and per row in work, as row constructors`, () => {
      const statements = createControlReadStatements(database);
      expect(statements.listParams).toBe('repeated');
      expect(statements.read(tables, { queueKeys: 2, inWork: 1 })).toEqual({
        name: 'controlRead.read',
        sql: `${PAUSED_BACKTICK}((?, ?), (?, ?)) AND \`paused_at\` IS NOT NULL UNION ALL ${CANCELLED_BACKTICK}((?, ?))`,
        params: [
          'column:queue_controls.queue_table',
          'column:queue_controls.queue_name',
          'column:queue_controls.queue_table',
          'column:queue_controls.queue_name',
          'column:cancellations.queue_table',
          'column:cancellations.row_id',
        ],
      });
      expect(statements.read(tables, { queueKeys: 1, inWork: 0 })).toEqual({
        name: 'controlRead.read',
        sql: `${PAUSED_BACKTICK}((?, ?)) AND \`paused_at\` IS NOT NULL`,
        params: ['column:queue_controls.queue_table', 'column:queue_controls.queue_name'],
      });
    });
  }

  it('sqlite: the pairs as a VALUES list, which a row value compares with', () => {
    const statements = createControlReadStatements('sqlite');
    expect(statements.listParams).toBe('repeated');
    expect(statements.read(tables, { queueKeys: 1, inWork: 2 })).toEqual({
      name: 'controlRead.read',
      sql: `${PAUSED_BACKTICK}(VALUES (?, ?)) AND \`paused_at\` IS NOT NULL UNION ALL ${CANCELLED_BACKTICK}(VALUES (?, ?), (?, ?))`,
      params: [
        'column:queue_controls.queue_table',
        'column:queue_controls.queue_name',
        'column:cancellations.queue_table',
        'column:cancellations.row_id',
        'column:cancellations.queue_table',
        'column:cancellations.row_id',
      ],
    });
    expect(statements.read(tables, { queueKeys: 0, inWork: 1 })).toEqual({
      name: 'controlRead.read',
      sql: `${CANCELLED_BACKTICK}(VALUES (?, ?))`,
      params: ['column:cancellations.queue_table', 'column:cancellations.row_id'],
    });
  });

  it('refuses counts that are not whole numbers, and a read of nothing', () => {
    const statements = createControlReadStatements('mysql');
    expect(() => statements.read(tables, { queueKeys: 0, inWork: 0 })).toThrow('controlRead.read needs queue keys or rows in work to read');
    expect(() => statements.read(tables, { queueKeys: 1.5, inWork: 0 })).toThrow('controlRead.read needs a whole number of queue keys, got 1.5');
    expect(() => statements.read(tables, { queueKeys: 1, inWork: -1 })).toThrow('controlRead.read needs a whole number of rows in work, got -1');
  });
});
