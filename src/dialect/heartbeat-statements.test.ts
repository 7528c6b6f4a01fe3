import { describe, expect, it } from 'vitest';
import { DeclarationError } from '../errors.js';
import { createHeartbeatStatements, parseHeartbeatTable } from './heartbeat-statements.js';

const postgres = createHeartbeatStatements('postgres');
const mysql = createHeartbeatStatements('mysql');
const mariadb = createHeartbeatStatements('mariadb');
const sqlite = createHeartbeatStatements('sqlite');

const plain = parseHeartbeatTable('tablequeue_brokers', 'postgres');
const qualified = parseHeartbeatTable('ops.brokers', 'postgres');

describe('postgres heartbeat', () => {
  it('creates the table if it is missing', () => {
    expect(postgres.createTable(plain)).toBe(
      [
        'CREATE TABLE IF NOT EXISTS "tablequeue_brokers" (',
        '  "broker_id" text NOT NULL PRIMARY KEY,',
        '  "host" text NOT NULL,',
        '  "pid" integer NOT NULL,',
        '  "started_at" timestamptz NOT NULL,',
        '  "last_seen_at" timestamptz NOT NULL,',
        '  "interval_ms" integer NOT NULL,',
        '  "subscriptions" text NOT NULL',
        ')',
      ].join('\n'),
    );
  });

  it('beats with an upsert that keeps started_at and reads the database clock', () => {
    expect(postgres.beat(qualified)).toEqual({
      name: 'heartbeat.beat',
      sql:
        'INSERT INTO "ops"."brokers" ("broker_id", "host", "pid", "started_at", "last_seen_at", "interval_ms", "subscriptions") ' +
        'VALUES ($1, $2, $3, statement_timestamp(), statement_timestamp(), $4, $5) ' +
        'ON CONFLICT ("broker_id") DO UPDATE SET "last_seen_at" = EXCLUDED."last_seen_at", ' +
        '"interval_ms" = EXCLUDED."interval_ms", "subscriptions" = EXCLUDED."subscriptions"',
      params: ['column:broker_id', 'column:host', 'column:pid', 'column:interval_ms', 'column:subscriptions'],
    });
  });

  it('removes one broker and lists every broker with ages in milliseconds', () => {
    expect(postgres.remove(plain)).toEqual({
      name: 'heartbeat.remove',
      sql: 'DELETE FROM "tablequeue_brokers" WHERE "broker_id" = $1',
      params: ['column:broker_id'],
    });
    expect(postgres.list(plain)).toEqual({
      name: 'heartbeat.list',
      sql:
        'SELECT "broker_id", "host", "pid", "interval_ms", "subscriptions", ' +
        'CAST(EXTRACT(EPOCH FROM (statement_timestamp() - "last_seen_at")) * 1000 AS bigint) AS "seen_ms_ago", ' +
        'CAST(EXTRACT(EPOCH FROM (statement_timestamp() - "started_at")) * 1000 AS bigint) AS "started_ms_ago" ' +
        'FROM "tablequeue_brokers" ORDER BY "started_at", "broker_id"',
      params: [],
    });
  });
});

describe('mysql and mariadb heartbeat', () => {
  it('spell the table alike', () => {
    const expected = [
      'CREATE TABLE IF NOT EXISTS `tablequeue_brokers` (',
      '  `broker_id` varchar(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,',
      '  `host` varchar(255) NOT NULL,',
      '  `pid` int NOT NULL,',
      '  `started_at` datetime(6) NOT NULL,',
      '  `last_seen_at` datetime(6) NOT NULL,',
      '  `interval_ms` int NOT NULL,',
      '  `subscriptions` longtext NOT NULL',
      ')',
    ].join('\n');
    expect(mysql.createTable(plain)).toBe(expected);
    expect(mariadb.createTable(plain)).toBe(expected);
  });

  it('beat with ON DUPLICATE KEY UPDATE, binding the updated values a second time', () => {
    const expected = {
      name: 'heartbeat.beat',
      sql:
        'INSERT INTO `ops`.`brokers` (`broker_id`, `host`, `pid`, `started_at`, `last_seen_at`, `interval_ms`, `subscriptions`) ' +
        'VALUES (?, ?, ?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), ?, ?) ' +
        'ON DUPLICATE KEY UPDATE `last_seen_at` = UTC_TIMESTAMP(6), `interval_ms` = ?, `subscriptions` = ?',
      params: [
        'column:broker_id',
        'column:host',
        'column:pid',
        'column:interval_ms',
        'column:subscriptions',
        'column:interval_ms',
        'column:subscriptions',
      ],
    };
    expect(mysql.beat(qualified)).toEqual(expected);
    expect(mariadb.beat(qualified)).toEqual(expected);
  });

  it('remove one broker and list ages with TIMESTAMPDIFF', () => {
    for (const statements of [mysql, mariadb]) {
      expect(statements.remove(plain)).toEqual({
        name: 'heartbeat.remove',
        sql: 'DELETE FROM `tablequeue_brokers` WHERE `broker_id` = ?',
        params: ['column:broker_id'],
      });
      expect(statements.list(plain)).toEqual({
        name: 'heartbeat.list',
        sql:
          'SELECT `broker_id`, `host`, `pid`, `interval_ms`, `subscriptions`, ' +
          'TIMESTAMPDIFF(MICROSECOND, `last_seen_at`, UTC_TIMESTAMP(6)) DIV 1000 AS `seen_ms_ago`, ' +
          'TIMESTAMPDIFF(MICROSECOND, `started_at`, UTC_TIMESTAMP(6)) DIV 1000 AS `started_ms_ago` ' +
          'FROM `tablequeue_brokers` ORDER BY `started_at`, `broker_id`',
        params: [],
      });
    }
  });
});

