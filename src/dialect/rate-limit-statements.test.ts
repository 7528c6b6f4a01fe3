import { describe, expect, it } from 'vitest';
import { createRateLimitStatements, parseRateLimitsTable } from './rate-limit-statements.js';

const TABLE = parseRateLimitsTable('tablequeue_rate_limits', 'postgres');

describe('postgres rate limit statements', () => {
  const statements = createRateLimitStatements('postgres');

  it('creates the slots table keyed by queue table, queue name and slot', () => {
    expect(statements.createTable(TABLE)).toBe("CREATE TABLE IF NOT EXISTS \"tablequeue_rate_limits\" (\n  \"queue_table\" text NOT NULL,\n  \"queue_name\" text NOT NULL,\n  \"slot\" integer NOT NULL,\n  \"used_at_ms\" bigint NOT NULL,\n  PRIMARY KEY (\"queue_table\", \"queue_name\", \"slot\")\n)");
  });

  it('adds the missing slots of the queue up to the limit, never used', () => {
    expect(statements.addSlots(TABLE)).toEqual({
      "name": "rate.addSlots",
      "sql": "INSERT INTO \"tablequeue_rate_limits\" (\"queue_table\", \"queue_name\", \"slot\", \"used_at_ms\") SELECT $1::text, $2::text, tablequeue_slot, 0 FROM generate_series(1, $3::integer) AS tablequeue_slot ON CONFLICT DO NOTHING",
      "params": [
        "column:queue_table",
        "column:queue_name",
        "slots"
      ]
    });
  });

  it('guards the claims of a queue with the row lock of its slot 1', () => {
    expect(statements.guard(TABLE)).toEqual({
      "name": "rate.guard",
      "sql": "SELECT \"slot\" FROM \"tablequeue_rate_limits\" WHERE \"queue_table\" = $1 AND \"queue_name\" = $2 AND \"slot\" = 1 FOR UPDATE",
      "params": [
        "column:queue_table",
        "column:queue_name"
      ]
    });
  });

  it('counts the free slots within the limit and reads the oldest use', () => {
    expect(statements.free(TABLE)).toEqual({
      "name": "rate.free",
      "sql": "SELECT COUNT(CASE WHEN \"used_at_ms\" <= $1 THEN 1 END) AS \"free_slots\", MIN(\"used_at_ms\") AS \"oldest_use_ms\" FROM \"tablequeue_rate_limits\" WHERE \"queue_table\" = $2 AND \"queue_name\" = $3 AND \"slot\" <= $4",
      "params": [
        "freeSince",
        "column:queue_table",
        "column:queue_name",
        "slots"
      ]
    });
  });

  it('stamps the taken free slots used longest ago', () => {
    expect(statements.use(TABLE)).toEqual({
      "name": "rate.use",
      "sql": "UPDATE \"tablequeue_rate_limits\" SET \"used_at_ms\" = $1 WHERE \"queue_table\" = $2 AND \"queue_name\" = $3 AND \"slot\" IN (SELECT \"slot\" FROM \"tablequeue_rate_limits\" WHERE \"queue_table\" = $4 AND \"queue_name\" = $5 AND \"slot\" <= $6 AND \"used_at_ms\" <= $7 ORDER BY \"used_at_ms\", \"slot\" LIMIT $8)",
      "params": [
        "usedAt",
        "column:queue_table",
        "column:queue_name",
        "column:queue_table",
        "column:queue_name",
        "slots",
        "freeSince",
        "taken"
      ]
    });
  });
});

