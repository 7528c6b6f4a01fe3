import { describe, expect, it } from 'vitest';
import { createInspectionStatements } from './inspection-statements.js';
import { everyRoleLeaseTable, everyRoleTable, minimalTable, schemaQualifiedTable, statementText } from './test-tables.fixture.js';

const postgres = createInspectionStatements('postgres');
const mysql = createInspectionStatements('mysql');
const mariadb = createInspectionStatements('mariadb');
const sqlite = createInspectionStatements('sqlite');
const backtickDatabases = [
  ['mysql', mysql],
  ['mariadb', mariadb],
  ['sqlite', sqlite],
] as const;

const LEASE_COLUMNS_PG =
  '"job_id", "queue", "priority", "customer", "retry_after", "attempt", "processed_at", "locked_until", "meta", "payload"';
const LEASE_COLUMNS_BT =
  '`job_id`, `queue`, `priority`, `customer`, `retry_after`, `attempt`, `processed_at`, `locked_until`, `meta`, `payload`';

describe('inspection.counts', () => {
  it('counts every state of a lease table with every role per group, postgres', () => {
    const free = '"processed_at" IS NULL AND ("locked_until" IS NULL OR "locked_until" <= $1) AND "retry_after" <= $2';
    expect(statementText(postgres.counts(everyRoleLeaseTable.spec))).toEqual({
      name: 'inspection.counts',
      sql:
        `SELECT "queue" AS queue_group, COUNT(CASE WHEN ${free} THEN 1 END) AS ready_count, ` +
        'COUNT(CASE WHEN "processed_at" IS NULL AND ("locked_until" IS NULL OR "locked_until" <= $3) AND "retry_after" > $4 THEN 1 END) AS delayed_count, ' +
        'COUNT(CASE WHEN "processed_at" IS NULL AND "locked_until" > $5 THEN 1 END) AS in_work_count, ' +
        'COUNT("processed_at") AS processed_count, COUNT(*) AS total_count, ' +
        'MIN(CASE WHEN "processed_at" IS NULL AND ("locked_until" IS NULL OR "locked_until" <= $6) AND "retry_after" <= $7 THEN "retry_after" END) AS oldest_ready_at ' +
        'FROM "email_jobs" GROUP BY "queue" ORDER BY "queue"',
      params: ['now', 'now', 'now', 'now', 'now', 'now', 'now'],
    });
  });

  it.each(backtickDatabases)('counts every state of a lease table with every role per group, %s', (_name, statements) => {
    const free = '`processed_at` IS NULL AND (`locked_until` IS NULL OR `locked_until` <= ?)';
    expect(statementText(statements.counts(everyRoleLeaseTable.spec))).toEqual({
      name: 'inspection.counts',
      sql:
        `SELECT \`queue\` AS queue_group, COUNT(CASE WHEN ${free} AND \`retry_after\` <= ? THEN 1 END) AS ready_count, ` +
        `COUNT(CASE WHEN ${free} AND \`retry_after\` > ? THEN 1 END) AS delayed_count, ` +
        'COUNT(CASE WHEN `processed_at` IS NULL AND `locked_until` > ? THEN 1 END) AS in_work_count, ' +
        'COUNT(`processed_at`) AS processed_count, COUNT(*) AS total_count, ' +
        `MIN(CASE WHEN ${free} AND \`retry_after\` <= ? THEN \`retry_after\` END) AS oldest_ready_at ` +
        'FROM `email_jobs` GROUP BY `queue` ORDER BY `queue`',
      params: ['now', 'now', 'now', 'now', 'now', 'now', 'now'],
    });
  });

  it('reads a row lock table without leases: nothing counts as in work', () => {
    expect(statementText(sqlite.counts(everyRoleTable.spec)).sql).toBe(
      'SELECT `queue` AS queue_group, COUNT(CASE WHEN `processed_at` IS NULL AND `retry_after` <= ? THEN 1 END) AS ready_count, ' +
        'COUNT(CASE WHEN `processed_at` IS NULL AND `retry_after` > ? THEN 1 END) AS delayed_count, 0 AS in_work_count, ' +
        'COUNT(`processed_at`) AS processed_count, COUNT(*) AS total_count, ' +
        'MIN(CASE WHEN `processed_at` IS NULL AND `retry_after` <= ? THEN `retry_after` END) AS oldest_ready_at FROM `email_jobs` GROUP BY `queue` ORDER BY `queue`',
    );
  });

  it('counts a table of only an id as one queue, every row ready', () => {
    expect(statementText(postgres.counts(minimalTable.spec))).toEqual({
      name: 'inspection.counts',
      sql: 'SELECT COUNT(*) AS ready_count, 0 AS delayed_count, 0 AS in_work_count, 0 AS processed_count, COUNT(*) AS total_count, NULL AS oldest_ready_at FROM "jobs"',
      params: [],
    });
  });

  it('names the schema', () => {
    expect(statementText(mysql.counts(schemaQualifiedTable.spec)).sql).toBe(
      'SELECT `queue` AS queue_group, COUNT(CASE WHEN (`locked_until` IS NULL OR `locked_until` <= ?) THEN 1 END) AS ready_count, 0 AS delayed_count, ' +
        'COUNT(CASE WHEN `locked_until` > ? THEN 1 END) AS in_work_count, 0 AS processed_count, COUNT(*) AS total_count, NULL AS oldest_ready_at ' +
        'FROM `app`.`jobs` GROUP BY `queue` ORDER BY `queue`',
    );
  });
});

