import { describe, expect, it } from 'vitest';
import { createConcurrencyStatements, KEY_SLOTS_PER_DELETE } from './concurrency-statements.js';
import { createDialect } from './create-dialect.js';
import type { Statement } from '../statement.js';
import {
  everyRoleLeaseTable,
  everyRoleTable,
  minimalLeaseTable,
  minimalTable,
  schemaQualifiedTable,
} from './test-tables.fixture.js';

/** The claim's statement under `perKey`: the single statement, or MySQL's locking select. */
function perKeyClaim(database: 'postgres' | 'mysql' | 'mariadb' | 'sqlite'): Statement {
  const claim = createDialect(database).lease.claim(everyRoleLeaseTable.spec, everyRoleLeaseTable.columns, { perKey: true });
  return claim.kind === 'single' ? claim.statement : claim.select;
}

describe('postgres concurrency limits', () => {
  const statements = createConcurrencyStatements(createDialect('postgres').name);

  it('guards a queue with a transaction-scoped advisory lock on the table and group', () => {
    expect(statements.guard(everyRoleLeaseTable.spec)).toEqual({
      name: 'concurrency.guard',
      sql: "SELECT pg_advisory_xact_lock(hashtextextended('concurrency:email_jobs' || ':' || $1::text, 0))",
      params: ['group'],
    });
    expect(statements.guard(minimalLeaseTable.spec)).toEqual({
      name: 'concurrency.guard',
      sql: "SELECT pg_advisory_xact_lock(hashtextextended('concurrency:jobs', 0))",
      params: [],
    });
    expect(statements.guard(schemaQualifiedTable.spec)).toEqual({
      name: 'concurrency.guard',
      sql: "SELECT pg_advisory_xact_lock(hashtextextended('concurrency:app.jobs' || ':' || $1::text, 0))",
      params: ['group'],
    });
    expect(statements.createGuardTable(everyRoleLeaseTable.spec)).toBeUndefined();
  });

  it('counts the queue\'s rows with a live lease', () => {
    expect(statements.inWork(everyRoleLeaseTable.spec)).toEqual({
      name: 'concurrency.inWork',
      sql: "SELECT COUNT(*) AS \"in_work\" FROM \"email_jobs\" WHERE \"queue\" = $1 AND \"locked_until\" > $2 AND \"processed_at\" IS NULL",
      params: ['group', 'leaseNow'],
    });
    expect(statements.inWork(minimalLeaseTable.spec)).toEqual({
      name: 'concurrency.inWork',
      sql: "SELECT COUNT(*) AS \"in_work\" FROM \"jobs\" WHERE \"locked_until\" > $1",
      params: ['leaseNow'],
    });
  });

  it('claims under perKey only rows whose key has room, ranked among the first :window claimable rows with a key', () => {
    expect(perKeyClaim('postgres')).toEqual({
      name: 'lease.claim',
      sql: "WITH tablequeue_claimed AS (SELECT \"job_id\", \"queue\", \"priority\", \"customer\", \"retry_after\", \"attempt\", \"processed_at\", \"locked_until\", \"meta\", \"payload\" FROM \"email_jobs\" WHERE \"queue\" = $1 AND \"retry_after\" <= $2 AND \"processed_at\" IS NULL AND (\"locked_until\" IS NULL OR \"locked_until\" <= $3) AND (\"customer\" IS NULL OR \"job_id\" IN (SELECT tablequeue_ranked.\"job_id\" FROM (SELECT \"job_id\", \"customer\", ROW_NUMBER() OVER (PARTITION BY \"customer\" ORDER BY \"priority\", \"retry_after\", \"job_id\") AS tablequeue_rank FROM (SELECT \"job_id\", \"customer\", \"priority\", \"retry_after\" FROM \"email_jobs\" WHERE \"queue\" = $4 AND \"retry_after\" <= $5 AND \"processed_at\" IS NULL AND (\"locked_until\" IS NULL OR \"locked_until\" <= $6) AND \"customer\" IS NOT NULL ORDER BY \"priority\", \"retry_after\", \"job_id\" LIMIT $7) AS tablequeue_window) AS tablequeue_ranked LEFT JOIN (SELECT \"customer\", COUNT(*) AS tablequeue_count FROM \"email_jobs\" WHERE \"queue\" = $8 AND \"locked_until\" > $9 AND \"processed_at\" IS NULL AND \"customer\" IS NOT NULL GROUP BY \"customer\") AS tablequeue_held ON tablequeue_held.\"customer\" = tablequeue_ranked.\"customer\" WHERE tablequeue_ranked.tablequeue_rank + COALESCE(tablequeue_held.tablequeue_count, 0) <= $10)) ORDER BY \"priority\", \"retry_after\", \"job_id\" LIMIT $11 FOR UPDATE SKIP LOCKED), tablequeue_stamp AS (UPDATE \"email_jobs\" SET \"locked_until\" = $12, \"attempt\" = \"attempt\" + 1 WHERE \"job_id\" = ANY(ARRAY(SELECT tablequeue_claimed.\"job_id\" FROM tablequeue_claimed))) SELECT \"job_id\", \"queue\", \"priority\", \"customer\", \"retry_after\", \"attempt\", \"processed_at\", \"locked_until\", \"meta\", \"payload\" FROM tablequeue_claimed ORDER BY \"priority\", \"retry_after\", \"job_id\"",
      params: ['group', 'now', 'leaseNow', 'group', 'now', 'leaseNow', 'window', 'group', 'leaseNow', 'perKey', 'limit', 'lockedUntil'],
    });
  });
});

