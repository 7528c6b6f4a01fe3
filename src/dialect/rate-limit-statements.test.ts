import { describe, expect, it } from 'vitest';
import { createDialect } from './create-dialect.js';
import { createRateLimitStatements, parseRateLimitsTable } from './rate-limit-statements.js';
import { everyRoleLeaseTable } from './test-tables.fixture.js';

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

describe('postgres rate limit statements: reservations and rates per key', () => {
  const statements = createRateLimitStatements('postgres');

  it('frees the unused slots a reservation stamped', () => {
    expect(statements.release(TABLE)).toEqual({
        "name": "rate.release",
        "sql": "UPDATE \"tablequeue_rate_limits\" SET \"used_at_ms\" = 0 WHERE \"queue_table\" = $1 AND \"queue_name\" = $2 AND \"slot\" IN (SELECT \"slot\" FROM \"tablequeue_rate_limits\" WHERE \"queue_table\" = $3 AND \"queue_name\" = $4 AND \"slot\" <= $5 AND \"used_at_ms\" = $6 LIMIT $7)",
        "params": [
          "column:queue_table",
          "column:queue_name",
          "column:queue_table",
          "column:queue_name",
          "slots",
          "usedAt",
          "unused"
        ]
      });
  });

  it('creates the uses table of rates per key, keyed so that the window is one range', () => {
    expect(statements.byKey.createTable(TABLE)).toBe("CREATE TABLE IF NOT EXISTS \"tablequeue_rate_limits_by_key\" (\n  \"queue_table\" text NOT NULL,\n  \"queue_name\" text NOT NULL,\n  \"used_at_ms\" bigint NOT NULL,\n  \"rate_key\" text NOT NULL,\n  \"uses\" integer NOT NULL,\n  PRIMARY KEY (\"queue_table\", \"queue_name\", \"used_at_ms\", \"rate_key\")\n)");
  });

  it('records the rows of a key taken at a millisecond, adding to that millisecond', () => {
    expect(statements.byKey.record(TABLE)).toEqual({
        "name": "rate.recordKeyUse",
        "sql": "INSERT INTO \"tablequeue_rate_limits_by_key\" (\"queue_table\", \"queue_name\", \"rate_key\", \"used_at_ms\", \"uses\") VALUES ($1, $2, $3, $4, $5) ON CONFLICT (\"queue_table\", \"queue_name\", \"used_at_ms\", \"rate_key\") DO UPDATE SET \"uses\" = \"tablequeue_rate_limits_by_key\".\"uses\" + excluded.\"uses\"",
        "params": [
          "column:queue_table",
          "column:queue_name",
          "rateKey",
          "usedAt",
          "uses"
        ]
      });
  });

  it('forgets the uses past the window', () => {
    expect(statements.byKey.forget(TABLE)).toEqual({
        "name": "rate.forgetKeyUses",
        "sql": "DELETE FROM \"tablequeue_rate_limits_by_key\" WHERE \"queue_table\" = $1 AND \"queue_name\" = $2 AND \"used_at_ms\" <= $3",
        "params": [
          "column:queue_table",
          "column:queue_name",
          "freeSince"
        ]
      });
  });

  it('reads the oldest use within the window', () => {
    expect(statements.byKey.oldest(TABLE)).toEqual({
        "name": "rate.oldestKeyUse",
        "sql": "SELECT MIN(\"used_at_ms\") AS \"oldest_use_ms\" FROM \"tablequeue_rate_limits_by_key\" WHERE \"queue_table\" = $1 AND \"queue_name\" = $2 AND \"used_at_ms\" > $3",
        "params": [
          "column:queue_table",
          "column:queue_name",
          "freeSince"
        ]
      });
  });

  it('claims only rows whose key has room in the rate window, ranked among the first :window claimable rows with a key', () => {
    const claim = createDialect('postgres').lease.claim(everyRoleLeaseTable.spec, everyRoleLeaseTable.columns, { rateByKey: TABLE });
    expect(claim.kind === 'single' ? claim.statement : claim.select).toEqual({
        "name": "lease.claim",
        "sql": "WITH tablequeue_claimed AS (SELECT \"job_id\", \"queue\", \"priority\", \"customer\", \"retry_after\", \"attempt\", \"processed_at\", \"locked_until\", \"meta\", \"payload\" FROM \"email_jobs\" WHERE \"queue\" = $1 AND \"retry_after\" <= $2 AND \"processed_at\" IS NULL AND (\"locked_until\" IS NULL OR \"locked_until\" <= $3) AND (\"customer\" IS NULL OR \"job_id\" IN (SELECT tablequeue_ranked.\"job_id\" FROM (SELECT \"job_id\", \"customer\", ROW_NUMBER() OVER (PARTITION BY \"customer\" ORDER BY \"priority\", \"retry_after\", \"job_id\") AS tablequeue_rank FROM (SELECT \"job_id\", \"customer\", \"priority\", \"retry_after\" FROM \"email_jobs\" WHERE \"queue\" = $4 AND \"retry_after\" <= $5 AND \"processed_at\" IS NULL AND (\"locked_until\" IS NULL OR \"locked_until\" <= $6) AND \"customer\" IS NOT NULL ORDER BY \"priority\", \"retry_after\", \"job_id\" LIMIT $7) AS tablequeue_window) AS tablequeue_ranked LEFT JOIN (SELECT \"rate_key\", SUM(\"uses\") AS tablequeue_count FROM \"tablequeue_rate_limits_by_key\" WHERE \"queue_table\" = $8 AND \"queue_name\" = $9 AND \"used_at_ms\" > $10 GROUP BY \"rate_key\") AS tablequeue_used ON tablequeue_used.\"rate_key\" = tablequeue_ranked.\"customer\" WHERE tablequeue_ranked.tablequeue_rank + COALESCE(tablequeue_used.tablequeue_count, 0) <= $11)) ORDER BY \"priority\", \"retry_after\", \"job_id\" LIMIT $12 FOR UPDATE SKIP LOCKED), tablequeue_stamp AS (UPDATE \"email_jobs\" SET \"locked_until\" = $13, \"attempt\" = \"attempt\" + 1 WHERE \"job_id\" = ANY(ARRAY(SELECT tablequeue_claimed.\"job_id\" FROM tablequeue_claimed))) SELECT \"job_id\", \"queue\", \"priority\", \"customer\", \"retry_after\", \"attempt\", \"processed_at\", \"locked_until\", \"meta\", \"payload\" FROM tablequeue_claimed ORDER BY \"priority\", \"retry_after\", \"job_id\"",
        "params": [
          "group",
          "now",
          "leaseNow",
          "group",
          "now",
          "leaseNow",
          "window",
          "column:queue_table",
          "column:queue_name",
          "rateFreeSince",
          "rateLimit",
          "limit",
          "lockedUntil"
        ]
      });
  });
});