describe('inspection.peek', () => {
  it('reads unfinished rows of a group in claim order, postgres', () => {
    expect(statementText(postgres.peek(everyRoleLeaseTable.spec, everyRoleLeaseTable.columns, { byGroup: true }))).toEqual({
      name: 'inspection.peek',
      sql: `SELECT ${LEASE_COLUMNS_PG} FROM "email_jobs" WHERE "queue" = $1 AND "processed_at" IS NULL ORDER BY "priority", "retry_after", "job_id" LIMIT $2`,
      params: ['group', 'limit'],
    });
  });

  it.each(backtickDatabases)('reads every unfinished row in claim order, %s', (_name, statements) => {
    expect(statementText(statements.peek(everyRoleLeaseTable.spec, everyRoleLeaseTable.columns, { byGroup: false }))).toEqual({
      name: 'inspection.peek',
      sql: `SELECT ${LEASE_COLUMNS_BT} FROM \`email_jobs\` WHERE \`processed_at\` IS NULL ORDER BY \`priority\`, \`retry_after\`, \`job_id\` LIMIT ?`,
      params: ['limit'],
    });
  });

  it('refuses a group on a table without one', () => {
    expect(() => postgres.peek(minimalTable.spec, minimalTable.columns, { byGroup: true })).toThrow(/has no group column/);
  });
});

describe('inspection.requeueFromGroup', () => {
  it('moves unfinished dead letters back, attempt reset and lease cleared, postgres', () => {
    expect(statementText(postgres.requeueFromGroup(everyRoleLeaseTable.spec, { byId: false }))).toEqual({
      name: 'inspection.requeueFromGroup',
      sql: 'UPDATE "email_jobs" SET "queue" = $1, "attempt" = 1, "locked_until" = NULL WHERE "queue" = $2 AND "processed_at" IS NULL',
      params: ['destination', 'group'],
    });
  });

  it.each(backtickDatabases)('moves one dead letter back by id, %s', (_name, statements) => {
    expect(statementText(statements.requeueFromGroup(everyRoleLeaseTable.spec, { byId: true }))).toEqual({
      name: 'inspection.requeueFromGroup',
      sql: 'UPDATE `email_jobs` SET `queue` = ?, `attempt` = 1, `locked_until` = NULL WHERE `queue` = ? AND `processed_at` IS NULL AND `job_id` = ?',
      params: ['destination', 'group', 'id'],
    });
  });
});

