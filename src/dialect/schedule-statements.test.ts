import { describe, expect, it } from 'vitest';
import { DeclarationError } from '../errors.js';
import { createScheduleStatements, parseSchedulesTable } from './schedule-statements.js';

const postgres = createScheduleStatements('postgres');
const mysql = createScheduleStatements('mysql');
const mariadb = createScheduleStatements('mariadb');
const sqlite = createScheduleStatements('sqlite');

const plain = parseSchedulesTable('tablequeue_schedules', 'postgres');
const qualified = parseSchedulesTable('ops.schedules', 'postgres');

const REGISTER_PARAMS = ['column:name', 'column:queue_table', 'column:queue_name', 'column:cron', 'column:time_zone', 'column:last_tick_at'];
const ADVANCE_PARAMS = [
  'column:last_tick_at',
  'column:fired_count',
  'column:missed_count',
  'column:name',
  'column:seen_last_tick_at',
  'column:cron',
  'column:time_zone',
  'column:queue_table',
  'column:queue_name',
];

describe('postgres schedules', () => {
  it('creates the table if it is missing', () => {
    expect(postgres.createTable(qualified)).toBe(
      [
        'CREATE TABLE IF NOT EXISTS "ops"."schedules" (',
        '  "name" text NOT NULL PRIMARY KEY,',
        '  "queue_table" text NOT NULL,',
        '  "queue_name" text NOT NULL,',
        '  "cron" text NOT NULL,',
        '  "time_zone" text NOT NULL,',
        '  "last_tick_at" timestamptz NULL,',
        '  "fired_count" bigint NOT NULL DEFAULT 0,',
        '  "missed_count" bigint NOT NULL DEFAULT 0,',
        '  "updated_at" timestamptz NOT NULL',
        ')',
      ].join('\n'),
    );
  });

  it('registers with ON CONFLICT, keeping the last tick unless the cron or zone changed', () => {
    expect(postgres.register(plain)).toEqual({
      name: 'schedule.register',
      sql:
        'INSERT INTO "tablequeue_schedules" AS "existing" ("name", "queue_table", "queue_name", "cron", "time_zone", "last_tick_at", "fired_count", "missed_count", "updated_at") ' +
        'VALUES ($1, $2, $3, $4, $5, $6, 0, 0, statement_timestamp()) ' +
        'ON CONFLICT ("name") DO UPDATE SET "last_tick_at" = CASE WHEN "existing"."cron" = EXCLUDED."cron" AND "existing"."time_zone" = EXCLUDED."time_zone" ' +
        'THEN "existing"."last_tick_at" ELSE EXCLUDED."last_tick_at" END, "queue_table" = EXCLUDED."queue_table", "queue_name" = EXCLUDED."queue_name", ' +
        '"cron" = EXCLUDED."cron", "time_zone" = EXCLUDED."time_zone", "updated_at" = statement_timestamp()',
      params: REGISTER_PARAMS,
    });
  });

  it('advances with IS NOT DISTINCT FROM the tick read, under the declared definition', () => {
    expect(postgres.advance(plain)).toEqual({
      name: 'schedule.advance',
      sql:
        'UPDATE "tablequeue_schedules" SET "last_tick_at" = $1, "fired_count" = "fired_count" + $2, "missed_count" = "missed_count" + $3 ' +
        'WHERE "name" = $4 AND "last_tick_at" IS NOT DISTINCT FROM $5 AND "cron" = $6 AND "time_zone" = $7 AND "queue_table" = $8 AND "queue_name" = $9',
      params: ADVANCE_PARAMS,
    });
  });

  it('reads one schedule and lists them all by name', () => {
    const columns = '"name", "queue_table", "queue_name", "cron", "time_zone", "last_tick_at", "fired_count", "missed_count", "updated_at"';
    expect(postgres.read(plain)).toEqual({
      name: 'schedule.read',
      sql: `SELECT ${columns} FROM "tablequeue_schedules" WHERE "name" = $1`,
      params: ['column:name'],
    });
    expect(postgres.list(qualified)).toEqual({
      name: 'schedule.list',
      sql: `SELECT ${columns} FROM "ops"."schedules" ORDER BY "name"`,
      params: [],
    });
  });
});