describe('mysql rate limit statements: reservations and rates per key', () => {
  const statements = createRateLimitStatements('mysql');

  it('frees the unused slots a reservation stamped', () => {
    expect(statements.release(TABLE)).toEqual({
        "name": "rate.release",
        "sql": "UPDATE `tablequeue_rate_limits` SET `used_at_ms` = 0 WHERE `queue_table` = ? AND `queue_name` = ? AND `slot` <= ? AND `used_at_ms` = ? LIMIT ?",
        "params": [
          "column:queue_table",
          "column:queue_name",
          "slots",
          "usedAt",
          "unused"
        ]
      });
  });

  it('creates the uses table of rates per key, keyed so that the window is one range', () => {
    expect(statements.byKey.createTable(TABLE)).toBe("CREATE TABLE IF NOT EXISTS `tablequeue_rate_limits_by_key` (\n  `queue_table` varbinary(1020) NOT NULL,\n  `queue_name` varbinary(1020) NOT NULL,\n  `used_at_ms` bigint NOT NULL,\n  `rate_key` varbinary(1020) NOT NULL,\n  `uses` integer NOT NULL,\n  PRIMARY KEY (`queue_table`, `queue_name`, `used_at_ms`, `rate_key`)\n)");
  });

  it('records the rows of a key taken at a millisecond, adding to that millisecond', () => {
    expect(statements.byKey.record(TABLE)).toEqual({
        "name": "rate.recordKeyUse",
        "sql": "INSERT INTO `tablequeue_rate_limits_by_key` (`queue_table`, `queue_name`, `rate_key`, `used_at_ms`, `uses`) VALUES (?, ?, ?, ?, ?) ON DUPLICATE KEY UPDATE `uses` = `uses` + ?",
        "params": [
          "column:queue_table",
          "column:queue_name",
          "rateKey",
          "usedAt",
          "uses",
          "uses"
        ]
      });
  });

  it('forgets the uses past the window', () => {
    expect(statements.byKey.forget(TABLE)).toEqual({
        "name": "rate.forgetKeyUses",
        "sql": "DELETE FROM `tablequeue_rate_limits_by_key` WHERE `queue_table` = ? AND `queue_name` = ? AND `used_at_ms` <= ?",
        "params": [
          "column:queue_table",
          "column:queue_name",
          "freeSince"
        ]
      });
  });

  it('reads the oldest use within the window', () => {
    expect(statements.byKey.oldest(TABLE)).toEqual({
        "name": "rate.oldestKeyUse",
        "sql": "SELECT MIN(`used_at_ms`) AS `oldest_use_ms` FROM `tablequeue_rate_limits_by_key` WHERE `queue_table` = ? AND `queue_name` = ? AND `used_at_ms` > ?",
        "params": [
          "column:queue_table",
          "column:queue_name",
          "freeSince"
        ]
      });
  });

  it('claims only rows whose key has room in the rate window, ranked among the first :window claimable rows with a key', () => {
    const claim = createDialect('mysql').lease.claim(everyRoleLeaseTable.spec, everyRoleLeaseTable.columns, { rateByKey: TABLE });
    expect(claim.kind === 'single' ? claim.statement : claim.select).toEqual({
        "name": "lease.claim",
        "sql": "SELECT `job_id`, `queue`, `priority`, `customer`, `retry_after`, `attempt`, `processed_at`, `locked_until`, `meta`, `payload` FROM `email_jobs` WHERE `queue` = ? AND `retry_after` <= ? AND `processed_at` IS NULL AND (`locked_until` IS NULL OR `locked_until` <= ?) AND (`customer` IS NULL OR `job_id` IN (SELECT tablequeue_ranked.`job_id` FROM (SELECT `job_id`, `customer`, ROW_NUMBER() OVER (PARTITION BY `customer` ORDER BY `priority`, `retry_after`, `job_id`) AS tablequeue_rank FROM (SELECT `job_id`, `customer`, `priority`, `retry_after` FROM `email_jobs` WHERE `queue` = ? AND `retry_after` <= ? AND `processed_at` IS NULL AND (`locked_until` IS NULL OR `locked_until` <= ?) AND `customer` IS NOT NULL ORDER BY `priority`, `retry_after`, `job_id` LIMIT ?) AS tablequeue_window) AS tablequeue_ranked LEFT JOIN (SELECT `rate_key`, SUM(`uses`) AS tablequeue_count FROM `tablequeue_rate_limits_by_key` WHERE `queue_table` = ? AND `queue_name` = ? AND `used_at_ms` > ? GROUP BY `rate_key`) AS tablequeue_used ON tablequeue_used.`rate_key` = tablequeue_ranked.`customer` WHERE tablequeue_ranked.tablequeue_rank + COALESCE(tablequeue_used.tablequeue_count, 0) <= ?)) ORDER BY `priority`, `retry_after`, `job_id` LIMIT ? FOR UPDATE SKIP LOCKED",
        "params": [
          "group",
          "now",
          "leaseNow",
          "group",
          "now",
          "leaseNow",
          "window",
          "column:queue_table",
          "column:queue_name",
          "rateFreeSince",
          "rateLimit",
          "limit"
        ]
      });
  });
});