describe('inspection.requeueFromTable', () => {
  const source = { kind: 'table', schema: undefined, name: 'email_dead' } as const;
  const copiedPg = '"job_id", "queue", "priority", "customer", "retry_after", 1, NULL, NULL, "meta", "payload"';
  const copiedBt = '`job_id`, `queue`, `priority`, `customer`, `retry_after`, 1, NULL, NULL, `meta`, `payload`';

  it('moves every dead letter in one statement, postgres', () => {
    const move = postgres.requeueFromTable(everyRoleLeaseTable.spec, everyRoleLeaseTable.columns, source, { byId: false, toGroup: false });
    expect(move.countedIndex).toBe(0);
    expect(move.statements.map(statementText)).toEqual([
      {
        name: 'inspection.requeueFromTable',
        sql: `WITH tablequeue_moved AS (DELETE FROM "email_dead" RETURNING ${LEASE_COLUMNS_PG}) INSERT INTO "email_jobs" (${LEASE_COLUMNS_PG}) SELECT ${copiedPg} FROM tablequeue_moved`,
        params: [],
      },
    ]);
  });

  it('moves one dead letter into a named group, postgres', () => {
    const move = postgres.requeueFromTable(everyRoleLeaseTable.spec, everyRoleLeaseTable.columns, source, { byId: true, toGroup: true });
    expect(move.statements.map(statementText)).toEqual([
      {
        name: 'inspection.requeueFromTable',
        sql:
          `WITH tablequeue_moved AS (DELETE FROM "email_dead" WHERE "job_id" = $1 RETURNING ${LEASE_COLUMNS_PG}) ` +
          `INSERT INTO "email_jobs" (${LEASE_COLUMNS_PG}) SELECT "job_id", $2, "priority", "customer", "retry_after", 1, NULL, NULL, "meta", "payload" FROM tablequeue_moved`,
        params: ['id', 'destination'],
      },
    ]);
  });

  it.each([
    ['mysql', mysql],
    ['mariadb', mariadb],
  ] as const)('locks the dead letters, copies them back, then deletes them, %s', (_name, statements) => {
    const move = statements.requeueFromTable(everyRoleLeaseTable.spec, everyRoleLeaseTable.columns, source, { byId: true, toGroup: false });
    expect(move.countedIndex).toBe(1);
    expect(move.statements.map(statementText)).toEqual([
      { name: 'inspection.requeueFromTable.lock', sql: 'SELECT `job_id` FROM `email_dead` WHERE `job_id` = ? FOR UPDATE', params: ['id'] },
      {
        name: 'inspection.requeueFromTable.copy',
        sql: `INSERT INTO \`email_jobs\` (${LEASE_COLUMNS_BT}) SELECT ${copiedBt} FROM \`email_dead\` WHERE \`job_id\` = ?`,
        params: ['id'],
      },
      { name: 'inspection.requeueFromTable.remove', sql: 'DELETE FROM `email_dead` WHERE `job_id` = ?', params: ['id'] },
    ]);
  });

  it('copies back then deletes, without a lock of its own, sqlite', () => {
    const move = sqlite.requeueFromTable(everyRoleLeaseTable.spec, everyRoleLeaseTable.columns, { ...source, schema: 'main' }, {
      byId: false,
      toGroup: true,
    });
    expect(move.countedIndex).toBe(0);
    expect(move.statements.map(statementText)).toEqual([
      {
        name: 'inspection.requeueFromTable.copy',
        sql: `INSERT INTO \`email_jobs\` (${LEASE_COLUMNS_BT}) SELECT \`job_id\`, ?, \`priority\`, \`customer\`, \`retry_after\`, 1, NULL, NULL, \`meta\`, \`payload\` FROM \`main\`.\`email_dead\``,
        params: ['destination'],
      },
      { name: 'inspection.requeueFromTable.remove', sql: 'DELETE FROM `main`.`email_dead`', params: [] },
    ]);
  });
});

describe('inspection.purge', () => {
  it('deletes every row, or one group', () => {
    expect(statementText(postgres.purge(everyRoleTable.spec, { byGroup: false }))).toEqual({
      name: 'inspection.purge',
      sql: 'DELETE FROM "email_jobs"',
      params: [],
    });
    for (const [, statements] of backtickDatabases) {
      expect(statementText(statements.purge(schemaQualifiedTable.spec, { byGroup: true }))).toEqual({
        name: 'inspection.purge',
        sql: 'DELETE FROM `app`.`jobs` WHERE `queue` = ?',
        params: ['group'],
      });
    }
  });
});