describe('mysql rate limit statements', () => {
  const statements = createRateLimitStatements('mysql');

  it('creates the slots table keyed by queue table, queue name and slot', () => {
    expect(statements.createTable(TABLE)).toBe("CREATE TABLE IF NOT EXISTS `tablequeue_rate_limits` (\n  `queue_table` varbinary(1020) NOT NULL,\n  `queue_name` varbinary(1020) NOT NULL,\n  `slot` integer NOT NULL,\n  `used_at_ms` bigint NOT NULL,\n  PRIMARY KEY (`queue_table`, `queue_name`, `slot`)\n)");
  });

  it('adds the missing slots of the queue up to the limit, never used', () => {
    expect(statements.addSlots(TABLE)).toEqual({
      "name": "rate.addSlots",
      "sql": "INSERT INTO `tablequeue_rate_limits` (`queue_table`, `queue_name`, `slot`, `used_at_ms`) WITH RECURSIVE tablequeue_slots (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM tablequeue_slots WHERE n < ?) SELECT ?, ?, n, 0 FROM tablequeue_slots ON DUPLICATE KEY UPDATE `slot` = `slot`",
      "params": [
        "slots",
        "column:queue_table",
        "column:queue_name"
      ]
    });
  });

  it('guards the claims of a queue with the row lock of its slot 1', () => {
    expect(statements.guard(TABLE)).toEqual({
      "name": "rate.guard",
      "sql": "SELECT `slot` FROM `tablequeue_rate_limits` WHERE `queue_table` = ? AND `queue_name` = ? AND `slot` = 1 FOR UPDATE",
      "params": [
        "column:queue_table",
        "column:queue_name"
      ]
    });
  });

  it('counts the free slots within the limit and reads the oldest use', () => {
    expect(statements.free(TABLE)).toEqual({
      "name": "rate.free",
      "sql": "SELECT COUNT(CASE WHEN `used_at_ms` <= ? THEN 1 END) AS `free_slots`, MIN(`used_at_ms`) AS `oldest_use_ms` FROM `tablequeue_rate_limits` WHERE `queue_table` = ? AND `queue_name` = ? AND `slot` <= ?",
      "params": [
        "freeSince",
        "column:queue_table",
        "column:queue_name",
        "slots"
      ]
    });
  });

  it('stamps the taken free slots used longest ago', () => {
    expect(statements.use(TABLE)).toEqual({
      "name": "rate.use",
      "sql": "UPDATE `tablequeue_rate_limits` SET `used_at_ms` = ? WHERE `queue_table` = ? AND `queue_name` = ? AND `slot` <= ? AND `used_at_ms` <= ? ORDER BY `used_at_ms`, `slot` LIMIT ?",
      "params": [
        "usedAt",
        "column:queue_table",
        "column:queue_name",
        "slots",
        "freeSince",
        "taken"
      ]
    });
  });
});

describe('mariadb rate limit statements', () => {
  const statements = createRateLimitStatements('mariadb');

  it('creates the slots table keyed by queue table, queue name and slot', () => {
    expect(statements.createTable(TABLE)).toBe("CREATE TABLE IF NOT EXISTS `tablequeue_rate_limits` (\n  `queue_table` varbinary(1020) NOT NULL,\n  `queue_name` varbinary(1020) NOT NULL,\n  `slot` integer NOT NULL,\n  `used_at_ms` bigint NOT NULL,\n  PRIMARY KEY (`queue_table`, `queue_name`, `slot`)\n)");
  });

  it('adds the missing slots of the queue up to the limit, never used', () => {
    expect(statements.addSlots(TABLE)).toEqual({
      "name": "rate.addSlots",
      "sql": "INSERT INTO `tablequeue_rate_limits` (`queue_table`, `queue_name`, `slot`, `used_at_ms`) WITH RECURSIVE tablequeue_slots (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM tablequeue_slots WHERE n < ?) SELECT ?, ?, n, 0 FROM tablequeue_slots ON DUPLICATE KEY UPDATE `slot` = `slot`",
      "params": [
        "slots",
        "column:queue_table",
        "column:queue_name"
      ]
    });
  });

  it('guards the claims of a queue with the row lock of its slot 1', () => {
    expect(statements.guard(TABLE)).toEqual({
      "name": "rate.guard",
      "sql": "SELECT `slot` FROM `tablequeue_rate_limits` WHERE `queue_table` = ? AND `queue_name` = ? AND `slot` = 1 FOR UPDATE",
      "params": [
        "column:queue_table",
        "column:queue_name"
      ]
    });
  });

  it('counts the free slots within the limit and reads the oldest use', () => {
    expect(statements.free(TABLE)).toEqual({
      "name": "rate.free",
      "sql": "SELECT COUNT(CASE WHEN `used_at_ms` <= ? THEN 1 END) AS `free_slots`, MIN(`used_at_ms`) AS `oldest_use_ms` FROM `tablequeue_rate_limits` WHERE `queue_table` = ? AND `queue_name` = ? AND `slot` <= ?",
      "params": [
        "freeSince",
        "column:queue_table",
        "column:queue_name",
        "slots"
      ]
    });
  });

  it('stamps the taken free slots used longest ago', () => {
    expect(statements.use(TABLE)).toEqual({
      "name": "rate.use",
      "sql": "UPDATE `tablequeue_rate_limits` SET `used_at_ms` = ? WHERE `queue_table` = ? AND `queue_name` = ? AND `slot` <= ? AND `used_at_ms` <= ? ORDER BY `used_at_ms`, `slot` LIMIT ?",
      "params": [
        "usedAt",
        "column:queue_table",
        "column:queue_name",
        "slots",
        "freeSince",
        "taken"
      ]
    });
  });
});