describe('mysql concurrency limits', () => {
  const statements = createConcurrencyStatements(createDialect('mysql').name);

  it('guards a queue with an upsert of its row in the guards table, beside the queue table', () => {
    expect(statements.guard(everyRoleLeaseTable.spec)).toEqual({
      name: 'concurrency.guard',
      sql: "INSERT INTO `tablequeue_concurrency_guards` (`table_name`, `queue_name`, `claims`) VALUES ('email_jobs', ?, 1) ON DUPLICATE KEY UPDATE `claims` = `claims` + 1",
      params: ['group'],
    });
    expect(statements.guard(minimalLeaseTable.spec)).toEqual({
      name: 'concurrency.guard',
      sql: "INSERT INTO `tablequeue_concurrency_guards` (`table_name`, `queue_name`, `claims`) VALUES ('jobs', '', 1) ON DUPLICATE KEY UPDATE `claims` = `claims` + 1",
      params: [],
    });
    expect(statements.guard(schemaQualifiedTable.spec)).toEqual({
      name: 'concurrency.guard',
      sql: "INSERT INTO `app`.`tablequeue_concurrency_guards` (`table_name`, `queue_name`, `claims`) VALUES ('app.jobs', ?, 1) ON DUPLICATE KEY UPDATE `claims` = `claims` + 1",
      params: ['group'],
    });
    expect(statements.createGuardTable(schemaQualifiedTable.spec)).toBe(
      "CREATE TABLE IF NOT EXISTS `app`.`tablequeue_concurrency_guards` (\n  `table_name` varchar(129) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,\n  `queue_name` varchar(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,\n  `claims` bigint NOT NULL,\n  PRIMARY KEY (`table_name`, `queue_name`)\n)",
    );
  });

  it('counts the queue\'s rows with a live lease', () => {
    expect(statements.inWork(everyRoleLeaseTable.spec)).toEqual({
      name: 'concurrency.inWork',
      sql: "SELECT COUNT(*) AS `in_work` FROM `email_jobs` WHERE `queue` = ? AND `locked_until` > ? AND `processed_at` IS NULL",
      params: ['group', 'leaseNow'],
    });
    expect(statements.inWork(minimalLeaseTable.spec)).toEqual({
      name: 'concurrency.inWork',
      sql: "SELECT COUNT(*) AS `in_work` FROM `jobs` WHERE `locked_until` > ?",
      params: ['leaseNow'],
    });
  });

  it('claims under perKey only rows whose key has room, ranked among the first :window claimable rows with a key', () => {
    expect(perKeyClaim('mysql')).toEqual({
      name: 'lease.claim',
      sql: "SELECT `job_id`, `queue`, `priority`, `customer`, `retry_after`, `attempt`, `processed_at`, `locked_until`, `meta`, `payload` FROM `email_jobs` WHERE `queue` = ? AND `retry_after` <= ? AND `processed_at` IS NULL AND (`locked_until` IS NULL OR `locked_until` <= ?) AND (`customer` IS NULL OR `job_id` IN (SELECT tablequeue_ranked.`job_id` FROM (SELECT `job_id`, `customer`, ROW_NUMBER() OVER (PARTITION BY `customer` ORDER BY `priority`, `retry_after`, `job_id`) AS tablequeue_rank FROM (SELECT `job_id`, `customer`, `priority`, `retry_after` FROM `email_jobs` WHERE `queue` = ? AND `retry_after` <= ? AND `processed_at` IS NULL AND (`locked_until` IS NULL OR `locked_until` <= ?) AND `customer` IS NOT NULL ORDER BY `priority`, `retry_after`, `job_id` LIMIT ?) AS tablequeue_window) AS tablequeue_ranked LEFT JOIN (SELECT `customer`, COUNT(*) AS tablequeue_count FROM `email_jobs` WHERE `queue` = ? AND `locked_until` > ? AND `processed_at` IS NULL AND `customer` IS NOT NULL GROUP BY `customer`) AS tablequeue_held ON tablequeue_held.`customer` = tablequeue_ranked.`customer` WHERE tablequeue_ranked.tablequeue_rank + COALESCE(tablequeue_held.tablequeue_count, 0) <= ?)) ORDER BY `priority`, `retry_after`, `job_id` LIMIT ? FOR UPDATE SKIP LOCKED",
      params: ['group', 'now', 'leaseNow', 'group', 'now', 'leaseNow', 'window', 'group', 'leaseNow', 'perKey', 'limit'],
    });
  });
});

