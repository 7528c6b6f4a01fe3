import { describe, expect, it } from 'vitest';
import { createDialect } from './create-dialect.js';
import type { LeaseSettleMany, LeaseSettleManyRequest } from './dialect.js';
import {
  everyRoleLeaseTable,
  minimalLeaseTable,
  reservedWordTable,
  schemaQualifiedTable,
  statementText,
  type FixtureTable,
} from './test-tables.fixture.js';

const postgres = createDialect('postgres');
const mysql = createDialect('mysql');
const mariadb = createDialect('mariadb');
const sqlite = createDialect('sqlite');

type Shape =
  | { kind: 'returning'; rowParams: string; statement: ReturnType<typeof statementText> }
  | {
      kind: 'lockThenWrite';
      rowParams: string;
      begin: string[];
      lock: ReturnType<typeof statementText>;
      write: ReturnType<typeof statementText>;
    };

function shapeOf(settleMany: LeaseSettleMany | undefined): Shape | undefined {
  if (settleMany === undefined) return undefined;
  if (settleMany.kind === 'returning') {
    return { kind: 'returning', rowParams: settleMany.rowParams, statement: statementText(settleMany.statement) };
  }
  return {
    kind: 'lockThenWrite',
    rowParams: settleMany.rowParams,
    begin: settleMany.begin.map((statement) => statement.sql),
    lock: statementText(settleMany.lock),
    write: statementText(settleMany.write),
  };
}

function render(dialect: ReturnType<typeof createDialect>, table: FixtureTable, request: LeaseSettleManyRequest): Shape | undefined {
  return shapeOf(dialect.lease.settleMany(table.spec, table.columns, request));
}

const PG_SETTLED =
  'tablequeue_settled AS (SELECT * FROM unnest(COALESCE($1, ARRAY[(NULL::"jobs")."id"]), COALESCE($2, ARRAY[(NULL::"jobs")."locked_until"])) AS tablequeue_pair(tablequeue_id, tablequeue_held))';
const PG_MATCHES =
  'tablequeue_row."id" = ANY(ARRAY(SELECT tablequeue_id FROM tablequeue_settled)) AND tablequeue_row."id" = tablequeue_settled.tablequeue_id AND tablequeue_row."locked_until" = tablequeue_settled.tablequeue_held';
const PG_EVERY_ROLE_SETTLED =
  'tablequeue_settled AS (SELECT * FROM unnest(COALESCE($1, ARRAY[(NULL::"email_jobs")."job_id"]), COALESCE($2, ARRAY[(NULL::"email_jobs")."locked_until"])) AS tablequeue_pair(tablequeue_id, tablequeue_held))';
const PG_EVERY_ROLE_MATCHES =
  'tablequeue_row."job_id" = ANY(ARRAY(SELECT tablequeue_id FROM tablequeue_settled)) AND tablequeue_row."job_id" = tablequeue_settled.tablequeue_id AND tablequeue_row."locked_until" = tablequeue_settled.tablequeue_held';