describe('sqlite heartbeat', () => {
  it('creates the table with text times', () => {
    expect(sqlite.createTable(plain)).toBe(
      [
        'CREATE TABLE IF NOT EXISTS `tablequeue_brokers` (',
        '  `broker_id` text NOT NULL PRIMARY KEY,',
        '  `host` text NOT NULL,',
        '  `pid` integer NOT NULL,',
        '  `started_at` text NOT NULL,',
        '  `last_seen_at` text NOT NULL,',
        '  `interval_ms` integer NOT NULL,',
        '  `subscriptions` text NOT NULL',
        ')',
      ].join('\n'),
    );
  });

  it('beats with ON CONFLICT DO UPDATE and the fixed-width clock text', () => {
    expect(sqlite.beat(plain)).toEqual({
      name: 'heartbeat.beat',
      sql:
        'INSERT INTO `tablequeue_brokers` (`broker_id`, `host`, `pid`, `started_at`, `last_seen_at`, `interval_ms`, `subscriptions`) ' +
        "VALUES (?, ?, ?, strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now'), strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now'), ?, ?) " +
        'ON CONFLICT (`broker_id`) DO UPDATE SET `last_seen_at` = excluded.`last_seen_at`, ' +
        '`interval_ms` = excluded.`interval_ms`, `subscriptions` = excluded.`subscriptions`',
      params: ['column:broker_id', 'column:host', 'column:pid', 'column:interval_ms', 'column:subscriptions'],
    });
  });

  it('removes one broker and lists ages with julianday', () => {
    expect(sqlite.remove(plain)).toEqual({
      name: 'heartbeat.remove',
      sql: 'DELETE FROM `tablequeue_brokers` WHERE `broker_id` = ?',
      params: ['column:broker_id'],
    });
    expect(sqlite.list(plain)).toEqual({
      name: 'heartbeat.list',
      sql:
        'SELECT `broker_id`, `host`, `pid`, `interval_ms`, `subscriptions`, ' +
        "CAST((julianday('now') - julianday(`last_seen_at`)) * 86400000 AS integer) AS `seen_ms_ago`, " +
        "CAST((julianday('now') - julianday(`started_at`)) * 86400000 AS integer) AS `started_ms_ago` " +
        'FROM `tablequeue_brokers` ORDER BY `started_at`, `broker_id`',
      params: [],
    });
  });
});

describe('heartbeat table names', () => {
  it('parses name and schema.name', () => {
    expect(parseHeartbeatTable('brokers', 'sqlite')).toEqual({ schema: undefined, name: 'brokers' });
    expect(parseHeartbeatTable('ops.brokers', 'mysql')).toEqual({ schema: 'ops', name: 'brokers' });
  });

  it('refuses names that are not plain identifiers', () => {
    expect(() => parseHeartbeatTable('brokers; drop table jobs', 'postgres')).toThrow(DeclarationError);
    expect(() => parseHeartbeatTable('a.b.c', 'sqlite')).toThrow('must be "table" or "schema.table"');
  });

  it('refuses a name over 63 bytes on PostgreSQL only', () => {
    const long = 'b'.repeat(64);
    expect(() => parseHeartbeatTable(long, 'postgres')).toThrow('64 bytes long');
    expect(parseHeartbeatTable(long, 'mysql').name).toBe(long);
  });
});