describe('mariadb concurrency limits', () => {
  const statements = createConcurrencyStatements(createDialect('mariadb').name);

  it('guards a queue with an upsert of its row in the guards table, beside the queue table', () => {
    expect(statements.guard(everyRoleLeaseTable.spec)).toEqual({
      name: 'concurrency.guard',
      sql: "INSERT INTO `tablequeue_concurrency_guards` (`table_name`, `queue_name`, `claims`) VALUES ('email_jobs', ?, 1) ON DUPLICATE KEY UPDATE `claims` = `claims` + 1",
      params: ['group'],
    });
    expect(statements.guard(minimalLeaseTable.spec)).toEqual({
      name: 'concurrency.guard',
      sql: "INSERT INTO `tablequeue_concurrency_guards` (`table_name`, `queue_name`, `claims`) VALUES ('jobs', '', 1) ON DUPLICATE KEY UPDATE `claims` = `claims` + 1",
      params: [],
    });
    expect(statements.guard(schemaQualifiedTable.spec)).toEqual({
      name: 'concurrency.guard',
      sql: "INSERT INTO `app`.`tablequeue_concurrency_guards` (`table_name`, `queue_name`, `claims`) VALUES ('app.jobs', ?, 1) ON DUPLICATE KEY UPDATE `claims` = `claims` + 1",
      params: ['group'],
    });
    expect(statements.createGuardTable(schemaQualifiedTable.spec)).toBe(
      "CREATE TABLE IF NOT EXISTS `app`.`tablequeue_concurrency_guards` (\n  `table_name` varchar(129) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,\n  `queue_name` varchar(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,\n  `claims` bigint NOT NULL,\n  PRIMARY KEY (`table_name`, `queue_name`)\n)",
    );
  });

  it('counts the queue\'s rows with a live lease', () => {
    expect(statements.inWork(everyRoleLeaseTable.spec)).toEqual({
      name: 'concurrency.inWork',
      sql: "SELECT COUNT(*) AS `in_work` FROM `email_jobs` WHERE `queue` = ? AND `locked_until` > ? AND `processed_at` IS NULL",
      params: ['group', 'leaseNow'],
    });
    expect(statements.inWork(minimalLeaseTable.spec)).toEqual({
      name: 'concurrency.inWork',
      sql: "SELECT COUNT(*) AS `in_work` FROM `jobs` WHERE `locked_until` > ?",
      params: ['leaseNow'],
    });
  });

  it('claims under perKey only rows whose key has room, ranked among the first :window claimable rows with a key', () => {
    expect(perKeyClaim('mariadb')).toEqual({
      name: 'lease.claim',
      sql: "SELECT `job_id`, `queue`, `priority`, `customer`, `retry_after`, `attempt`, `processed_at`, `locked_until`, `meta`, `payload` FROM `email_jobs` WHERE `queue` = ? AND `retry_after` <= ? AND `processed_at` IS NULL AND (`locked_until` IS NULL OR `locked_until` <= ?) AND (`customer` IS NULL OR `job_id` IN (SELECT tablequeue_ranked.`job_id` FROM (SELECT `job_id`, `customer`, ROW_NUMBER() OVER (PARTITION BY `customer` ORDER BY `priority`, `retry_after`, `job_id`) AS tablequeue_rank FROM (SELECT `job_id`, `customer`, `priority`, `retry_after` FROM `email_jobs` WHERE `queue` = ? AND `retry_after` <= ? AND `processed_at` IS NULL AND (`locked_until` IS NULL OR `locked_until` <= ?) AND `customer` IS NOT NULL ORDER BY `priority`, `retry_after`, `job_id` LIMIT ?) AS tablequeue_window) AS tablequeue_ranked LEFT JOIN (SELECT `customer`, COUNT(*) AS tablequeue_count FROM `email_jobs` WHERE `queue` = ? AND `locked_until` > ? AND `processed_at` IS NULL AND `customer` IS NOT NULL GROUP BY `customer`) AS tablequeue_held ON tablequeue_held.`customer` = tablequeue_ranked.`customer` WHERE tablequeue_ranked.tablequeue_rank + COALESCE(tablequeue_held.tablequeue_count, 0) <= ?)) ORDER BY `priority`, `retry_after`, `job_id` LIMIT ? FOR UPDATE SKIP LOCKED",
      params: ['group', 'now', 'leaseNow', 'group', 'now', 'leaseNow', 'window', 'group', 'leaseNow', 'perKey', 'limit'],
    });
  });
});

describe('sqlite concurrency limits', () => {
  const statements = createConcurrencyStatements(createDialect('sqlite').name);

  it('has no guard statement: BEGIN IMMEDIATE takes the one write lock', () => {
    expect(statements.guard(everyRoleLeaseTable.spec)).toBeUndefined();
    expect(statements.createGuardTable(everyRoleLeaseTable.spec)).toBeUndefined();
  });

  it('counts the queue\'s rows with a live lease', () => {
    expect(statements.inWork(everyRoleLeaseTable.spec)).toEqual({
      name: 'concurrency.inWork',
      sql: "SELECT COUNT(*) AS `in_work` FROM `email_jobs` WHERE `queue` = ? AND `locked_until` > ? AND `processed_at` IS NULL",
      params: ['group', 'leaseNow'],
    });
    expect(statements.inWork(minimalLeaseTable.spec)).toEqual({
      name: 'concurrency.inWork',
      sql: "SELECT COUNT(*) AS `in_work` FROM `jobs` WHERE `locked_until` > ?",
      params: ['leaseNow'],
    });
  });

  it('claims under perKey only rows whose key has room, ranked among the first :window claimable rows with a key', () => {
    expect(perKeyClaim('sqlite')).toEqual({
      name: 'lease.claim',
      sql: "UPDATE `email_jobs` SET `locked_until` = ?, `attempt` = `attempt` + 1 WHERE `job_id` IN (SELECT `job_id` FROM `email_jobs` WHERE `queue` = ? AND `retry_after` <= ? AND `processed_at` IS NULL AND (`locked_until` IS NULL OR `locked_until` <= ?) AND (`customer` IS NULL OR `job_id` IN (SELECT tablequeue_ranked.`job_id` FROM (SELECT `job_id`, `customer`, ROW_NUMBER() OVER (PARTITION BY `customer` ORDER BY `priority`, `retry_after`, `job_id`) AS tablequeue_rank FROM (SELECT `job_id`, `customer`, `priority`, `retry_after` FROM `email_jobs` WHERE `queue` = ? AND `retry_after` <= ? AND `processed_at` IS NULL AND (`locked_until` IS NULL OR `locked_until` <= ?) AND `customer` IS NOT NULL ORDER BY `priority`, `retry_after`, `job_id` LIMIT ?) AS tablequeue_window) AS tablequeue_ranked LEFT JOIN (SELECT `customer`, COUNT(*) AS tablequeue_count FROM `email_jobs` WHERE `queue` = ? AND `locked_until` > ? AND `processed_at` IS NULL AND `customer` IS NOT NULL GROUP BY `customer`) AS tablequeue_held ON tablequeue_held.`customer` = tablequeue_ranked.`customer` WHERE tablequeue_ranked.tablequeue_rank + COALESCE(tablequeue_held.tablequeue_count, 0) <= ?)) ORDER BY `priority`, `retry_after`, `job_id` LIMIT ?) RETURNING `job_id`, `queue`, `priority`, `customer`, `retry_after`, `attempt`, `processed_at`, `locked_until`, `meta`, `payload`",
      params: ['lockedUntil', 'group', 'now', 'leaseNow', 'group', 'now', 'leaseNow', 'window', 'group', 'leaseNow', 'perKey', 'limit'],
    });
  });
});