describe('sqlite rate limit statements', () => {
  const statements = createRateLimitStatements('sqlite');

  it('creates the slots table keyed by queue table, queue name and slot', () => {
    expect(statements.createTable(TABLE)).toBe("CREATE TABLE IF NOT EXISTS `tablequeue_rate_limits` (\n  `queue_table` text NOT NULL,\n  `queue_name` text NOT NULL,\n  `slot` integer NOT NULL,\n  `used_at_ms` bigint NOT NULL,\n  PRIMARY KEY (`queue_table`, `queue_name`, `slot`)\n)");
  });

  it('adds the missing slots of the queue up to the limit, never used', () => {
    expect(statements.addSlots(TABLE)).toEqual({
      "name": "rate.addSlots",
      "sql": "WITH RECURSIVE tablequeue_slots (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM tablequeue_slots WHERE n < ?) INSERT INTO `tablequeue_rate_limits` (`queue_table`, `queue_name`, `slot`, `used_at_ms`) SELECT ?, ?, n, 0 FROM tablequeue_slots WHERE true ON CONFLICT DO NOTHING",
      "params": [
        "slots",
        "column:queue_table",
        "column:queue_name"
      ]
    });
  });

  it('needs no guard statement: BEGIN IMMEDIATE is the guard', () => {
    expect(statements.guard(TABLE)).toBeUndefined();
  });

  it('counts the free slots within the limit and reads the oldest use', () => {
    expect(statements.free(TABLE)).toEqual({
      "name": "rate.free",
      "sql": "SELECT COUNT(CASE WHEN `used_at_ms` <= ? THEN 1 END) AS `free_slots`, MIN(`used_at_ms`) AS `oldest_use_ms` FROM `tablequeue_rate_limits` WHERE `queue_table` = ? AND `queue_name` = ? AND `slot` <= ?",
      "params": [
        "freeSince",
        "column:queue_table",
        "column:queue_name",
        "slots"
      ]
    });
  });

  it('stamps the taken free slots used longest ago', () => {
    expect(statements.use(TABLE)).toEqual({
      "name": "rate.use",
      "sql": "UPDATE `tablequeue_rate_limits` SET `used_at_ms` = ? WHERE `queue_table` = ? AND `queue_name` = ? AND `slot` IN (SELECT `slot` FROM `tablequeue_rate_limits` WHERE `queue_table` = ? AND `queue_name` = ? AND `slot` <= ? AND `used_at_ms` <= ? ORDER BY `used_at_ms`, `slot` LIMIT ?)",
      "params": [
        "usedAt",
        "column:queue_table",
        "column:queue_name",
        "column:queue_table",
        "column:queue_name",
        "slots",
        "freeSince",
        "taken"
      ]
    });
  });
});

describe('rate limits table names', () => {
  it('refuses a Postgres name that is not a plain identifier', () => {
    expect(() => parseRateLimitsTable('rates; DROP', 'postgres')).toThrow(/rate limits table/);
  });
});
