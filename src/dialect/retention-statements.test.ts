import { describe, expect, it } from 'vitest';
import { DeclarationError } from '../errors.js';
import { createTableSpec } from '../table/table-spec.js';
import { checkPrunable, createRetentionStatements, parseMaintenanceTable } from './retention-statements.js';
import { everyRoleLeaseTable, everyRoleTable, minimalTable } from './test-tables.fixture.js';

const postgres = createRetentionStatements('postgres');
const mysql = createRetentionStatements('mysql');
const mariadb = createRetentionStatements('mariadb');
const sqlite = createRetentionStatements('sqlite');

const maintenance = parseMaintenanceTable('tablequeue_maintenance', 'postgres');
const processed = { kind: 'processed' } as const;
const deadLettersInGroup = { kind: 'deadLetter', destination: { kind: 'group', group: 'dead' } } as const;
const deadLetterTable = { kind: 'deadLetter', destination: { kind: 'table', schema: 'ops', name: 'dead_jobs' } } as const;
const databaseClockTable = createTableSpec({
  table: 'jobs',
  schema: 'ops',
  id: 'id',
  retryAfter: 'retry_after',
  processedAt: 'processed_at',
  clock: 'database',
});

describe('postgres retention', () => {
  it('creates the maintenance table and adds a task that is free at once', () => {
    expect(postgres.createMaintenanceTable(parseMaintenanceTable('ops.maintenance', 'postgres'))).toBe(
      [
        'CREATE TABLE IF NOT EXISTS "ops"."maintenance" (',
        '  "task" text NOT NULL PRIMARY KEY,',
        '  "holder" text NOT NULL,',
        '  "locked_until" timestamptz NOT NULL',
        ')',
      ].join('\n'),
    );
    expect(postgres.addTask(maintenance)).toEqual({
      name: 'retention.addTask',
      sql: 'INSERT INTO "tablequeue_maintenance" ("task", "holder", "locked_until") VALUES ($1, \'\', statement_timestamp()) ON CONFLICT ("task") DO NOTHING',
      params: ['column:task'],
    });
  });

  it('takes the lease only when it expired or is the holder\'s own, on the database clock, and releases it', () => {
    expect(postgres.takeLease(maintenance)).toEqual({
      name: 'retention.takeLease',
      sql:
        'UPDATE "tablequeue_maintenance" SET "holder" = $1, "locked_until" = statement_timestamp() + $2::bigint * interval \'1 microsecond\' ' +
        'WHERE "task" = $3 AND ("locked_until" <= statement_timestamp() OR "holder" = $4)',
      params: ['column:holder', 'delayMicroseconds', 'column:task', 'column:holder'],
    });
    expect(postgres.releaseLease(maintenance)).toEqual({
      name: 'retention.releaseLease',
      sql: 'UPDATE "tablequeue_maintenance" SET "locked_until" = statement_timestamp() WHERE "task" = $1 AND "holder" = $2',
      params: ['column:task', 'column:holder'],
    });
  });

  it('deletes a batch of processed rows through the primary key, skipping locked rows', () => {
    expect(postgres.pruneBatch(everyRoleTable.spec, processed, 1000)).toEqual({
      shape: 'oneStatement',
      delete: {
        name: 'retention.processed.delete',
        sql:
          'DELETE FROM "email_jobs" WHERE "job_id" = ANY(ARRAY(SELECT "job_id" FROM "email_jobs" WHERE "processed_at" < $1 ' +
          'ORDER BY "job_id" LIMIT 1000 FOR UPDATE SKIP LOCKED))',
        params: ['olderThan'],
      },
    });
  });

  it('deletes dead letters of a group by retryAfter, leaving processed rows and live leases', () => {
    expect(postgres.pruneBatch(everyRoleLeaseTable.spec, deadLettersInGroup, 500)).toEqual({
      shape: 'oneStatement',
      delete: {
        name: 'retention.deadLetter.delete',
        sql:
          'DELETE FROM "email_jobs" WHERE "job_id" = ANY(ARRAY(SELECT "job_id" FROM "email_jobs" WHERE "queue" = $1 AND "retry_after" < $2 ' +
          'AND "processed_at" IS NULL AND ("locked_until" IS NULL OR "locked_until" <= $3) ORDER BY "job_id" LIMIT 500 FOR UPDATE SKIP LOCKED))',
        params: ['deadLetterGroup', 'olderThan', 'now'],
      },
    });
  });

  it('reads the database clock on a database-clock table, for a dead-letter table and the dry run', () => {
    expect(postgres.pruneBatch(databaseClockTable, deadLetterTable, 100)).toEqual({
      shape: 'oneStatement',
      delete: {
        name: 'retention.deadLetter.delete',
        sql:
          'DELETE FROM "ops"."dead_jobs" WHERE "id" = ANY(ARRAY(SELECT "id" FROM "ops"."dead_jobs" WHERE ' +
          '"retry_after" < statement_timestamp() + $1::bigint * interval \'1 microsecond\' ORDER BY "id" LIMIT 100 FOR UPDATE SKIP LOCKED))',
        params: ['cutoffDelayMicroseconds'],
      },
    });
    expect(postgres.count(databaseClockTable, processed)).toEqual({
      name: 'retention.processed.count',
      sql: 'SELECT COUNT(*) AS "row_count" FROM "ops"."jobs" WHERE "processed_at" < statement_timestamp() + $1::bigint * interval \'1 microsecond\'',
      params: ['cutoffDelayMicroseconds'],
    });
  });
});