describe('concurrency slots of the row lock form', () => {
  it('are not built on SQLite, which has no row locks', () => {
    expect(createConcurrencyStatements(createDialect('sqlite').name).slots).toBeUndefined();
  });

  it('postgres: the slots table, the highest slot, slots added above it up to global, free slots locked without waiting', () => {
    const slots = createConcurrencyStatements(createDialect('postgres').name).slots!;
    expect(slots.createTable(schemaQualifiedTable.spec)).toBe(
      [
        "CREATE TABLE IF NOT EXISTS \"app\".\"tablequeue_concurrency_slots\" (",
        "  \"table_name\" text NOT NULL,",
        "  \"queue_name\" text NOT NULL,",
        "  \"slot\" integer NOT NULL,",
        "  PRIMARY KEY (\"table_name\", \"queue_name\", \"slot\")",
        ")",
      ].join('\n'),
    );
    expect(slots.highest(everyRoleTable.spec)).toEqual({
      name: 'concurrency.highestSlot',
      sql: "SELECT COALESCE(MAX(\"slot\"), 0) AS \"highest\" FROM \"tablequeue_concurrency_slots\" WHERE \"table_name\" = 'email_jobs' AND \"queue_name\" = $1",
      params: ['group'],
    });
    expect(slots.add(everyRoleTable.spec)).toEqual({
      name: 'concurrency.addSlots',
      sql: "INSERT INTO \"tablequeue_concurrency_slots\" (\"table_name\", \"queue_name\", \"slot\") SELECT 'email_jobs', $1, tablequeue_slot FROM generate_series($2::integer, $3::integer) AS tablequeue_slot ON CONFLICT DO NOTHING",
      params: ['group', 'firstSlot', 'global'],
    });
    expect(slots.add(minimalTable.spec)).toEqual({
      name: 'concurrency.addSlots',
      sql: "INSERT INTO \"tablequeue_concurrency_slots\" (\"table_name\", \"queue_name\", \"slot\") SELECT 'jobs', '', tablequeue_slot FROM generate_series($1::integer, $2::integer) AS tablequeue_slot ON CONFLICT DO NOTHING",
      params: ['firstSlot', 'global'],
    });
    expect(slots.take(everyRoleTable.spec)).toEqual({
      name: 'concurrency.takeSlots',
      sql: "SELECT \"slot\" FROM \"tablequeue_concurrency_slots\" WHERE \"table_name\" = 'email_jobs' AND \"queue_name\" = $1 AND \"slot\" <= $2 ORDER BY \"slot\" LIMIT $3 FOR UPDATE SKIP LOCKED",
      params: ['group', 'global', 'limit'],
    });
    expect(slots.take(minimalTable.spec)).toEqual({
      name: 'concurrency.takeSlots',
      sql: "SELECT \"slot\" FROM \"tablequeue_concurrency_slots\" WHERE \"table_name\" = 'jobs' AND \"queue_name\" = '' AND \"slot\" <= $1 ORDER BY \"slot\" LIMIT $2 FOR UPDATE SKIP LOCKED",
      params: ['global', 'limit'],
    });
  });

  it('mysql: the slots table, the highest slot, slots added above it up to global, free slots locked without waiting', () => {
    const slots = createConcurrencyStatements(createDialect('mysql').name).slots!;
    expect(slots.createTable(schemaQualifiedTable.spec)).toBe(
      [
        "CREATE TABLE IF NOT EXISTS `app`.`tablequeue_concurrency_slots` (",
        "  `table_name` varchar(129) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,",
        "  `queue_name` varchar(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,",
        "  `slot` integer NOT NULL,",
        "  PRIMARY KEY (`table_name`, `queue_name`, `slot`)",
        ")",
      ].join('\n'),
    );
    expect(slots.highest(everyRoleTable.spec)).toEqual({
      name: 'concurrency.highestSlot',
      sql: "SELECT COALESCE(MAX(`slot`), 0) AS `highest` FROM `tablequeue_concurrency_slots` WHERE `table_name` = 'email_jobs' AND `queue_name` = ?",
      params: ['group'],
    });
    expect(slots.add(everyRoleTable.spec)).toEqual({
      name: 'concurrency.addSlots',
      sql: "INSERT INTO `tablequeue_concurrency_slots` (`table_name`, `queue_name`, `slot`) WITH RECURSIVE tablequeue_slots (n) AS (SELECT CAST(? AS UNSIGNED) UNION ALL SELECT n + 1 FROM tablequeue_slots WHERE n < ?) SELECT 'email_jobs', ?, n FROM tablequeue_slots ON DUPLICATE KEY UPDATE `slot` = `slot`",
      params: ['firstSlot', 'global', 'group'],
    });
    expect(slots.add(minimalTable.spec)).toEqual({
      name: 'concurrency.addSlots',
      sql: "INSERT INTO `tablequeue_concurrency_slots` (`table_name`, `queue_name`, `slot`) WITH RECURSIVE tablequeue_slots (n) AS (SELECT CAST(? AS UNSIGNED) UNION ALL SELECT n + 1 FROM tablequeue_slots WHERE n < ?) SELECT 'jobs', '', n FROM tablequeue_slots ON DUPLICATE KEY UPDATE `slot` = `slot`",
      params: ['firstSlot', 'global'],
    });
    expect(slots.take(everyRoleTable.spec)).toEqual({
      name: 'concurrency.takeSlots',
      sql: "SELECT `slot` FROM `tablequeue_concurrency_slots` WHERE `table_name` = 'email_jobs' AND `queue_name` = ? AND `slot` <= ? ORDER BY `slot` LIMIT ? FOR UPDATE SKIP LOCKED",
      params: ['group', 'global', 'limit'],
    });
    expect(slots.take(minimalTable.spec)).toEqual({
      name: 'concurrency.takeSlots',
      sql: "SELECT `slot` FROM `tablequeue_concurrency_slots` WHERE `table_name` = 'jobs' AND `queue_name` = '' AND `slot` <= ? ORDER BY `slot` LIMIT ? FOR UPDATE SKIP LOCKED",
      params: ['global', 'limit'],
    });
  });

  it('mariadb: the slots table, the highest slot, slots added above it up to global, free slots locked without waiting', () => {
    const slots = createConcurrencyStatements(createDialect('mariadb').name).slots!;
    expect(slots.createTable(schemaQualifiedTable.spec)).toBe(
      [
        "CREATE TABLE IF NOT EXISTS `app`.`tablequeue_concurrency_slots` (",
        "  `table_name` varchar(129) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,",
        "  `queue_name` varchar(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,",
        "  `slot` integer NOT NULL,",
        "  PRIMARY KEY (`table_name`, `queue_name`, `slot`)",
        ")",
      ].join('\n'),
    );
    expect(slots.highest(everyRoleTable.spec)).toEqual({
      name: 'concurrency.highestSlot',
      sql: "SELECT COALESCE(MAX(`slot`), 0) AS `highest` FROM `tablequeue_concurrency_slots` WHERE `table_name` = 'email_jobs' AND `queue_name` = ?",
      params: ['group'],
    });
    expect(slots.add(everyRoleTable.spec)).toEqual({
      name: 'concurrency.addSlots',
      sql: "INSERT INTO `tablequeue_concurrency_slots` (`table_name`, `queue_name`, `slot`) WITH RECURSIVE tablequeue_slots (n) AS (SELECT CAST(? AS UNSIGNED) UNION ALL SELECT n + 1 FROM tablequeue_slots WHERE n < ?) SELECT 'email_jobs', ?, n FROM tablequeue_slots ON DUPLICATE KEY UPDATE `slot` = `slot`",
      params: ['firstSlot', 'global', 'group'],
    });
    expect(slots.add(minimalTable.spec)).toEqual({
      name: 'concurrency.addSlots',
      sql: "INSERT INTO `tablequeue_concurrency_slots` (`table_name`, `queue_name`, `slot`) WITH RECURSIVE tablequeue_slots (n) AS (SELECT CAST(? AS UNSIGNED) UNION ALL SELECT n + 1 FROM tablequeue_slots WHERE n < ?) SELECT 'jobs', '', n FROM tablequeue_slots ON DUPLICATE KEY UPDATE `slot` = `slot`",
      params: ['firstSlot', 'global'],
    });
    expect(slots.take(everyRoleTable.spec)).toEqual({
      name: 'concurrency.takeSlots',
      sql: "SELECT `slot` FROM `tablequeue_concurrency_slots` WHERE `table_name` = 'email_jobs' AND `queue_name` = ? AND `slot` <= ? ORDER BY `slot` LIMIT ? FOR UPDATE SKIP LOCKED",
      params: ['group', 'global', 'limit'],
    });
    expect(slots.take(minimalTable.spec)).toEqual({
      name: 'concurrency.takeSlots',
      sql: "SELECT `slot` FROM `tablequeue_concurrency_slots` WHERE `table_name` = 'jobs' AND `queue_name` = '' AND `slot` <= ? ORDER BY `slot` LIMIT ? FOR UPDATE SKIP LOCKED",
      params: ['global', 'limit'],
    });
  });
});