describe('mariadb rate limit statements: reservations and rates per key', () => {
  const statements = createRateLimitStatements('mariadb');

  it('frees the unused slots a reservation stamped', () => {
    expect(statements.release(TABLE)).toEqual({
        "name": "rate.release",
        "sql": "UPDATE `tablequeue_rate_limits` SET `used_at_ms` = 0 WHERE `queue_table` = ? AND `queue_name` = ? AND `slot` <= ? AND `used_at_ms` = ? LIMIT ?",
        "params": [
          "column:queue_table",
          "column:queue_name",
          "slots",
          "usedAt",
          "unused"
        ]
      });
  });

  it('creates the uses table of rates per key, keyed so that the window is one range', () => {
    expect(statements.byKey.createTable(TABLE)).toBe("CREATE TABLE IF NOT EXISTS `tablequeue_rate_limits_by_key` (\n  `queue_table` varbinary(1020) NOT NULL,\n  `queue_name` varbinary(1020) NOT NULL,\n  `used_at_ms` bigint NOT NULL,\n  `rate_key` varbinary(1020) NOT NULL,\n  `uses` integer NOT NULL,\n  PRIMARY KEY (`queue_table`, `queue_name`, `used_at_ms`, `rate_key`)\n)");
  });

  it('records the rows of a key taken at a millisecond, adding to that millisecond', () => {
    expect(statements.byKey.record(TABLE)).toEqual({
        "name": "rate.recordKeyUse",
        "sql": "INSERT INTO `tablequeue_rate_limits_by_key` (`queue_table`, `queue_name`, `rate_key`, `used_at_ms`, `uses`) VALUES (?, ?, ?, ?, ?) ON DUPLICATE KEY UPDATE `uses` = `uses` + ?",
        "params": [
          "column:queue_table",
          "column:queue_name",
          "rateKey",
          "usedAt",
          "uses",
          "uses"
        ]
      });
  });

  it('forgets the uses past the window', () => {
    expect(statements.byKey.forget(TABLE)).toEqual({
        "name": "rate.forgetKeyUses",
        "sql": "DELETE FROM `tablequeue_rate_limits_by_key` WHERE `queue_table` = ? AND `queue_name` = ? AND `used_at_ms` <= ?",
        "params": [
          "column:queue_table",
          "column:queue_name",
          "freeSince"
        ]
      });
  });

  it('reads the oldest use within the window', () => {
    expect(statements.byKey.oldest(TABLE)).toEqual({
        "name": "rate.oldestKeyUse",
        "sql": "SELECT MIN(`used_at_ms`) AS `oldest_use_ms` FROM `tablequeue_rate_limits_by_key` WHERE `queue_table` = ? AND `queue_name` = ? AND `used_at_ms` > ?",
        "params": [
          "column:queue_table",
          "column:queue_name",
          "freeSince"
        ]
      });
  });

  it('claims only rows whose key has room in the rate window, ranked among the first :window claimable rows with a key', () => {
    const claim = createDialect('mariadb').lease.claim(everyRoleLeaseTable.spec, everyRoleLeaseTable.columns, { rateByKey: TABLE });
    expect(claim.kind === 'single' ? claim.statement : claim.select).toEqual({
        "name": "lease.claim",
        "sql": "SELECT `job_id`, `queue`, `priority`, `customer`, `retry_after`, `attempt`, `processed_at`, `locked_until`, `meta`, `payload` FROM `email_jobs` WHERE `queue` = ? AND `retry_after` <= ? AND `processed_at` IS NULL AND (`locked_until` IS NULL OR `locked_until` <= ?) AND (`customer` IS NULL OR `job_id` IN (SELECT tablequeue_ranked.`job_id` FROM (SELECT `job_id`, `customer`, ROW_NUMBER() OVER (PARTITION BY `customer` ORDER BY `priority`, `retry_after`, `job_id`) AS tablequeue_rank FROM (SELECT `job_id`, `customer`, `priority`, `retry_after` FROM `email_jobs` WHERE `queue` = ? AND `retry_after` <= ? AND `processed_at` IS NULL AND (`locked_until` IS NULL OR `locked_until` <= ?) AND `customer` IS NOT NULL ORDER BY `priority`, `retry_after`, `job_id` LIMIT ?) AS tablequeue_window) AS tablequeue_ranked LEFT JOIN (SELECT `rate_key`, SUM(`uses`) AS tablequeue_count FROM `tablequeue_rate_limits_by_key` WHERE `queue_table` = ? AND `queue_name` = ? AND `used_at_ms` > ? GROUP BY `rate_key`) AS tablequeue_used ON tablequeue_used.`rate_key` = tablequeue_ranked.`customer` WHERE tablequeue_ranked.tablequeue_rank + COALESCE(tablequeue_used.tablequeue_count, 0) <= ?)) ORDER BY `priority`, `retry_after`, `job_id` LIMIT ? FOR UPDATE SKIP LOCKED",
        "params": [
          "group",
          "now",
          "leaseNow",
          "group",
          "now",
          "leaseNow",
          "window",
          "column:queue_table",
          "column:queue_name",
          "rateFreeSince",
          "rateLimit",
          "limit"
        ]
      });
  });
});

