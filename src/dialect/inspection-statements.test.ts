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

/** A dead letter's mark, spelled per database. */
const MARKED_PG = `"meta" IS NOT NULL AND "meta"::text LIKE '%"tablequeue-last-error":%'`;
const MARKED_MY = "`meta` IS NOT NULL AND `meta` LIKE '%\"tablequeue-last-error\":%'";
const MARKED_SQLITE = "`meta` IS NOT NULL AND `meta` GLOB '*\"tablequeue-last-error\":*'";
const mysqlFamily = [
  ['mysql', mysql],
  ['mariadb', mariadb],
] as const;
const backtickMarks = [
  ['mysql', mysql, MARKED_MY],
  ['mariadb', mariadb, MARKED_MY],
  ['sqlite', sqlite, MARKED_SQLITE],
] as const;

describe('inspection.counts', () => {
  it('counts every state of a lease table with every role per group, dead letters apart, postgres', () => {
    const free = '"processed_at" IS NULL AND ("locked_until" IS NULL OR "locked_until" <= $1)';
    expect(statementText(postgres.counts(everyRoleLeaseTable.spec, { deadLetterGroup: false }))).toEqual({
      name: 'inspection.counts',
      sql:
        `SELECT "queue" AS queue_group, COUNT(CASE WHEN ${free} AND NOT (${MARKED_PG}) AND "retry_after" <= $2 THEN 1 END) AS ready_count, ` +
        `COUNT(CASE WHEN "processed_at" IS NULL AND ("locked_until" IS NULL OR "locked_until" <= $3) AND NOT (${MARKED_PG}) AND "retry_after" > $4 THEN 1 END) AS delayed_count, ` +
        `COUNT(CASE WHEN "processed_at" IS NULL AND NOT (${MARKED_PG}) AND "locked_until" > $5 THEN 1 END) AS in_work_count, ` +
        'COUNT("processed_at") AS processed_count, ' +
        `COUNT(CASE WHEN "processed_at" IS NULL AND (${MARKED_PG}) THEN 1 END) AS dead_lettered_count, COUNT(*) AS total_count, ` +
        `MIN(CASE WHEN "processed_at" IS NULL AND ("locked_until" IS NULL OR "locked_until" <= $6) AND NOT (${MARKED_PG}) AND "retry_after" <= $7 THEN "retry_after" END) AS oldest_ready_at ` +
        'FROM "email_jobs" GROUP BY "queue" ORDER BY "queue"',
      params: ['now', 'now', 'now', 'now', 'now', 'now', 'now'],
    });
  });

  it.each(backtickMarks)('counts every state of a lease table with every role per group, dead letters apart, %s', (_name, statements, marked) => {
    const free = '`processed_at` IS NULL AND (`locked_until` IS NULL OR `locked_until` <= ?)';
    expect(statementText(statements.counts(everyRoleLeaseTable.spec, { deadLetterGroup: false }))).toEqual({
      name: 'inspection.counts',
      sql:
        `SELECT \`queue\` AS queue_group, COUNT(CASE WHEN ${free} AND NOT (${marked}) AND \`retry_after\` <= ? THEN 1 END) AS ready_count, ` +
        `COUNT(CASE WHEN ${free} AND NOT (${marked}) AND \`retry_after\` > ? THEN 1 END) AS delayed_count, ` +
        `COUNT(CASE WHEN \`processed_at\` IS NULL AND NOT (${marked}) AND \`locked_until\` > ? THEN 1 END) AS in_work_count, ` +
        'COUNT(`processed_at`) AS processed_count, ' +
        `COUNT(CASE WHEN \`processed_at\` IS NULL AND (${marked}) THEN 1 END) AS dead_lettered_count, COUNT(*) AS total_count, ` +
        `MIN(CASE WHEN ${free} AND NOT (${marked}) AND \`retry_after\` <= ? THEN \`retry_after\` END) AS oldest_ready_at ` +
        'FROM `email_jobs` GROUP BY `queue` ORDER BY `queue`',
      params: ['now', 'now', 'now', 'now', 'now', 'now', 'now'],
    });
  });

  it('counts the rows of a named dead-letter group as dead letters too, postgres', () => {
    const dead = (n: number) => `((${MARKED_PG}) OR ("queue" = $${n}))`;
    expect(statementText(postgres.counts(everyRoleTable.spec, { deadLetterGroup: true }))).toEqual({
      name: 'inspection.counts',
      sql:
        `SELECT "queue" AS queue_group, COUNT(CASE WHEN "processed_at" IS NULL AND NOT ${dead(1)} AND "retry_after" <= $2 THEN 1 END) AS ready_count, ` +
        `COUNT(CASE WHEN "processed_at" IS NULL AND NOT ${dead(3)} AND "retry_after" > $4 THEN 1 END) AS delayed_count, 0 AS in_work_count, ` +
        'COUNT("processed_at") AS processed_count, ' +
        `COUNT(CASE WHEN "processed_at" IS NULL AND ${dead(5)} THEN 1 END) AS dead_lettered_count, COUNT(*) AS total_count, ` +
        `MIN(CASE WHEN "processed_at" IS NULL AND NOT ${dead(6)} AND "retry_after" <= $7 THEN "retry_after" END) AS oldest_ready_at ` +
        'FROM "email_jobs" GROUP BY "queue" ORDER BY "queue"',
      params: ['deadLetterGroup', 'now', 'deadLetterGroup', 'now', 'deadLetterGroup', 'deadLetterGroup', 'now'],
    });
  });

  it.each(backtickMarks)('counts the rows of a named dead-letter group as dead letters too, %s', (_name, statements, marked) => {
    const dead = `((${marked}) OR (\`queue\` = ?))`;
    expect(statementText(statements.counts(everyRoleTable.spec, { deadLetterGroup: true }))).toEqual({
      name: 'inspection.counts',
      sql:
        `SELECT \`queue\` AS queue_group, COUNT(CASE WHEN \`processed_at\` IS NULL AND NOT ${dead} AND \`retry_after\` <= ? THEN 1 END) AS ready_count, ` +
        `COUNT(CASE WHEN \`processed_at\` IS NULL AND NOT ${dead} AND \`retry_after\` > ? THEN 1 END) AS delayed_count, 0 AS in_work_count, ` +
        'COUNT(`processed_at`) AS processed_count, ' +
        `COUNT(CASE WHEN \`processed_at\` IS NULL AND ${dead} THEN 1 END) AS dead_lettered_count, COUNT(*) AS total_count, ` +
        `MIN(CASE WHEN \`processed_at\` IS NULL AND NOT ${dead} AND \`retry_after\` <= ? THEN \`retry_after\` END) AS oldest_ready_at ` +
        'FROM `email_jobs` GROUP BY `queue` ORDER BY `queue`',
      params: ['deadLetterGroup', 'now', 'deadLetterGroup', 'now', 'deadLetterGroup', 'deadLetterGroup', 'now'],
    });
  });

  it('counts a table of only an id as one queue, every row ready: without headers nothing tells a dead letter', () => {
    expect(statementText(postgres.counts(minimalTable.spec, { deadLetterGroup: false }))).toEqual({
      name: 'inspection.counts',
      sql: 'SELECT COUNT(*) AS ready_count, 0 AS delayed_count, 0 AS in_work_count, 0 AS processed_count, 0 AS dead_lettered_count, COUNT(*) AS total_count, NULL AS oldest_ready_at FROM "jobs"',
      params: [],
    });
  });

  it('names the schema; a dead-letter group alone tells dead letters on a table without headers', () => {
    expect(statementText(mysql.counts(schemaQualifiedTable.spec, { deadLetterGroup: true }))).toEqual({
      name: 'inspection.counts',
      sql:
        'SELECT `queue` AS queue_group, COUNT(CASE WHEN (`locked_until` IS NULL OR `locked_until` <= ?) AND NOT (`queue` = ?) THEN 1 END) AS ready_count, 0 AS delayed_count, ' +
        'COUNT(CASE WHEN NOT (`queue` = ?) AND `locked_until` > ? THEN 1 END) AS in_work_count, 0 AS processed_count, ' +
        'COUNT(CASE WHEN (`queue` = ?) THEN 1 END) AS dead_lettered_count, COUNT(*) AS total_count, NULL AS oldest_ready_at ' +
        'FROM `app`.`jobs` GROUP BY `queue` ORDER BY `queue`',
      params: ['now', 'deadLetterGroup', 'deadLetterGroup', 'now', 'deadLetterGroup'],
    });
  });

  it('refuses a dead-letter group on a table without groups', () => {
    expect(() => sqlite.counts(minimalTable.spec, { deadLetterGroup: true })).toThrow(/has no group column/);
  });
});