describe('postgres lease.settleMany', () => {
  it('deletes finished rows over arrays and returns the ids that still carried their token', () => {
    expect(render(postgres, minimalLeaseTable, { kind: 'finish', rowCount: 7 })).toEqual({
      kind: 'returning',
      rowParams: 'arrays',
      statement: {
        name: 'lease.settleMany.finish',
        sql: `WITH ${PG_SETTLED} DELETE FROM "jobs" AS tablequeue_row USING tablequeue_settled WHERE ${PG_MATCHES} RETURNING tablequeue_row."id"`,
        params: ['ids', 'helds'],
      },
    });
  });

  it('renders one text whatever the row count', () => {
    expect(render(postgres, minimalLeaseTable, { kind: 'finish', rowCount: 1 })).toEqual(
      render(postgres, minimalLeaseTable, { kind: 'finish', rowCount: 256 }),
    );
  });

  it('marks finished rows, releases, delays each row to its own time and moves to a dead-letter group', () => {
    const update = (assignments: string) =>
      `WITH ${PG_EVERY_ROLE_SETTLED} UPDATE "email_jobs" AS tablequeue_row SET ${assignments} FROM tablequeue_settled WHERE ${PG_EVERY_ROLE_MATCHES} RETURNING tablequeue_row."job_id"`;
    expect(render(postgres, everyRoleLeaseTable, { kind: 'finish', rowCount: 2 })).toMatchObject({
      statement: { sql: update('"processed_at" = $3, "locked_until" = NULL'), params: ['ids', 'helds', 'now'] },
    });
    expect(render(postgres, everyRoleLeaseTable, { kind: 'release', rowCount: 2 })).toMatchObject({
      statement: { name: 'lease.settleMany.release', sql: update('"locked_until" = NULL'), params: ['ids', 'helds'] },
    });
    expect(
      render(postgres, everyRoleLeaseTable, { kind: 'deadLetter', rowCount: 2, target: { kind: 'group', group: 'failed' } }),
    ).toMatchObject({
      statement: { sql: update('"queue" = $3, "locked_until" = NULL'), params: ['ids', 'helds', 'destination'] },
    });
    expect(render(postgres, everyRoleLeaseTable, { kind: 'retryAfter', rowCount: 2 })).toEqual({
      kind: 'returning',
      rowParams: 'arrays',
      statement: {
        name: 'lease.settleMany.retryAfter',
        sql:
          'WITH tablequeue_settled AS (SELECT * FROM unnest(COALESCE($1, ARRAY[(NULL::"email_jobs")."job_id"]), COALESCE($2, ARRAY[(NULL::"email_jobs")."locked_until"]), COALESCE($3, ARRAY[(NULL::"email_jobs")."retry_after"])) AS tablequeue_pair(tablequeue_id, tablequeue_held, tablequeue_due)) ' +
          `UPDATE "email_jobs" AS tablequeue_row SET "retry_after" = tablequeue_settled.tablequeue_due, "locked_until" = NULL FROM tablequeue_settled WHERE ${PG_EVERY_ROLE_MATCHES} RETURNING tablequeue_row."job_id"`,
        params: ['ids', 'helds', 'retryAfterAts'],
      },
    });
  });

  it('moves rows into a dead-letter table in one statement: the delete feeds the copy', () => {
    expect(
      render(postgres, schemaQualifiedTable, {
        kind: 'deadLetter',
        rowCount: 3,
        target: { kind: 'table', schema: 'app', name: 'failed_jobs' },
      }),
    ).toEqual({
      kind: 'returning',
      rowParams: 'arrays',
      statement: {
        name: 'lease.settleMany.deadLetter',
        sql:
          'WITH tablequeue_settled AS (SELECT * FROM unnest(COALESCE($1, ARRAY[(NULL::"app"."jobs")."id"]), COALESCE($2, ARRAY[(NULL::"app"."jobs")."locked_until"])) AS tablequeue_pair(tablequeue_id, tablequeue_held)), ' +
          'tablequeue_moved AS (DELETE FROM "app"."jobs" AS tablequeue_row USING tablequeue_settled WHERE tablequeue_row."id" = ANY(ARRAY(SELECT tablequeue_id FROM tablequeue_settled)) AND tablequeue_row."id" = tablequeue_settled.tablequeue_id AND tablequeue_row."locked_until" = tablequeue_settled.tablequeue_held RETURNING "id", "queue", "locked_until", "payload"), ' +
          'tablequeue_copied AS (INSERT INTO "app"."failed_jobs" ("id", "queue", "locked_until", "payload") SELECT "id", "queue", NULL, "payload" FROM tablequeue_moved) SELECT "id" FROM tablequeue_moved',
        params: ['ids', 'helds'],
      },
    });
  });

  it('quotes reserved words, in identifiers and in the column names it types by', () => {
    const shape = render(postgres, reservedWordTable, { kind: 'release', rowCount: 1 });
    expect(shape).toMatchObject({
      statement: {
        sql:
          'WITH tablequeue_settled AS (SELECT * FROM unnest(COALESCE($1, ARRAY[(NULL::"user"."order")."select"]), COALESCE($2, ARRAY[(NULL::"user"."order")."where"])) AS tablequeue_pair(tablequeue_id, tablequeue_held)) ' +
          'UPDATE "user"."order" AS tablequeue_row SET "where" = NULL FROM tablequeue_settled WHERE tablequeue_row."select" = ANY(ARRAY(SELECT tablequeue_id FROM tablequeue_settled)) AND tablequeue_row."select" = tablequeue_settled.tablequeue_id AND tablequeue_row."where" = tablequeue_settled.tablequeue_held RETURNING tablequeue_row."select"',
      },
    });
  });

  it('has no delayed retry without a retryAfter column, and no dead-letter group without a group column', () => {
    expect(render(postgres, minimalLeaseTable, { kind: 'retryAfter', rowCount: 1 })).toBeUndefined();
    expect(
      render(postgres, minimalLeaseTable, { kind: 'deadLetter', rowCount: 1, target: { kind: 'group', group: 'x' } }),
    ).toBeUndefined();
  });
});