describe('sqlite rate limit statements: reservations and rates per key', () => {
  const statements = createRateLimitStatements('sqlite');

  it('frees the unused slots a reservation stamped', () => {
    expect(statements.release(TABLE)).toEqual({
        "name": "rate.release",
        "sql": "UPDATE `tablequeue_rate_limits` SET `used_at_ms` = 0 WHERE `queue_table` = ? AND `queue_name` = ? AND `slot` IN (SELECT `slot` FROM `tablequeue_rate_limits` WHERE `queue_table` = ? AND `queue_name` = ? AND `slot` <= ? AND `used_at_ms` = ? LIMIT ?)",
        "params": [
          "column:queue_table",
          "column:queue_name",
          "column:queue_table",
          "column:queue_name",
          "slots",
          "usedAt",
          "unused"
        ]
      });
  });

  it('creates the uses table of rates per key, keyed so that the window is one range', () => {
    expect(statements.byKey.createTable(TABLE)).toBe("CREATE TABLE IF NOT EXISTS `tablequeue_rate_limits_by_key` (\n  `queue_table` text NOT NULL,\n  `queue_name` text NOT NULL,\n  `used_at_ms` bigint NOT NULL,\n  `rate_key` text NOT NULL,\n  `uses` integer NOT NULL,\n  PRIMARY KEY (`queue_table`, `queue_name`, `used_at_ms`, `rate_key`)\n)");
  });

  it('records the rows of a key taken at a millisecond, adding to that millisecond', () => {
    expect(statements.byKey.record(TABLE)).toEqual({
        "name": "rate.recordKeyUse",
        "sql": "INSERT INTO `tablequeue_rate_limits_by_key` (`queue_table`, `queue_name`, `rate_key`, `used_at_ms`, `uses`) VALUES (?, ?, ?, ?, ?) ON CONFLICT (`queue_table`, `queue_name`, `used_at_ms`, `rate_key`) DO UPDATE SET `uses` = `tablequeue_rate_limits_by_key`.`uses` + excluded.`uses`",
        "params": [
          "column:queue_table",
          "column:queue_name",
          "rateKey",
          "usedAt",
          "uses"
        ]
      });
  });

  it('forgets the uses past the window', () => {
    expect(statements.byKey.forget(TABLE)).toEqual({
        "name": "rate.forgetKeyUses",
        "sql": "DELETE FROM `tablequeue_rate_limits_by_key` WHERE `queue_table` = ? AND `queue_name` = ? AND `used_at_ms` <= ?",
        "params": [
          "column:queue_table",
          "column:queue_name",
          "freeSince"
        ]
      });
  });

  it('reads the oldest use within the window', () => {
    expect(statements.byKey.oldest(TABLE)).toEqual({
        "name": "rate.oldestKeyUse",
        "sql": "SELECT MIN(`used_at_ms`) AS `oldest_use_ms` FROM `tablequeue_rate_limits_by_key` WHERE `queue_table` = ? AND `queue_name` = ? AND `used_at_ms` > ?",
        "params": [
          "column:queue_table",
          "column:queue_name",
          "freeSince"
        ]
      });
  });

  it('claims only rows whose key has room in the rate window, ranked among the first :window claimable rows with a key', () => {
    const claim = createDialect('sqlite').lease.claim(everyRoleLeaseTable.spec, everyRoleLeaseTable.columns, { rateByKey: TABLE });
    expect(claim.kind === 'single' ? claim.statement : claim.select).toEqual({
        "name": "lease.claim",
        "sql": "UPDATE `email_jobs` SET `locked_until` = ?, `attempt` = `attempt` + 1 WHERE `job_id` IN (SELECT `job_id` FROM `email_jobs` WHERE `queue` = ? AND `retry_after` <= ? AND `processed_at` IS NULL AND (`locked_until` IS NULL OR `locked_until` <= ?) AND (`customer` IS NULL OR `job_id` IN (SELECT tablequeue_ranked.`job_id` FROM (SELECT `job_id`, `customer`, ROW_NUMBER() OVER (PARTITION BY `customer` ORDER BY `priority`, `retry_after`, `job_id`) AS tablequeue_rank FROM (SELECT `job_id`, `customer`, `priority`, `retry_after` FROM `email_jobs` WHERE `queue` = ? AND `retry_after` <= ? AND `processed_at` IS NULL AND (`locked_until` IS NULL OR `locked_until` <= ?) AND `customer` IS NOT NULL ORDER BY `priority`, `retry_after`, `job_id` LIMIT ?) AS tablequeue_window) AS tablequeue_ranked LEFT JOIN (SELECT `rate_key`, SUM(`uses`) AS tablequeue_count FROM `tablequeue_rate_limits_by_key` WHERE `queue_table` = ? AND `queue_name` = ? AND `used_at_ms` > ? GROUP BY `rate_key`) AS tablequeue_used ON tablequeue_used.`rate_key` = tablequeue_ranked.`customer` WHERE tablequeue_ranked.tablequeue_rank + COALESCE(tablequeue_used.tablequeue_count, 0) <= ?)) ORDER BY `priority`, `retry_after`, `job_id` LIMIT ?) RETURNING `job_id`, `queue`, `priority`, `customer`, `retry_after`, `attempt`, `processed_at`, `locked_until`, `meta`, `payload`",
        "params": [
          "lockedUntil",
          "group",
          "now",
          "leaseNow",
          "group",
          "now",
          "leaseNow",
          "window",
          "column:queue_table",
          "column:queue_name",
          "rateFreeSince",
          "rateLimit",
          "limit"
        ]
      });
  });
});


describe('rate limits table names', () => {
  it('refuses a Postgres name that is not a plain identifier', () => {
    expect(() => parseRateLimitsTable('rates; DROP', 'postgres')).toThrow(/rate limits table/);
  });

  it('refuses a name too long to take "_by_key" after it, naming why', () => {
    expect(() => parseRateLimitsTable('r'.repeat(60), 'postgres')).toThrow(/_by_key/);
    expect(() => parseRateLimitsTable('r'.repeat(60), 'mysql')).toThrow(/_by_key/);
  });
});
