import { describe, expect, it } from 'vitest';
import { DeclarationError } from '../errors.js';
import { createQueueControlStatements, parseQueueControlsTable } from './queue-control-statements.js';

const postgres = createQueueControlStatements('postgres');
const mysql = createQueueControlStatements('mysql');
const mariadb = createQueueControlStatements('mariadb');
const sqlite = createQueueControlStatements('sqlite');

const plain = parseQueueControlsTable('tablequeue_queue_controls', 'postgres');
const qualified = parseQueueControlsTable('ops.controls', 'postgres');
const KEYS = ['column:queue_table', 'column:queue_name'];

describe('postgres queue controls', () => {
  it('creates the table if it is missing, keyed by queue table and queue name', () => {
    expect(postgres.createTable(qualified)).toBe(
      [
        'CREATE TABLE IF NOT EXISTS "ops"."controls" (',
        '  "queue_table" text NOT NULL,',
        '  "queue_name" text NOT NULL,',
        '  "paused_at" timestamptz NULL,',
        '  "updated_at" timestamptz NOT NULL,',
        '  PRIMARY KEY ("queue_table", "queue_name")',
        ')',
      ].join('\n'),
    );
  });

  it('pauses with an upsert that keeps the first pause time, and resumes by clearing it', () => {
    expect(postgres.pause(plain)).toEqual({
      name: 'queueControl.pause',
      sql:
        'INSERT INTO "tablequeue_queue_controls" AS "tablequeue_control" ("queue_table", "queue_name", "paused_at", "updated_at") ' +
        'VALUES ($1, $2, statement_timestamp(), statement_timestamp()) ' +
        'ON CONFLICT ("queue_table", "queue_name") DO UPDATE SET "paused_at" = COALESCE("tablequeue_control"."paused_at", excluded."paused_at"), ' +
        '"updated_at" = excluded."updated_at"',
      params: KEYS,
    });
    expect(postgres.resume(plain)).toEqual({
      name: 'queueControl.resume',
      sql:
        'INSERT INTO "tablequeue_queue_controls" AS "tablequeue_control" ("queue_table", "queue_name", "paused_at", "updated_at") ' +
        'VALUES ($1, $2, NULL, statement_timestamp()) ' +
        'ON CONFLICT ("queue_table", "queue_name") DO UPDATE SET "paused_at" = NULL, "updated_at" = excluded."updated_at"',
      params: KEYS,
    });
  });

  it('reads the paused rows of a queue and of its whole table, and lists every paused queue with its age', () => {
    expect(postgres.pausedRows(plain)).toEqual({
      name: 'queueControl.pausedRows',
      sql:
        'SELECT "queue_name" FROM "tablequeue_queue_controls" WHERE "queue_table" = $1 AND "queue_name" IN ($2, \'\') AND "paused_at" IS NOT NULL',
      params: KEYS,
    });
    expect(postgres.listPaused(plain)).toEqual({
      name: 'queueControl.listPaused',
      sql:
        'SELECT "queue_table", "queue_name", CAST(EXTRACT(EPOCH FROM (statement_timestamp() - "paused_at")) * 1000 AS bigint) AS "paused_ms_ago" ' +
        'FROM "tablequeue_queue_controls" WHERE "paused_at" IS NOT NULL ORDER BY "queue_table", "queue_name"',
      params: [],
    });
  });
});