describe('mysql and mariadb retention', () => {
  it('spell the maintenance table and its lease alike, with exact comparisons', () => {
    for (const statements of [mysql, mariadb]) {
      expect(statements.createMaintenanceTable(maintenance)).toBe(
        [
          'CREATE TABLE IF NOT EXISTS `tablequeue_maintenance` (',
          '  `task` varchar(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,',
          '  `holder` varchar(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,',
          '  `locked_until` datetime(6) NOT NULL',
          ')',
        ].join('\n'),
      );
      expect(statements.addTask(maintenance)).toEqual({
        name: 'retention.addTask',
        sql: "INSERT INTO `tablequeue_maintenance` (`task`, `holder`, `locked_until`) VALUES (?, '', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE `task` = `task`",
        params: ['column:task'],
      });
      expect(statements.takeLease(maintenance)).toEqual({
        name: 'retention.takeLease',
        sql:
          'UPDATE `tablequeue_maintenance` SET `holder` = ?, `locked_until` = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND ' +
          'WHERE `task` = ? AND (`locked_until` <= UTC_TIMESTAMP(6) OR `holder` = ?)',
        params: ['column:holder', 'delayMicroseconds', 'column:task', 'column:holder'],
      });
      expect(statements.releaseLease(maintenance)).toEqual({
        name: 'retention.releaseLease',
        sql: 'UPDATE `tablequeue_maintenance` SET `locked_until` = UTC_TIMESTAMP(6) WHERE `task` = ? AND `holder` = ?',
        params: ['column:task', 'column:holder'],
      });
    }
  });

  it('lock a batch of ids with SKIP LOCKED, then delete those ids', () => {
    for (const statements of [mysql, mariadb]) {
      const batch = statements.pruneBatch(everyRoleLeaseTable.spec, deadLettersInGroup, 500);
      if (batch.shape !== 'lockThenDelete') throw new Error('expected lockThenDelete');
      expect(batch.lock).toEqual({
        name: 'retention.deadLetter.lock',
        sql:
          'SELECT `job_id` FROM `email_jobs` WHERE `queue` = ? AND `retry_after` < ? AND `processed_at` IS NULL ' +
          'AND (`locked_until` IS NULL OR `locked_until` <= ?) ORDER BY `job_id` LIMIT 500 FOR UPDATE SKIP LOCKED',
        params: ['deadLetterGroup', 'olderThan', 'now'],
      });
      expect(batch.deleteIds(2)).toEqual({
        name: 'retention.deadLetter.deleteIds',
        sql: 'DELETE FROM `email_jobs` WHERE `job_id` IN (?, ?)',
        params: ['id', 'id'],
      });
      const processedBatch = statements.pruneBatch(everyRoleTable.spec, processed, 1000);
      if (processedBatch.shape !== 'lockThenDelete') throw new Error('expected lockThenDelete');
      expect(processedBatch.lock.sql).toBe(
        'SELECT `job_id` FROM `email_jobs` WHERE `processed_at` < ? ORDER BY `job_id` LIMIT 1000 FOR UPDATE SKIP LOCKED',
      );
      const table = statements.pruneBatch(databaseClockTable, deadLetterTable, 100);
      if (table.shape !== 'lockThenDelete') throw new Error('expected lockThenDelete');
      expect(table.lock).toEqual({
        name: 'retention.deadLetter.lock',
        sql: 'SELECT `id` FROM `ops`.`dead_jobs` WHERE `retry_after` < UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND ORDER BY `id` LIMIT 100 FOR UPDATE SKIP LOCKED',
        params: ['cutoffDelayMicroseconds'],
      });
      expect(statements.count(databaseClockTable, processed)).toEqual({
        name: 'retention.processed.count',
        sql: 'SELECT COUNT(*) AS `row_count` FROM `ops`.`jobs` WHERE `processed_at` < UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND',
        params: ['cutoffDelayMicroseconds'],
      });
    }
  });
});