describe('key slots of the row lock form (perKey)', () => {
  it('are not built on SQLite, which has no row locks', () => {
    expect(createConcurrencyStatements(createDialect('sqlite').name).keySlots).toBeUndefined();
  });

  it('postgres: the key slots table, the missing slots of the keys of the first :window claimable rows added, slots of those keys taken in claim order past the keys passed over, unused slots deleted in one statement, a key\'s rows and rows without a key claimed apart', () => {
    const keySlots = createConcurrencyStatements(createDialect('postgres').name).keySlots!;
    expect(keySlots.createTable(schemaQualifiedTable.spec)).toBe(
      [
        "CREATE TABLE IF NOT EXISTS \"app\".\"tablequeue_concurrency_key_slots\" (",
        "  \"table_name\" text NOT NULL,",
        "  \"queue_name\" text NOT NULL,",
        "  \"key_value\" text NOT NULL,",
        "  \"slot\" integer NOT NULL,",
        "  PRIMARY KEY (\"table_name\", \"queue_name\", \"key_value\", \"slot\")",
        ")",
      ].join('\n'),
    );
    expect(keySlots.addInTransaction).toBe(false);
    expect(keySlots.add(everyRoleTable.spec)).toEqual({
      name: "concurrency.addKeySlots",
      sql: "INSERT INTO \"tablequeue_concurrency_key_slots\" (\"table_name\", \"queue_name\", \"key_value\", \"slot\") SELECT 'email_jobs', $1, tablequeue_keys.tablequeue_key, tablequeue_numbers.n FROM (SELECT DISTINCT tablequeue_window.tablequeue_key FROM (SELECT CAST(\"customer\" AS text) AS tablequeue_key FROM \"email_jobs\" WHERE \"queue\" = $2 AND \"retry_after\" <= $3 AND \"processed_at\" IS NULL AND \"customer\" IS NOT NULL ORDER BY \"priority\", \"retry_after\", \"job_id\" LIMIT $4) AS tablequeue_window) AS tablequeue_keys CROSS JOIN generate_series(1, $5::integer) AS tablequeue_numbers (n) WHERE NOT EXISTS (SELECT 1 FROM \"tablequeue_concurrency_key_slots\" AS tablequeue_held WHERE tablequeue_held.\"table_name\" = 'email_jobs' AND tablequeue_held.\"queue_name\" = $6 AND tablequeue_held.\"key_value\" = tablequeue_keys.tablequeue_key AND tablequeue_held.\"slot\" = tablequeue_numbers.n) ON CONFLICT DO NOTHING",
      params: ['group', 'group', 'now', 'window', 'perKey', 'group'],
    });
    expect(keySlots.take(everyRoleTable.spec)).toEqual({
      kind: 'claimOrder',
      heads: {
        name: 'concurrency.keyHeads',
        sql: "SELECT tablequeue_positions.tablequeue_key FROM (SELECT CAST(\"customer\" AS text) AS tablequeue_key, ROW_NUMBER() OVER (ORDER BY \"priority\", \"retry_after\", \"job_id\") AS tablequeue_position FROM \"email_jobs\" WHERE \"queue\" = $1 AND \"retry_after\" <= $2 AND \"processed_at\" IS NULL AND \"customer\" IS NOT NULL AND \"job_id\" <> ALL($3) AND CAST(\"customer\" AS text) <> ALL($4) ORDER BY \"priority\", \"retry_after\", \"job_id\" LIMIT $5) AS tablequeue_positions GROUP BY tablequeue_positions.tablequeue_key ORDER BY MIN(tablequeue_positions.tablequeue_position) LIMIT $6 OFFSET $7",
        params: ['group', 'now', 'ids', 'passedKeys', 'window', 'limit', 'offset'],
      },
      lock: {
        name: 'concurrency.lockSlotsOfKeys',
        sql: "SELECT \"key_value\", \"slot\" FROM \"tablequeue_concurrency_key_slots\" WHERE \"table_name\" = 'email_jobs' AND \"queue_name\" = $1 AND \"key_value\" = ANY($2) AND \"slot\" <= $3 ORDER BY array_position(CAST($4 AS text[]), \"key_value\"), \"slot\" LIMIT $5 FOR UPDATE SKIP LOCKED",
        params: ['group', 'keys', 'perKey', 'keys', 'limit'],
      },
    });
    expect(keySlots.prune(everyRoleTable.spec)).toEqual({
      kind: 'oneStatement',
      statement: {
        name: 'concurrency.pruneKeySlots',
        sql: "DELETE FROM \"tablequeue_concurrency_key_slots\" WHERE ctid = ANY(ARRAY(SELECT tablequeue_unused.ctid FROM \"tablequeue_concurrency_key_slots\" AS tablequeue_unused WHERE tablequeue_unused.ctid = ANY(ARRAY(SELECT unnest(array_agg(tablequeue_keys.tablequeue_slot_row)) FROM (SELECT \"key_value\" AS tablequeue_key, ctid AS tablequeue_slot_row, false AS tablequeue_has_rows FROM \"tablequeue_concurrency_key_slots\" WHERE \"table_name\" = 'email_jobs' AND \"queue_name\" = $1 UNION ALL SELECT CAST(\"customer\" AS text), NULL, true FROM \"email_jobs\" WHERE \"queue\" = $2 AND \"retry_after\" <= $3 AND \"processed_at\" IS NULL AND \"customer\" IS NOT NULL) AS tablequeue_keys GROUP BY tablequeue_keys.tablequeue_key HAVING NOT bool_or(tablequeue_keys.tablequeue_has_rows))) FOR UPDATE OF tablequeue_unused SKIP LOCKED))",
        params: ['group', 'group', 'now'],
      },
    });
    expect(keySlots.claimOfKey(everyRoleTable.spec, everyRoleTable.columns)).toEqual({
      kind: 'locking',
      statement: {
        name: "rowLock.claimOfKey",
        sql: "SELECT \"job_id\", \"queue\", \"priority\", \"customer\", \"retry_after\", \"attempt\", \"processed_at\", \"meta\", \"payload\" FROM \"email_jobs\" WHERE \"queue\" = $1 AND \"retry_after\" <= $2 AND \"processed_at\" IS NULL AND \"customer\" = $3 ORDER BY \"priority\", \"retry_after\", \"job_id\" LIMIT $4 FOR UPDATE SKIP LOCKED",
        params: ['group', 'now', 'key', 'limit'],
      },
    });
    expect(keySlots.claimWithoutKey(everyRoleTable.spec, everyRoleTable.columns)).toEqual({
      kind: 'locking',
      statement: {
        name: "rowLock.claimWithoutKey",
        sql: "SELECT \"job_id\", \"queue\", \"priority\", \"customer\", \"retry_after\", \"attempt\", \"processed_at\", \"meta\", \"payload\" FROM \"email_jobs\" WHERE \"queue\" = $1 AND \"retry_after\" <= $2 AND \"processed_at\" IS NULL AND \"customer\" IS NULL ORDER BY \"priority\", \"retry_after\", \"job_id\" LIMIT $3 FOR UPDATE SKIP LOCKED",
        params: ['group', 'now', 'limit'],
      },
    });
  });

  it('mysql: the key slots table, the missing slots of the keys of the first :window claimable rows added behind the guard, slots of those keys taken in turn in primary key order, unused slots locked a page at a time in key order then deleted by primary key, rows read without locks and locked one by one by primary key', () => {
    const keySlots = createConcurrencyStatements(createDialect('mysql').name).keySlots!;
    expect(keySlots.createTable(schemaQualifiedTable.spec)).toBe(
      [
        "CREATE TABLE IF NOT EXISTS `app`.`tablequeue_concurrency_key_slots` (",
        "  `table_name` varchar(129) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,",
        "  `queue_name` varchar(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,",
        "  `key_value` varchar(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,",
        "  `slot` integer NOT NULL,",
        "  PRIMARY KEY (`table_name`, `queue_name`, `key_value`, `slot`)",
        ")",
      ].join('\n'),
    );
    expect(keySlots.addInTransaction).toBe(true);
    expect(keySlots.add(everyRoleTable.spec)).toEqual({
      name: "concurrency.addKeySlots",
      sql: "INSERT INTO `tablequeue_concurrency_key_slots` (`table_name`, `queue_name`, `key_value`, `slot`) WITH RECURSIVE tablequeue_numbers (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM tablequeue_numbers WHERE n < ?) SELECT 'email_jobs', ?, tablequeue_keys.tablequeue_key, tablequeue_numbers.n FROM (SELECT DISTINCT tablequeue_window.tablequeue_key FROM (SELECT CONVERT(`customer` USING utf8mb4) COLLATE utf8mb4_bin AS tablequeue_key FROM `email_jobs` WHERE `queue` = ? AND `retry_after` <= ? AND `processed_at` IS NULL AND `customer` IS NOT NULL ORDER BY `priority`, `retry_after`, `job_id` LIMIT ?) AS tablequeue_window) AS tablequeue_keys CROSS JOIN tablequeue_numbers WHERE NOT EXISTS (SELECT 1 FROM `tablequeue_concurrency_key_slots` AS tablequeue_held WHERE tablequeue_held.`table_name` = 'email_jobs' AND tablequeue_held.`queue_name` = ? AND tablequeue_held.`key_value` = tablequeue_keys.tablequeue_key AND tablequeue_held.`slot` = tablequeue_numbers.n)",
      params: ['perKey', 'group', 'group', 'now', 'window', 'group'],
    });
    expect(keySlots.take(everyRoleTable.spec)).toEqual({
      kind: 'roundRobin',
      after: {
        name: "concurrency.keySlotsAfter",
        sql: "SELECT tablequeue_slots.`key_value`, tablequeue_slots.`slot` FROM `tablequeue_concurrency_key_slots` AS tablequeue_slots WHERE tablequeue_slots.`table_name` = 'email_jobs' AND tablequeue_slots.`queue_name` = ? AND tablequeue_slots.`key_value` > ? AND tablequeue_slots.`slot` <= ? AND tablequeue_slots.`key_value` IN (SELECT tablequeue_keys.tablequeue_key FROM (SELECT DISTINCT tablequeue_window.tablequeue_key FROM (SELECT CONVERT(`customer` USING utf8mb4) COLLATE utf8mb4_bin AS tablequeue_key FROM `email_jobs` WHERE `queue` = ? AND `retry_after` <= ? AND `processed_at` IS NULL AND `customer` IS NOT NULL ORDER BY `priority`, `retry_after`, `job_id` LIMIT ?) AS tablequeue_window) AS tablequeue_keys) ORDER BY tablequeue_slots.`key_value`, tablequeue_slots.`slot` LIMIT ? OFFSET ?",
        params: ['group', 'key', 'perKey', 'group', 'now', 'window', 'limit', 'offset'],
      },
      upTo: {
        name: "concurrency.keySlotsUpTo",
        sql: "SELECT tablequeue_slots.`key_value`, tablequeue_slots.`slot` FROM `tablequeue_concurrency_key_slots` AS tablequeue_slots WHERE tablequeue_slots.`table_name` = 'email_jobs' AND tablequeue_slots.`queue_name` = ? AND tablequeue_slots.`key_value` <= ? AND tablequeue_slots.`slot` <= ? AND tablequeue_slots.`key_value` IN (SELECT tablequeue_keys.tablequeue_key FROM (SELECT DISTINCT tablequeue_window.tablequeue_key FROM (SELECT CONVERT(`customer` USING utf8mb4) COLLATE utf8mb4_bin AS tablequeue_key FROM `email_jobs` WHERE `queue` = ? AND `retry_after` <= ? AND `processed_at` IS NULL AND `customer` IS NOT NULL ORDER BY `priority`, `retry_after`, `job_id` LIMIT ?) AS tablequeue_window) AS tablequeue_keys) ORDER BY tablequeue_slots.`key_value`, tablequeue_slots.`slot` LIMIT ? OFFSET ?",
        params: ['group', 'key', 'perKey', 'group', 'now', 'window', 'limit', 'offset'],
      },
      lock: {
        name: 'concurrency.lockKeySlot',
        sql: "SELECT `key_value`, `slot` FROM `tablequeue_concurrency_key_slots` WHERE `table_name` = 'email_jobs' AND `queue_name` = ? AND `key_value` = CONVERT(? USING utf8mb4) COLLATE utf8mb4_bin AND `slot` = ? FOR UPDATE SKIP LOCKED",
        params: ['group', 'key', 'slot'],
      },
    });
    const namedSlots = `(SELECT CONVERT(? USING utf8mb4) COLLATE utf8mb4_bin AS tablequeue_key, ? AS tablequeue_slot${' UNION ALL SELECT CONVERT(? USING utf8mb4) COLLATE utf8mb4_bin, ?'.repeat(KEY_SLOTS_PER_DELETE - 1)}) AS tablequeue_named ` +
      "STRAIGHT_JOIN `tablequeue_concurrency_key_slots` FORCE INDEX (PRIMARY) ON `tablequeue_concurrency_key_slots`.`table_name` = 'email_jobs' AND `tablequeue_concurrency_key_slots`.`queue_name` = ? AND `tablequeue_concurrency_key_slots`.`key_value` = tablequeue_named.tablequeue_key AND `tablequeue_concurrency_key_slots`.`slot` = tablequeue_named.tablequeue_slot";
    const namedSlotParams = [...Array.from({ length: KEY_SLOTS_PER_DELETE }, () => ['key', 'slot']).flat(), 'group'];
    expect(keySlots.prune(everyRoleTable.spec)).toEqual({
      kind: 'lockThenDelete',
      unused: {
        name: 'concurrency.unusedKeySlots',
        sql: "SELECT tablequeue_slots.`key_value`, tablequeue_slots.`slot` FROM `tablequeue_concurrency_key_slots` AS tablequeue_slots WHERE tablequeue_slots.`table_name` = 'email_jobs' AND tablequeue_slots.`queue_name` = ? AND (tablequeue_slots.`key_value` > ? OR tablequeue_slots.`key_value` = ? AND tablequeue_slots.`slot` > ?) AND tablequeue_slots.`key_value` NOT IN (SELECT tablequeue_keys.tablequeue_key FROM (SELECT DISTINCT CONVERT(`customer` USING utf8mb4) COLLATE utf8mb4_bin AS tablequeue_key FROM `email_jobs` WHERE `queue` = ? AND `retry_after` <= ? AND `processed_at` IS NULL AND `customer` IS NOT NULL) AS tablequeue_keys) ORDER BY tablequeue_slots.`key_value`, tablequeue_slots.`slot` LIMIT ?",
        params: ['group', 'key', 'key', 'slot', 'group', 'now', 'limit'],
      },
      lock: {
        name: 'concurrency.lockKeySlots',
        sql: "SELECT `tablequeue_concurrency_key_slots`.`key_value`, `tablequeue_concurrency_key_slots`.`slot` FROM " + namedSlots + ' FOR UPDATE SKIP LOCKED',
        params: namedSlotParams,
      },
      delete: {
        name: 'concurrency.deleteKeySlots',
        sql: "DELETE `tablequeue_concurrency_key_slots` FROM " + namedSlots,
        params: namedSlotParams,
      },
    });
    expect(keySlots.claimOfKey(everyRoleTable.spec, everyRoleTable.columns)).toEqual({
      kind: 'readThenLock',
      candidates: {
        name: "rowLock.candidatesOfKey",
        sql: "SELECT `job_id` FROM `email_jobs` WHERE `queue` = ? AND `retry_after` <= ? AND `processed_at` IS NULL AND `customer` = ? ORDER BY `priority`, `retry_after`, `job_id` LIMIT ? OFFSET ?",
        params: ['group', 'now', 'key', 'limit', 'offset'],
      },
      lock: {
        name: "rowLock.lockOfKey",
        sql: "SELECT `job_id`, `queue`, `priority`, `customer`, `retry_after`, `attempt`, `processed_at`, `meta`, `payload` FROM `email_jobs` WHERE `job_id` = ? AND `queue` = ? AND `retry_after` <= ? AND `processed_at` IS NULL FOR UPDATE SKIP LOCKED",
        params: ['id', 'group', 'now'],
      },
    });
    expect(keySlots.claimWithoutKey(everyRoleTable.spec, everyRoleTable.columns)).toEqual({
      kind: 'readThenLock',
      candidates: {
        name: "rowLock.candidatesWithoutKey",
        sql: "SELECT `job_id` FROM `email_jobs` WHERE `queue` = ? AND `retry_after` <= ? AND `processed_at` IS NULL AND `customer` IS NULL ORDER BY `priority`, `retry_after`, `job_id` LIMIT ? OFFSET ?",
        params: ['group', 'now', 'limit', 'offset'],
      },
      lock: {
        name: "rowLock.lockWithoutKey",
        sql: "SELECT `job_id`, `queue`, `priority`, `customer`, `retry_after`, `attempt`, `processed_at`, `meta`, `payload` FROM `email_jobs` WHERE `job_id` = ? AND `queue` = ? AND `retry_after` <= ? AND `processed_at` IS NULL FOR UPDATE SKIP LOCKED",
        params: ['id', 'group', 'now'],
      },
    });
  });
});