const PAIRS_2 = '((`id` = ? AND `locked_until` = ?) OR (`id` = ? AND `locked_until` = ?))';
const EVERY_ROLE_PAIRS_2 = '((`job_id` = ? AND `locked_until` = ?) OR (`job_id` = ? AND `locked_until` = ?))';

describe('mysql lease.settleMany', () => {
  it('locks the rows that still carry their token, then deletes them, in one READ COMMITTED transaction', () => {
    expect(render(mysql, minimalLeaseTable, { kind: 'finish', rowCount: 2 })).toEqual({
      kind: 'lockThenWrite',
      rowParams: 'repeated',
      begin: ['SET TRANSACTION ISOLATION LEVEL READ COMMITTED', 'START TRANSACTION'],
      lock: {
        name: 'lease.settleMany.finish.lock',
        sql: `SELECT \`id\` FROM \`jobs\` WHERE ${PAIRS_2} FOR UPDATE`,
        params: ['id', 'held', 'id', 'held'],
      },
      write: {
        name: 'lease.settleMany.finish',
        sql: `DELETE FROM \`jobs\` WHERE ${PAIRS_2}`,
        params: ['id', 'held', 'id', 'held'],
      },
    });
  });

  it('marks, releases, delays each row by its id and moves to a dead-letter group under the same lock', () => {
    const writeOf = (request: LeaseSettleManyRequest) => {
      const shape = render(mysql, everyRoleLeaseTable, request);
      return shape?.kind === 'lockThenWrite' ? shape.write : undefined;
    };
    expect(writeOf({ kind: 'finish', rowCount: 2 })).toEqual({
      name: 'lease.settleMany.finish',
      sql: `UPDATE \`email_jobs\` SET \`processed_at\` = ?, \`locked_until\` = NULL WHERE ${EVERY_ROLE_PAIRS_2}`,
      params: ['now', 'id', 'held', 'id', 'held'],
    });
    expect(writeOf({ kind: 'release', rowCount: 2 })).toEqual({
      name: 'lease.settleMany.release',
      sql: `UPDATE \`email_jobs\` SET \`locked_until\` = NULL WHERE ${EVERY_ROLE_PAIRS_2}`,
      params: ['id', 'held', 'id', 'held'],
    });
    expect(writeOf({ kind: 'retryAfter', rowCount: 2 })).toEqual({
      name: 'lease.settleMany.retryAfter',
      sql: `UPDATE \`email_jobs\` SET \`retry_after\` = CASE \`job_id\` WHEN ? THEN ? WHEN ? THEN ? END, \`locked_until\` = NULL WHERE ${EVERY_ROLE_PAIRS_2}`,
      params: ['id', 'retryAfterAt', 'id', 'retryAfterAt', 'id', 'held', 'id', 'held'],
    });
    expect(writeOf({ kind: 'deadLetter', rowCount: 2, target: { kind: 'group', group: 'failed' } })).toEqual({
      name: 'lease.settleMany.deadLetter',
      sql: `UPDATE \`email_jobs\` SET \`queue\` = ?, \`locked_until\` = NULL WHERE ${EVERY_ROLE_PAIRS_2}`,
      params: ['destination', 'id', 'held', 'id', 'held'],
    });
  });

  it('leaves a dead letter into a table to the one-row copy then delete', () => {
    const target = { kind: 'table', schema: undefined, name: 'failed_jobs' } as const;
    expect(render(mysql, minimalLeaseTable, { kind: 'deadLetter', rowCount: 2, target })).toBeUndefined();
  });

  it('renders one pair per row and refuses a count below one', () => {
    const shape = render(mysql, minimalLeaseTable, { kind: 'release', rowCount: 1 });
    expect(shape?.kind === 'lockThenWrite' ? shape.write.sql : undefined).toBe(
      'UPDATE `jobs` SET `locked_until` = NULL WHERE ((`id` = ? AND `locked_until` = ?))',
    );
    expect(() => render(mysql, minimalLeaseTable, { kind: 'release', rowCount: 0 })).toThrow(TypeError);
  });
});