describe('sqlite retention', () => {
  it('creates the maintenance table and spells the lease on its fixed-width clock', () => {
    expect(sqlite.createMaintenanceTable(maintenance)).toBe(
      [
        'CREATE TABLE IF NOT EXISTS `tablequeue_maintenance` (',
        '  `task` text NOT NULL PRIMARY KEY,',
        '  `holder` text NOT NULL,',
        '  `locked_until` text NOT NULL',
        ')',
      ].join('\n'),
    );
    expect(sqlite.addTask(maintenance)).toEqual({
      name: 'retention.addTask',
      sql: "INSERT INTO `tablequeue_maintenance` (`task`, `holder`, `locked_until`) VALUES (?, '', strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now')) ON CONFLICT (`task`) DO NOTHING",
      params: ['column:task'],
    });
    expect(sqlite.takeLease(maintenance)).toEqual({
      name: 'retention.takeLease',
      sql:
        "UPDATE `tablequeue_maintenance` SET `holder` = ?, `locked_until` = strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now', (? / 1000000.0) || ' seconds') " +
        "WHERE `task` = ? AND (`locked_until` <= strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now') OR `holder` = ?)",
      params: ['column:holder', 'delayMicroseconds', 'column:task', 'column:holder'],
    });
    expect(sqlite.releaseLease(maintenance)).toEqual({
      name: 'retention.releaseLease',
      sql: "UPDATE `tablequeue_maintenance` SET `locked_until` = strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now') WHERE `task` = ? AND `holder` = ?",
      params: ['column:task', 'column:holder'],
    });
  });

  it('deletes a batch through a limited subquery of ids (no row locks to skip)', () => {
    expect(sqlite.pruneBatch(everyRoleTable.spec, processed, 1000)).toEqual({
      shape: 'oneStatement',
      delete: {
        name: 'retention.processed.delete',
        sql: 'DELETE FROM `email_jobs` WHERE `job_id` IN (SELECT `job_id` FROM `email_jobs` WHERE `processed_at` < ? ORDER BY `job_id` LIMIT 1000)',
        params: ['olderThan'],
      },
    });
    expect(sqlite.pruneBatch(everyRoleLeaseTable.spec, deadLettersInGroup, 500)).toEqual({
      shape: 'oneStatement',
      delete: {
        name: 'retention.deadLetter.delete',
        sql:
          'DELETE FROM `email_jobs` WHERE `job_id` IN (SELECT `job_id` FROM `email_jobs` WHERE `queue` = ? AND `retry_after` < ? ' +
          'AND `processed_at` IS NULL AND (`locked_until` IS NULL OR `locked_until` <= ?) ORDER BY `job_id` LIMIT 500)',
        params: ['deadLetterGroup', 'olderThan', 'now'],
      },
    });
    expect(sqlite.pruneBatch(databaseClockTable, deadLetterTable, 100)).toEqual({
      shape: 'oneStatement',
      delete: {
        name: 'retention.deadLetter.delete',
        sql:
          "DELETE FROM `ops`.`dead_jobs` WHERE `id` IN (SELECT `id` FROM `ops`.`dead_jobs` WHERE `retry_after` < strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now', (? / 1000000.0) || ' seconds') ORDER BY `id` LIMIT 100)",
        params: ['cutoffDelayMicroseconds'],
      },
    });
    expect(sqlite.count(everyRoleTable.spec, deadLettersInGroup)).toEqual({
      name: 'retention.deadLetter.count',
      sql: 'SELECT COUNT(*) AS `row_count` FROM `email_jobs` WHERE `queue` = ? AND `retry_after` < ? AND `processed_at` IS NULL',
      params: ['deadLetterGroup', 'olderThan'],
    });
  });
});

describe('what retention refuses', () => {
  it('says which column to declare', () => {
    expect(() => checkPrunable(minimalTable.spec, processed, 'broker.retain(jobs)')).toThrow(
      new DeclarationError(
        'broker.retain(jobs): table "jobs" has no processedAt column, so processed rows are deleted at once and there are none to keep; ' +
          'declare processedAt in defineTable to keep them for a while, or leave processedForMs out',
      ),
    );
    expect(() => checkPrunable(minimalTable.spec, deadLetterTable, 'tablequeue prune')).toThrow(/has no retryAfter column.*declare retryAfter/);
    const noGroup = createTableSpec({ table: 'jobs', id: 'id', retryAfter: 'retry_after' });
    expect(() => checkPrunable(noGroup, deadLettersInGroup, 'prune')).toThrow(/has no group column.*name the dead-letter table instead/);
  });

  it('bounds a batch', () => {
    expect(() => postgres.pruneBatch(everyRoleTable.spec, processed, 0)).toThrow(/from 1 to 10000, got 0/);
    expect(() => postgres.pruneBatch(everyRoleTable.spec, processed, 10_001)).toThrow(/from 1 to 10000/);
  });
});