describe('inspection.peek', () => {
  it('reads unfinished rows of a group in claim order, dead letters or not, postgres', () => {
    expect(statementText(postgres.peek(everyRoleLeaseTable.spec, everyRoleLeaseTable.columns, { byGroup: true }))).toEqual({
      name: 'inspection.peek',
      sql: `SELECT ${LEASE_COLUMNS_PG} FROM "email_jobs" WHERE "queue" = $1 AND "processed_at" IS NULL ORDER BY "priority", "retry_after", "job_id" LIMIT $2`,
      params: ['group', 'limit'],
    });
  });

  it('reads every unfinished row but the dead letters in claim order, postgres', () => {
    const peek = postgres.peek(everyRoleLeaseTable.spec, everyRoleLeaseTable.columns, {
      byGroup: false,
      withoutDeadLetters: { deadLetterGroup: true },
    });
    expect(statementText(peek)).toEqual({
      name: 'inspection.peek',
      sql:
        `SELECT ${LEASE_COLUMNS_PG} FROM "email_jobs" WHERE "processed_at" IS NULL AND NOT ((${MARKED_PG}) OR ("queue" = $1)) ` +
        'ORDER BY "priority", "retry_after", "job_id" LIMIT $2',
      params: ['deadLetterGroup', 'limit'],
    });
  });

  it.each(backtickMarks)('reads every unfinished row but the dead letters in claim order, %s', (_name, statements, marked) => {
    const peek = statements.peek(everyRoleLeaseTable.spec, everyRoleLeaseTable.columns, {
      byGroup: false,
      withoutDeadLetters: { deadLetterGroup: false },
    });
    expect(statementText(peek)).toEqual({
      name: 'inspection.peek',
      sql: `SELECT ${LEASE_COLUMNS_BT} FROM \`email_jobs\` WHERE \`processed_at\` IS NULL AND NOT (${marked}) ORDER BY \`priority\`, \`retry_after\`, \`job_id\` LIMIT ?`,
      params: ['limit'],
    });
  });

  it.each(backtickDatabases)('reads every unfinished row of a dead-letter table in claim order, %s', (_name, statements) => {
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
  it('takes the last error off, then moves unfinished dead letters back due now, attempt reset and lease cleared, postgres', () => {
    const steps = postgres.requeueFromGroup(everyRoleLeaseTable.spec, { byId: false });
    expect(steps.countedIndex).toBe(1);
    expect(steps.statements.map(statementText)).toEqual([
      {
        name: 'inspection.requeueFromGroup.unmark',
        sql:
          `UPDATE "email_jobs" SET "meta" = "meta"::text::jsonb - 'tablequeue-last-error' ` +
          `WHERE "queue" = $1 AND "processed_at" IS NULL AND ${MARKED_PG}`,
        params: ['group'],
      },
      {
        name: 'inspection.requeueFromGroup',
        sql:
          'UPDATE "email_jobs" SET "queue" = $1, "attempt" = 1, "retry_after" = $2, "locked_until" = NULL ' +
          'WHERE "queue" = $3 AND "processed_at" IS NULL',
        params: ['destination', 'now', 'group'],
      },
    ]);
  });

  it.each([
    ['mysql', mysql, MARKED_MY, 'JSON_VALID', 'JSON_REMOVE'],
    ['mariadb', mariadb, MARKED_MY, 'JSON_VALID', 'JSON_REMOVE'],
    ['sqlite', sqlite, MARKED_SQLITE, 'json_valid', 'json_remove'],
  ] as const)('moves one dead letter back by id, its last error taken off, %s', (_name, statements, marked, valid, remove) => {
    const steps = statements.requeueFromGroup(everyRoleLeaseTable.spec, { byId: true });
    expect(steps.countedIndex).toBe(1);
    expect(steps.statements.map(statementText)).toEqual([
      {
        name: 'inspection.requeueFromGroup.unmark',
        sql:
          `UPDATE \`email_jobs\` SET \`meta\` = CASE WHEN ${valid}(\`meta\`) THEN ${remove}(\`meta\`, '$."tablequeue-last-error"') ELSE \`meta\` END ` +
          `WHERE \`queue\` = ? AND \`processed_at\` IS NULL AND \`job_id\` = ? AND ${marked}`,
        params: ['group', 'id'],
      },
      {
        name: 'inspection.requeueFromGroup',
        sql:
          'UPDATE `email_jobs` SET `queue` = ?, `attempt` = 1, `retry_after` = ?, `locked_until` = NULL ' +
          'WHERE `queue` = ? AND `processed_at` IS NULL AND `job_id` = ?',
        params: ['destination', 'now', 'group', 'id'],
      },
    ]);
  });

  it('moves only, on a table without headers', () => {
    const steps = mysql.requeueFromGroup(schemaQualifiedTable.spec, { byId: false });
    expect(steps.countedIndex).toBe(0);
    expect(steps.statements.map(statementText)).toEqual([
      {
        name: 'inspection.requeueFromGroup',
        sql: 'UPDATE `app`.`jobs` SET `queue` = ?, `locked_until` = NULL WHERE `queue` = ?',
        params: ['destination', 'group'],
      },
    ]);
  });
});

describe('inspection.requeueFromTable', () => {
  const source = { kind: 'table', schema: undefined, name: 'email_dead' } as const;
  const copiedPg = (retryAfter: string) => `"job_id", "queue", "priority", "customer", ${retryAfter}, 1, NULL, NULL, "meta", "payload"`;
  const copiedBt = '`job_id`, `queue`, `priority`, `customer`, ?, 1, NULL, NULL, `meta`, `payload`';

  it('takes the last errors off, then moves every dead letter due now in one statement, postgres', () => {
    const move = postgres.requeueFromTable(everyRoleLeaseTable.spec, everyRoleLeaseTable.columns, source, { byId: false, toGroup: false });
    expect(move.countedIndex).toBe(1);
    expect(move.statements.map(statementText)).toEqual([
      {
        name: 'inspection.requeueFromTable.unmark',
        sql: `UPDATE "email_dead" SET "meta" = "meta"::text::jsonb - 'tablequeue-last-error' WHERE ${MARKED_PG}`,
        params: [],
      },
      {
        name: 'inspection.requeueFromTable',
        sql: `WITH tablequeue_moved AS (DELETE FROM "email_dead" RETURNING ${LEASE_COLUMNS_PG}) INSERT INTO "email_jobs" (${LEASE_COLUMNS_PG}) SELECT ${copiedPg('$1')} FROM tablequeue_moved`,
        params: ['now'],
      },
    ]);
  });

  it('moves one dead letter into a named group, postgres', () => {
    const move = postgres.requeueFromTable(everyRoleLeaseTable.spec, everyRoleLeaseTable.columns, source, { byId: true, toGroup: true });
    expect(move.statements.map(statementText)).toEqual([
      {
        name: 'inspection.requeueFromTable.unmark',
        sql: `UPDATE "email_dead" SET "meta" = "meta"::text::jsonb - 'tablequeue-last-error' WHERE "job_id" = $1 AND ${MARKED_PG}`,
        params: ['id'],
      },
      {
        name: 'inspection.requeueFromTable',
        sql:
          `WITH tablequeue_moved AS (DELETE FROM "email_dead" WHERE "job_id" = $1 RETURNING ${LEASE_COLUMNS_PG}) ` +
          `INSERT INTO "email_jobs" (${LEASE_COLUMNS_PG}) SELECT "job_id", $2, "priority", "customer", $3, 1, NULL, NULL, "meta", "payload" FROM tablequeue_moved`,
        params: ['id', 'destination', 'now'],
      },
    ]);
  });

  it.each(mysqlFamily)('takes the last error off, locks the dead letters, copies them back due now, then deletes them, %s', (_name, statements) => {
    const move = statements.requeueFromTable(everyRoleLeaseTable.spec, everyRoleLeaseTable.columns, source, { byId: true, toGroup: false });
    expect(move.countedIndex).toBe(2);
    expect(move.statements.map(statementText)).toEqual([
      {
        name: 'inspection.requeueFromTable.unmark',
        sql:
          "UPDATE `email_dead` SET `meta` = CASE WHEN JSON_VALID(`meta`) THEN JSON_REMOVE(`meta`, '$.\"tablequeue-last-error\"') ELSE `meta` END " +
          `WHERE \`job_id\` = ? AND ${MARKED_MY}`,
        params: ['id'],
      },
      { name: 'inspection.requeueFromTable.lock', sql: 'SELECT `job_id` FROM `email_dead` WHERE `job_id` = ? FOR UPDATE', params: ['id'] },
      {
        name: 'inspection.requeueFromTable.copy',
        sql: `INSERT INTO \`email_jobs\` (${LEASE_COLUMNS_BT}) SELECT ${copiedBt} FROM \`email_dead\` WHERE \`job_id\` = ?`,
        params: ['now', 'id'],
      },
      { name: 'inspection.requeueFromTable.remove', sql: 'DELETE FROM `email_dead` WHERE `job_id` = ?', params: ['id'] },
    ]);
  });

  it('takes the last errors off, copies back then deletes, without a lock of its own, sqlite', () => {
    const move = sqlite.requeueFromTable(everyRoleLeaseTable.spec, everyRoleLeaseTable.columns, { ...source, schema: 'main' }, {
      byId: false,
      toGroup: true,
    });
    expect(move.countedIndex).toBe(1);
    expect(move.statements.map(statementText)).toEqual([
      {
        name: 'inspection.requeueFromTable.unmark',
        sql:
          "UPDATE `main`.`email_dead` SET `meta` = CASE WHEN json_valid(`meta`) THEN json_remove(`meta`, '$.\"tablequeue-last-error\"') ELSE `meta` END " +
          `WHERE ${MARKED_SQLITE}`,
        params: [],
      },
      {
        name: 'inspection.requeueFromTable.copy',
        sql: `INSERT INTO \`email_jobs\` (${LEASE_COLUMNS_BT}) SELECT \`job_id\`, ?, \`priority\`, \`customer\`, ?, 1, NULL, NULL, \`meta\`, \`payload\` FROM \`main\`.\`email_dead\``,
        params: ['destination', 'now'],
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