describe('mysql and mariadb queue controls', () => {
  const table = parseQueueControlsTable('tablequeue_queue_controls', 'mysql');

  it('creates the table with binary keys, so names compare exactly on both flavours', () => {
    const ddl = [
      'CREATE TABLE IF NOT EXISTS `tablequeue_queue_controls` (',
      '  `queue_table` varbinary(1020) NOT NULL,',
      '  `queue_name` varbinary(1020) NOT NULL,',
      '  `paused_at` datetime(6) NULL,',
      '  `updated_at` datetime(6) NOT NULL,',
      '  PRIMARY KEY (`queue_table`, `queue_name`)',
      ')',
    ].join('\n');
    expect(mysql.createTable(table)).toBe(ddl);
    expect(mariadb.createTable(table)).toBe(ddl);
  });

  it('pauses and resumes with ON DUPLICATE KEY UPDATE on the database clock', () => {
    const pause = {
      name: 'queueControl.pause',
      sql:
        'INSERT INTO `tablequeue_queue_controls` (`queue_table`, `queue_name`, `paused_at`, `updated_at`) ' +
        'VALUES (?, ?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6)) ' +
        'ON DUPLICATE KEY UPDATE `paused_at` = COALESCE(`paused_at`, UTC_TIMESTAMP(6)), `updated_at` = UTC_TIMESTAMP(6)',
      params: KEYS,
    };
    const resume = {
      name: 'queueControl.resume',
      sql:
        'INSERT INTO `tablequeue_queue_controls` (`queue_table`, `queue_name`, `paused_at`, `updated_at`) ' +
        'VALUES (?, ?, NULL, UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE `paused_at` = NULL, `updated_at` = UTC_TIMESTAMP(6)',
      params: KEYS,
    };
    expect(mysql.pause(table)).toEqual(pause);
    expect(mariadb.pause(table)).toEqual(pause);
    expect(mysql.resume(table)).toEqual(resume);
    expect(mariadb.resume(table)).toEqual(resume);
  });

  it('reads the paused rows and lists paused queues with their age', () => {
    const pausedRows = {
      name: 'queueControl.pausedRows',
      sql: "SELECT `queue_name` FROM `tablequeue_queue_controls` WHERE `queue_table` = ? AND `queue_name` IN (?, '') AND `paused_at` IS NOT NULL",
      params: KEYS,
    };
    const listPaused = {
      name: 'queueControl.listPaused',
      sql:
        'SELECT `queue_table`, `queue_name`, TIMESTAMPDIFF(MICROSECOND, `paused_at`, UTC_TIMESTAMP(6)) DIV 1000 AS `paused_ms_ago` ' +
        'FROM `tablequeue_queue_controls` WHERE `paused_at` IS NOT NULL ORDER BY `queue_table`, `queue_name`',
      params: [],
    };
    expect(mysql.pausedRows(table)).toEqual(pausedRows);
    expect(mariadb.pausedRows(table)).toEqual(pausedRows);
    expect(mysql.listPaused(table)).toEqual(listPaused);
    expect(mariadb.listPaused(table)).toEqual(listPaused);
  });
});

describe('sqlite queue controls', () => {
  const table = parseQueueControlsTable('tablequeue_queue_controls', 'sqlite');
  const now = "strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now')";

  it('creates the table with text times', () => {
    expect(sqlite.createTable(table)).toBe(
      [
        'CREATE TABLE IF NOT EXISTS `tablequeue_queue_controls` (',
        '  `queue_table` text NOT NULL,',
        '  `queue_name` text NOT NULL,',
        '  `paused_at` text NULL,',
        '  `updated_at` text NOT NULL,',
        '  PRIMARY KEY (`queue_table`, `queue_name`)',
        ')',
      ].join('\n'),
    );
  });

  it('pauses and resumes with ON CONFLICT on the database clock', () => {
    expect(sqlite.pause(table)).toEqual({
      name: 'queueControl.pause',
      sql:
        'INSERT INTO `tablequeue_queue_controls` AS `tablequeue_control` (`queue_table`, `queue_name`, `paused_at`, `updated_at`) ' +
        `VALUES (?, ?, ${now}, ${now}) ` +
        'ON CONFLICT (`queue_table`, `queue_name`) DO UPDATE SET `paused_at` = COALESCE(`tablequeue_control`.`paused_at`, excluded.`paused_at`), ' +
        '`updated_at` = excluded.`updated_at`',
      params: KEYS,
    });
    expect(sqlite.resume(table)).toEqual({
      name: 'queueControl.resume',
      sql:
        'INSERT INTO `tablequeue_queue_controls` AS `tablequeue_control` (`queue_table`, `queue_name`, `paused_at`, `updated_at`) ' +
        `VALUES (?, ?, NULL, ${now}) ` +
        'ON CONFLICT (`queue_table`, `queue_name`) DO UPDATE SET `paused_at` = NULL, `updated_at` = excluded.`updated_at`',
      params: KEYS,
    });
  });

  it('reads the paused rows and lists paused queues with their age', () => {
    expect(sqlite.pausedRows(table)).toEqual({
      name: 'queueControl.pausedRows',
      sql: "SELECT `queue_name` FROM `tablequeue_queue_controls` WHERE `queue_table` = ? AND `queue_name` IN (?, '') AND `paused_at` IS NOT NULL",
      params: KEYS,
    });
    expect(sqlite.listPaused(table)).toEqual({
      name: 'queueControl.listPaused',
      sql:
        "SELECT `queue_table`, `queue_name`, CAST((julianday('now') - julianday(`paused_at`)) * 86400000 AS integer) AS `paused_ms_ago` " +
        'FROM `tablequeue_queue_controls` WHERE `paused_at` IS NOT NULL ORDER BY `queue_table`, `queue_name`',
      params: [],
    });
  });
});

describe('parseQueueControlsTable', () => {
  it('takes name or schema.name and refuses what PostgreSQL would truncate', () => {
    expect(parseQueueControlsTable('ops.controls', 'mysql')).toEqual({ schema: 'ops', name: 'controls' });
    expect(() => parseQueueControlsTable('x'.repeat(64), 'postgres')).toThrow(DeclarationError);
  });
});