describe('mysql and mariadb schedules', () => {
  const table = (collation: string) =>
    [
      'CREATE TABLE IF NOT EXISTS `tablequeue_schedules` (',
      `  \`name\` varchar(200) CHARACTER SET utf8mb4 COLLATE ${collation} NOT NULL PRIMARY KEY,`,
      `  \`queue_table\` varchar(255) CHARACTER SET utf8mb4 COLLATE ${collation} NOT NULL,`,
      `  \`queue_name\` varchar(255) CHARACTER SET utf8mb4 COLLATE ${collation} NOT NULL,`,
      `  \`cron\` varchar(255) CHARACTER SET utf8mb4 COLLATE ${collation} NOT NULL,`,
      `  \`time_zone\` varchar(64) CHARACTER SET utf8mb4 COLLATE ${collation} NOT NULL,`,
      '  `last_tick_at` datetime(6) NULL,',
      '  `fired_count` bigint NOT NULL DEFAULT 0,',
      '  `missed_count` bigint NOT NULL DEFAULT 0,',
      '  `updated_at` datetime(6) NOT NULL',
      ')',
    ].join('\n');

  it('create the table with each flavour\'s exact NO PAD collation', () => {
    expect(mysql.createTable(plain)).toBe(table('utf8mb4_0900_bin'));
    expect(mariadb.createTable(plain)).toBe(table('utf8mb4_nopad_bin'));
  });

  it('register with ON DUPLICATE KEY UPDATE, the last tick compared before the cron is overwritten', () => {
    const expected = {
      name: 'schedule.register',
      sql:
        'INSERT INTO `ops`.`schedules` (`name`, `queue_table`, `queue_name`, `cron`, `time_zone`, `last_tick_at`, `fired_count`, `missed_count`, `updated_at`) ' +
        'VALUES (?, ?, ?, ?, ?, ?, 0, 0, UTC_TIMESTAMP(6)) ' +
        'ON DUPLICATE KEY UPDATE `last_tick_at` = CASE WHEN `cron` = ? AND `time_zone` = ? THEN `last_tick_at` ELSE ? END, ' +
        '`queue_table` = ?, `queue_name` = ?, `cron` = ?, `time_zone` = ?, `updated_at` = UTC_TIMESTAMP(6)',
      params: [
        ...REGISTER_PARAMS,
        'column:cron',
        'column:time_zone',
        'column:last_tick_at',
        'column:queue_table',
        'column:queue_name',
        'column:cron',
        'column:time_zone',
      ],
    };
    expect(mysql.register(qualified)).toEqual(expected);
    expect(mariadb.register(qualified)).toEqual(expected);
  });

  it('advance with <=>, read and list', () => {
    const columns = '`name`, `queue_table`, `queue_name`, `cron`, `time_zone`, `last_tick_at`, `fired_count`, `missed_count`, `updated_at`';
    for (const statements of [mysql, mariadb]) {
      expect(statements.advance(plain)).toEqual({
        name: 'schedule.advance',
        sql:
          'UPDATE `tablequeue_schedules` SET `last_tick_at` = ?, `fired_count` = `fired_count` + ?, `missed_count` = `missed_count` + ? ' +
          'WHERE `name` = ? AND `last_tick_at` <=> ? AND `cron` = ? AND `time_zone` = ? AND `queue_table` = ? AND `queue_name` = ?',
        params: ADVANCE_PARAMS,
      });
      expect(statements.read(plain)).toEqual({
        name: 'schedule.read',
        sql: `SELECT ${columns} FROM \`tablequeue_schedules\` WHERE \`name\` = ?`,
        params: ['column:name'],
      });
      expect(statements.list(plain)).toEqual({
        name: 'schedule.list',
        sql: `SELECT ${columns} FROM \`tablequeue_schedules\` ORDER BY \`name\``,
        params: [],
      });
    }
  });
});

describe('sqlite schedules', () => {
  const now = "strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now')";

  it('creates the table with text times', () => {
    expect(sqlite.createTable(plain)).toBe(
      [
        'CREATE TABLE IF NOT EXISTS `tablequeue_schedules` (',
        '  `name` text NOT NULL PRIMARY KEY,',
        '  `queue_table` text NOT NULL,',
        '  `queue_name` text NOT NULL,',
        '  `cron` text NOT NULL,',
        '  `time_zone` text NOT NULL,',
        '  `last_tick_at` text NULL,',
        '  `fired_count` integer NOT NULL DEFAULT 0,',
        '  `missed_count` integer NOT NULL DEFAULT 0,',
        '  `updated_at` text NOT NULL',
        ')',
      ].join('\n'),
    );
  });

  it('registers with ON CONFLICT DO UPDATE, bare columns for the existing row', () => {
    expect(sqlite.register(plain)).toEqual({
      name: 'schedule.register',
      sql:
        'INSERT INTO `tablequeue_schedules` (`name`, `queue_table`, `queue_name`, `cron`, `time_zone`, `last_tick_at`, `fired_count`, `missed_count`, `updated_at`) ' +
        `VALUES (?, ?, ?, ?, ?, ?, 0, 0, ${now}) ` +
        'ON CONFLICT (`name`) DO UPDATE SET `last_tick_at` = CASE WHEN `cron` = excluded.`cron` AND `time_zone` = excluded.`time_zone` ' +
        'THEN `last_tick_at` ELSE excluded.`last_tick_at` END, `queue_table` = excluded.`queue_table`, `queue_name` = excluded.`queue_name`, ' +
        `\`cron\` = excluded.\`cron\`, \`time_zone\` = excluded.\`time_zone\`, \`updated_at\` = ${now}`,
      params: REGISTER_PARAMS,
    });
  });

  it('advances with IS', () => {
    expect(sqlite.advance(plain)).toEqual({
      name: 'schedule.advance',
      sql:
        'UPDATE `tablequeue_schedules` SET `last_tick_at` = ?, `fired_count` = `fired_count` + ?, `missed_count` = `missed_count` + ? ' +
        'WHERE `name` = ? AND `last_tick_at` IS ? AND `cron` = ? AND `time_zone` = ? AND `queue_table` = ? AND `queue_name` = ?',
      params: ADVANCE_PARAMS,
    });
  });
});

describe('schedules table names', () => {
  it('parses name and schema.name', () => {
    expect(parseSchedulesTable('schedules', 'sqlite')).toEqual({ schema: undefined, name: 'schedules' });
    expect(parseSchedulesTable('ops.schedules', 'mysql')).toEqual({ schema: 'ops', name: 'schedules' });
  });

  it('refuses names that are not plain identifiers, and over 63 bytes on PostgreSQL', () => {
    expect(() => parseSchedulesTable('schedules; drop table jobs', 'postgres')).toThrow(DeclarationError);
    expect(() => parseSchedulesTable('a.b.c', 'sqlite')).toThrow('must be "table" or "schema.table"');
    expect(() => parseSchedulesTable('s'.repeat(64), 'postgres')).toThrow('64 bytes long');
    expect(parseSchedulesTable('s'.repeat(64), 'mariadb').name).toBe('s'.repeat(64));
  });
});