describe('mariadb lease.settleMany', () => {
  it('deletes finished rows in one statement with DELETE … RETURNING', () => {
    expect(render(mariadb, minimalLeaseTable, { kind: 'finish', rowCount: 2 })).toEqual({
      kind: 'returning',
      rowParams: 'repeated',
      statement: {
        name: 'lease.settleMany.finish',
        sql: `DELETE FROM \`jobs\` WHERE ${PAIRS_2} RETURNING \`id\``,
        params: ['id', 'held', 'id', 'held'],
      },
    });
  });

  it('locks then writes every update, having no UPDATE … RETURNING', () => {
    expect(render(mariadb, everyRoleLeaseTable, { kind: 'finish', rowCount: 2 })).toMatchObject({
      kind: 'lockThenWrite',
      lock: { sql: `SELECT \`job_id\` FROM \`email_jobs\` WHERE ${EVERY_ROLE_PAIRS_2} FOR UPDATE` },
    });
    expect(render(mariadb, everyRoleLeaseTable, { kind: 'release', rowCount: 2 })?.kind).toBe('lockThenWrite');
    expect(render(mariadb, everyRoleLeaseTable, { kind: 'retryAfter', rowCount: 2 })?.kind).toBe('lockThenWrite');
  });
});

describe('sqlite lease.settleMany', () => {
  it('settles every kind in one statement that returns the ids it changed', () => {
    expect(render(sqlite, minimalLeaseTable, { kind: 'finish', rowCount: 2 })).toEqual({
      kind: 'returning',
      rowParams: 'repeated',
      statement: {
        name: 'lease.settleMany.finish',
        sql: `DELETE FROM \`jobs\` WHERE ${PAIRS_2} RETURNING \`id\``,
        params: ['id', 'held', 'id', 'held'],
      },
    });
    expect(render(sqlite, everyRoleLeaseTable, { kind: 'finish', rowCount: 2 })).toEqual({
      kind: 'returning',
      rowParams: 'repeated',
      statement: {
        name: 'lease.settleMany.finish',
        sql: `UPDATE \`email_jobs\` SET \`processed_at\` = ?, \`locked_until\` = NULL WHERE ${EVERY_ROLE_PAIRS_2} RETURNING \`job_id\``,
        params: ['now', 'id', 'held', 'id', 'held'],
      },
    });
    expect(render(sqlite, everyRoleLeaseTable, { kind: 'retryAfter', rowCount: 2 })).toEqual({
      kind: 'returning',
      rowParams: 'repeated',
      statement: {
        name: 'lease.settleMany.retryAfter',
        sql: `UPDATE \`email_jobs\` SET \`retry_after\` = CASE \`job_id\` WHEN ? THEN ? WHEN ? THEN ? END, \`locked_until\` = NULL WHERE ${EVERY_ROLE_PAIRS_2} RETURNING \`job_id\``,
        params: ['id', 'retryAfterAt', 'id', 'retryAfterAt', 'id', 'held', 'id', 'held'],
      },
    });
    expect(render(sqlite, everyRoleLeaseTable, { kind: 'release', rowCount: 1 })).toMatchObject({
      statement: {
        sql: 'UPDATE `email_jobs` SET `locked_until` = NULL WHERE ((`job_id` = ? AND `locked_until` = ?)) RETURNING `job_id`',
      },
    });
  });

  it('leaves a dead letter into a table to the one-row copy then delete', () => {
    const target = { kind: 'table', schema: undefined, name: 'failed_jobs' } as const;
    expect(render(sqlite, minimalLeaseTable, { kind: 'deadLetter', rowCount: 2, target })).toBeUndefined();
  });
});
