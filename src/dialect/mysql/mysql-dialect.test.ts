import { describe, expect, it } from 'vitest';
import { DeclarationError, ServerVersionError, UnsupportedError } from '../../errors.js';
import { createTableSpec } from '../../table/table-spec.js';
import { BACKTICK_STYLE } from '../quoting.js';
import {
  collapseWhitespace,
  everyRoleLeaseTable,
  everyRoleTable,
  fifoLeaseTable,
  fifoSerializableTable,
  fifoTable,
  minimalFifoLeaseTable,
  minimalLeaseTable,
  minimalTable,
  reservedWordTable,
  schemaQualifiedTable,
  statementText,
} from '../test-tables.fixture.js';
import { checkMysqlServerVersion, createMysqlDialect, parseMysqlServerVersion } from './mysql-dialect.js';

const mysql = createMysqlDialect({ mariadb: false });
const mariadb = createMysqlDialect({ mariadb: true });
const EVERY_ROLE_COLUMNS = '`job_id`, `queue`, `priority`, `customer`, `retry_after`, `attempt`, `processed_at`, `meta`, `payload`';
const EVERY_LEASE_COLUMNS =
  '`job_id`, `queue`, `priority`, `customer`, `retry_after`, `attempt`, `processed_at`, `locked_until`, `meta`, `payload`';
/** The fixture's headers column `meta` as a dead letter writes it, the last error bound at the one `?`. */
const META_WITH_LAST_ERROR =
  "CASE WHEN JSON_VALID(COALESCE(NULLIF(`meta`, ''), '{}')) THEN CASE JSON_TYPE(COALESCE(NULLIF(`meta`, ''), '{}')) " +
  "WHEN 'OBJECT' THEN JSON_SET(COALESCE(NULLIF(`meta`, ''), '{}'), '$.\"tablequeue-last-error\"', ?) ELSE `meta` END ELSE `meta` END";

describe('mysql capabilities', () => {
  it('gives MariaDB DELETE and INSERT … RETURNING, and neither flavour UPDATE … RETURNING', () => {
    expect(mysql.capabilities).toMatchObject({
      supportsRowLock: true,
      supportsUpdateReturning: false,
      supportsDeleteReturning: false,
      supportsInsertReturning: false,
      hasSingleWriter: false,
      sharesSessionWithService: false,
      leaseClaimLocksRows: true,
      leaseClaimReturnsCountedAttempt: false,
    });
    expect(mariadb.capabilities).toMatchObject({
      supportsUpdateReturning: false,
      supportsDeleteReturning: true,
      supportsInsertReturning: true,
    });
  });
});

describe('mysql session', () => {
  it('names the level before every transaction, read committed by default', () => {
    expect(mysql.session.begin().map(statementText)).toEqual([
      { name: 'session.isolation', sql: 'SET TRANSACTION ISOLATION LEVEL READ COMMITTED', params: [] },
      { name: 'session.begin', sql: 'START TRANSACTION', params: [] },
    ]);
    expect(mysql.session.begin({ isolation: 'read uncommitted' })[0]?.sql).toBe('SET TRANSACTION ISOLATION LEVEL READ UNCOMMITTED');
    expect(mysql.session.begin({ isolation: 'repeatable read', sqliteBegin: 'immediate' })[0]?.sql).toBe(
      'SET TRANSACTION ISOLATION LEVEL REPEATABLE READ',
    );
  });

  it('refuses a level that is not one', () => {
    expect(() => mysql.session.begin({ isolation: 'chaos' as 'serializable' })).toThrow(DeclarationError);
  });

  it('commits, rolls back and reads VERSION()', () => {
    expect(statementText(mysql.session.commit())).toEqual({ name: 'session.commit', sql: 'COMMIT', params: [] });
    expect(statementText(mysql.session.rollback())).toEqual({ name: 'session.rollback', sql: 'ROLLBACK', params: [] });
    expect(statementText(mysql.session.serverVersion())).toEqual({
      name: 'session.serverVersion',
      sql: 'SELECT VERSION() AS version',
      params: [],
    });
  });
});

describe('mysql rowLock.claim', () => {
  it('claims a minimal table by id alone', () => {
    expect(statementText(mysql.rowLock.claim(minimalTable.spec, minimalTable.columns))).toEqual({
      name: 'rowLock.claim',
      sql: 'SELECT `id`, `body` FROM `jobs` ORDER BY `id` LIMIT ? FOR UPDATE SKIP LOCKED',
      params: ['limit'],
    });
  });

  it('adds a condition and an order column per role, in one locking read where the claim order puts the due time first', () => {
    const withoutPriority = { ...everyRoleTable.spec, priority: undefined };
    expect(statementText(mariadb.rowLock.claim(withoutPriority, everyRoleTable.columns))).toEqual({
      name: 'rowLock.claim',
      sql: `SELECT ${EVERY_ROLE_COLUMNS} FROM \`email_jobs\` WHERE \`queue\` = ? AND \`retry_after\` <= ? AND \`processed_at\` IS NULL ORDER BY \`retry_after\`, \`job_id\` LIMIT ? FOR UPDATE SKIP LOCKED`,
      params: ['group', 'now', 'limit'],
    });
  });

  it('with a priority before the due time, reads candidates without locks and locks only them, by primary key in claim order', () => {
    const conditions = 'WHERE `queue` = ? AND `retry_after` <= ? AND `processed_at` IS NULL';
    expect(statementText(mariadb.rowLock.claim(everyRoleTable.spec, everyRoleTable.columns))).toEqual({
      name: 'rowLock.claim',
      sql:
        `SELECT ${EVERY_ROLE_COLUMNS} FROM (SELECT \`job_id\` AS tablequeue_candidate FROM \`email_jobs\` ${conditions} ORDER BY \`priority\`, \`retry_after\`, \`job_id\` LIMIT ?) AS tablequeue_candidates ` +
        `STRAIGHT_JOIN \`email_jobs\` ON \`job_id\` = tablequeue_candidates.tablequeue_candidate ${conditions} LIMIT ? FOR UPDATE SKIP LOCKED`,
      params: ['group', 'now', 'candidates', 'group', 'now', 'limit'],
    });
  });

  it('WP-11: claims only the head of a FIFO group, when due and not held, one row whatever the limit', () => {
    expect(statementText(mysql.rowLock.claim(fifoTable.spec, fifoTable.columns))).toEqual({
      name: 'rowLock.claim',
      sql: `SELECT ${EVERY_ROLE_COLUMNS} FROM \`email_jobs\` WHERE \`job_id\` = (SELECT \`job_id\` FROM \`email_jobs\` WHERE \`queue\` = ? AND \`processed_at\` IS NULL ORDER BY \`priority\`, \`retry_after\`, \`job_id\` LIMIT 1) AND \`queue\` = ? AND \`retry_after\` <= ? AND \`processed_at\` IS NULL FOR UPDATE SKIP LOCKED`,
      params: ['group', 'group', 'now'],
    });
  });
});

describe('mysql rowLock.retry and rowLock.retryAfter', () => {
  it('counts the attempt and delays', () => {
    expect(statementText(mysql.rowLock.retry(everyRoleTable.spec)!)).toEqual({
      name: 'rowLock.retry',
      sql: 'UPDATE `email_jobs` SET `attempt` = `attempt` + 1 WHERE `job_id` = ?',
      params: ['id'],
    });
    expect(statementText(mysql.rowLock.retryAfter(everyRoleTable.spec)!)).toEqual({
      name: 'rowLock.retryAfter',
      sql: 'UPDATE `email_jobs` SET `retry_after` = ?, `attempt` = `attempt` + 1 WHERE `job_id` = ?',
      params: ['retryAfterAt', 'id'],
    });
    expect(mysql.rowLock.retry(minimalTable.spec)).toBeUndefined();
    expect(mysql.rowLock.retryAfter(minimalTable.spec)).toBeUndefined();
  });
});

describe('mysql rowLock.finishMany', () => {
  it('deletes the rows of a batch through a derived table of their ids read first, the id repeated once per row', () => {
    for (const dialect of [mysql, mariadb]) {
      expect(statementText(dialect.rowLock.finishMany!(minimalTable.spec, 4))).toEqual({
        name: 'rowLock.finishMany',
        sql:
          'DELETE `jobs` FROM (SELECT ? AS `tablequeue_id` UNION ALL SELECT ? UNION ALL SELECT ? UNION ALL SELECT ?) AS `tablequeue_finished` ' +
          'STRAIGHT_JOIN `jobs` FORCE INDEX (PRIMARY) ON `jobs`.`id` = `tablequeue_finished`.`tablequeue_id`',
        params: ['id', 'id', 'id', 'id'],
      });
    }
    expect(mysql.rowLock.finishMany!(schemaQualifiedTable.spec, 1).sql).toBe(
      'DELETE `app`.`jobs` FROM (SELECT ? AS `tablequeue_id`) AS `tablequeue_finished` STRAIGHT_JOIN `app`.`jobs` FORCE INDEX (PRIMARY) ON `app`.`jobs`.`id` = `tablequeue_finished`.`tablequeue_id`',
    );
  });

  it('marks them finished on a table with processed_at, and refuses a row count below one', () => {
    expect(statementText(mysql.rowLock.finishMany!(everyRoleTable.spec, 2))).toEqual({
      name: 'rowLock.finishMany',
      sql:
        'UPDATE (SELECT ? AS `tablequeue_id` UNION ALL SELECT ?) AS `tablequeue_finished` ' +
        'STRAIGHT_JOIN `email_jobs` FORCE INDEX (PRIMARY) ON `email_jobs`.`job_id` = `tablequeue_finished`.`tablequeue_id` SET `processed_at` = ?',
      params: ['id', 'id', 'now'],
    });
    expect(() => mysql.rowLock.finishMany!(minimalTable.spec, 0)).toThrow(/at least 1/);
    expect(() => mysql.rowLock.finishMany!(minimalTable.spec, 1.5)).toThrow(/at least 1/);
  });
});

describe('mysql lease.claim', () => {
  it('selects with row locks in a read committed transaction, then stamps each row', () => {
    const claim = mysql.lease.claim(everyRoleLeaseTable.spec, everyRoleLeaseTable.columns);
    if (claim.kind !== 'selectThenStamp') throw new Error('expected select then stamp');
    expect(claim.begin.map(statementText)).toEqual([
      { name: 'session.isolation', sql: 'SET TRANSACTION ISOLATION LEVEL READ COMMITTED', params: [] },
      { name: 'session.begin', sql: 'START TRANSACTION', params: [] },
    ]);
    expect(statementText(claim.select)).toEqual({
      name: 'lease.claim',
      sql: `SELECT ${EVERY_LEASE_COLUMNS} FROM \`email_jobs\` WHERE \`queue\` = ? AND \`retry_after\` <= ? AND \`processed_at\` IS NULL AND (\`locked_until\` IS NULL OR \`locked_until\` <= ?) ORDER BY \`priority\`, \`retry_after\`, \`job_id\` LIMIT ? FOR UPDATE SKIP LOCKED`,
      params: ['group', 'now', 'leaseNow', 'limit'],
    });
    expect(statementText(claim.stamp)).toEqual({
      name: 'lease.stamp',
      sql: 'UPDATE `email_jobs` SET `locked_until` = ?, `attempt` = `attempt` + 1 WHERE `job_id` = ? AND (`locked_until` IS NULL OR `locked_until` <= ?)',
      params: ['lockedUntil', 'id', 'leaseNow'],
    });
  });

  it('stamps every selected row in one statement, fenced like the stamp of one', () => {
    const claim = mariadb.lease.claim(everyRoleLeaseTable.spec, everyRoleLeaseTable.columns);
    if (claim.kind !== 'selectThenStamp' || claim.stampAll === undefined) throw new Error('expected select then stampAll');
    expect(statementText(claim.stampAll(3))).toEqual({
      name: 'lease.stampAll',
      sql: 'UPDATE `email_jobs` SET `locked_until` = ?, `attempt` = `attempt` + 1 WHERE `job_id` IN (?, ?, ?) AND (`locked_until` IS NULL OR `locked_until` <= ?)',
      params: ['lockedUntil', 'id', 'id', 'id', 'leaseNow'],
    });
    expect(() => claim.stampAll!(0)).toThrow(TypeError);
  });

  it('claims at read committed whatever the table declares', () => {
    const spec = createTableSpec({ table: 'jobs', id: 'id', lockedUntil: 'locked_until', isolation: 'serializable' });
    const claim = mysql.lease.claim(spec, ['id', 'locked_until']);
    if (claim.kind !== 'selectThenStamp') throw new Error('expected select then stamp');
    expect(claim.begin[0]?.sql).toBe('SET TRANSACTION ISOLATION LEVEL READ COMMITTED');
  });

  it('stamps only the lease without an attempt column, quoting reserved words', () => {
    const minimal = mysql.lease.claim(minimalLeaseTable.spec, minimalLeaseTable.columns);
    if (minimal.kind !== 'selectThenStamp') throw new Error('expected select then stamp');
    expect(statementText(minimal.stamp)).toEqual({
      name: 'lease.stamp',
      sql: 'UPDATE `jobs` SET `locked_until` = ? WHERE `id` = ? AND (`locked_until` IS NULL OR `locked_until` <= ?)',
      params: ['lockedUntil', 'id', 'leaseNow'],
    });
    const reserved = mariadb.lease.claim(reservedWordTable.spec, reservedWordTable.columns);
    if (reserved.kind !== 'selectThenStamp') throw new Error('expected select then stamp');
    expect(statementText(reserved.select)).toEqual({
      name: 'lease.claim',
      sql: 'SELECT `select`, `group`, `from`, `limit`, `where`, `table` FROM `user`.`order` WHERE `group` = ? AND `from` <= ? AND (`where` IS NULL OR `where` <= ?) ORDER BY `from`, `select` LIMIT ? FOR UPDATE SKIP LOCKED',
      params: ['group', 'now', 'leaseNow', 'limit'],
    });
    expect(statementText(reserved.stamp)).toEqual({
      name: 'lease.stamp',
      sql: 'UPDATE `user`.`order` SET `where` = ?, `limit` = `limit` + 1 WHERE `select` = ? AND (`where` IS NULL OR `where` <= ?)',
      params: ['lockedUntil', 'id', 'leaseNow'],
    });
  });

  it('runs no guard on a table without FIFO groups', () => {
    const claim = mysql.lease.claim(everyRoleLeaseTable.spec, everyRoleLeaseTable.columns);
    if (claim.kind !== 'selectThenStamp') throw new Error('expected select then stamp');
    expect(claim.guard).toBeUndefined();
  });

  it('WP-11: guards the group, then selects the head only while no row of its group is in work', () => {
    const claim = mariadb.lease.claim(fifoLeaseTable.spec, fifoLeaseTable.columns);
    if (claim.kind !== 'selectThenStamp') throw new Error('expected select then stamp');
    expect(claim.begin.map((statement) => statement.sql)).toEqual([
      'SET TRANSACTION ISOLATION LEVEL READ COMMITTED',
      'START TRANSACTION',
    ]);
    expect(statementText(claim.guard!)).toEqual({
      name: 'fifo.guard',
      sql: "SELECT CAST((SELECT COUNT(*) FROM `tablequeue_fifo_guards` WHERE `table_name` = 'email_jobs' AND `queue_name` = ? FOR UPDATE SKIP LOCKED) AS SIGNED) AS `owned`, CAST((SELECT COUNT(*) FROM `tablequeue_fifo_guards` WHERE `table_name` = 'email_jobs' AND `queue_name` = ?) AS SIGNED) AS `tablequeue_guard_row`",
      params: ['group', 'group'],
    });
    expect(statementText(claim.select)).toEqual({
      name: 'lease.claim',
      sql: `SELECT ${EVERY_LEASE_COLUMNS} FROM \`email_jobs\` WHERE \`job_id\` = (SELECT \`job_id\` FROM \`email_jobs\` WHERE \`queue\` = ? AND \`processed_at\` IS NULL ORDER BY \`priority\`, \`retry_after\`, \`job_id\` LIMIT 1) AND \`queue\` = ? AND \`retry_after\` <= ? AND \`processed_at\` IS NULL AND (\`locked_until\` IS NULL OR \`locked_until\` <= ?) AND (SELECT MAX(tablequeue_work.\`locked_until\`) FROM \`email_jobs\` AS tablequeue_work WHERE tablequeue_work.\`queue\` = ? AND tablequeue_work.\`locked_until\` > ?) IS NULL FOR UPDATE SKIP LOCKED`,
      params: ['group', 'group', 'now', 'leaseNow', 'group', 'leaseNow'],
    });
    expect(statementText(claim.stamp)).toEqual({
      name: 'lease.stamp',
      sql: 'UPDATE `email_jobs` SET `locked_until` = ?, `attempt` = `attempt` + 1 WHERE `job_id` = ? AND (`locked_until` IS NULL OR `locked_until` <= ?)',
      params: ['lockedUntil', 'id', 'leaseNow'],
    });
  });

  it('WP-11: counts every row of the group as unfinished on a table that deletes finished rows', () => {
    const claim = mysql.lease.claim(minimalFifoLeaseTable.spec, minimalFifoLeaseTable.columns);
    if (claim.kind !== 'selectThenStamp') throw new Error('expected select then stamp');
    expect(statementText(claim.select)).toEqual({
      name: 'lease.claim',
      sql: 'SELECT `id`, `queue`, `locked_until` FROM `app`.`jobs` WHERE `id` = (SELECT `id` FROM `app`.`jobs` WHERE `queue` = ? ORDER BY `id` LIMIT 1) AND `queue` = ? AND (`locked_until` IS NULL OR `locked_until` <= ?) AND (SELECT MAX(tablequeue_work.`locked_until`) FROM `app`.`jobs` AS tablequeue_work WHERE tablequeue_work.`queue` = ? AND tablequeue_work.`locked_until` > ?) IS NULL FOR UPDATE SKIP LOCKED',
      params: ['group', 'group', 'leaseNow', 'group', 'leaseNow'],
    });
  });
});

describe('mysql fifo.guard', () => {
  it('WP-11: owns the group only when it can lock the group\'s guard row, and says whether the row is there', () => {
    expect(statementText(mysql.fifo.guard(minimalFifoLeaseTable.spec)!)).toEqual({
      name: 'fifo.guard',
      sql: "SELECT CAST((SELECT COUNT(*) FROM `app`.`tablequeue_fifo_guards` WHERE `table_name` = 'app.jobs' AND `queue_name` = ? FOR UPDATE SKIP LOCKED) AS SIGNED) AS `owned`, CAST((SELECT COUNT(*) FROM `app`.`tablequeue_fifo_guards` WHERE `table_name` = 'app.jobs' AND `queue_name` = ?) AS SIGNED) AS `tablequeue_guard_row`",
      params: ['group', 'group'],
    });
    expect(statementText(mariadb.fifo.guard(fifoTable.spec)!)).toEqual({
      name: 'fifo.guard',
      sql: "SELECT CAST((SELECT COUNT(*) FROM `tablequeue_fifo_guards` WHERE `table_name` = 'email_jobs' AND `queue_name` = ? FOR UPDATE SKIP LOCKED) AS SIGNED) AS `owned`, CAST((SELECT COUNT(*) FROM `tablequeue_fifo_guards` WHERE `table_name` = 'email_jobs' AND `queue_name` = ?) AS SIGNED) AS `tablequeue_guard_row`",
      params: ['group', 'group'],
    });
  });

  it('is undefined on a table without FIFO groups', () => {
    expect(mysql.fifo.guard(everyRoleTable.spec)).toBeUndefined();
    expect(mysql.fifo.guard(everyRoleLeaseTable.spec)).toBeUndefined();
  });
});

describe('mysql lease settlements', () => {
  const spec = everyRoleLeaseTable.spec;

  it('releases, delays and extends under the held token', () => {
    expect(statementText(mysql.lease.release(spec))).toEqual({
      name: 'lease.release',
      sql: 'UPDATE `email_jobs` SET `locked_until` = NULL WHERE `job_id` = ? AND `locked_until` = ?',
      params: ['id', 'held'],
    });
    expect(statementText(mysql.lease.retryAfter(spec)!)).toEqual({
      name: 'lease.retryAfter',
      sql: 'UPDATE `email_jobs` SET `retry_after` = ?, `locked_until` = NULL WHERE `job_id` = ? AND `locked_until` = ?',
      params: ['retryAfterAt', 'id', 'held'],
    });
    expect(statementText(mysql.lease.extend(spec))).toEqual({
      name: 'lease.extend',
      sql: 'UPDATE `email_jobs` SET `locked_until` = ? WHERE `job_id` = ? AND `locked_until` = ?',
      params: ['lockedUntil', 'id', 'held'],
    });
  });
});

describe('mysql settle.finish', () => {
  it('deletes or marks, fenced or not', () => {
    expect(statementText(mysql.settle.finish(minimalLeaseTable.spec, { fenced: true }))).toEqual({
      name: 'settle.finish',
      sql: 'DELETE FROM `jobs` WHERE `id` = ? AND `locked_until` = ?',
      params: ['id', 'held'],
    });
    expect(statementText(mysql.settle.finish(everyRoleTable.spec, { fenced: false }))).toEqual({
      name: 'settle.finish',
      sql: 'UPDATE `email_jobs` SET `processed_at` = ? WHERE `job_id` = ?',
      params: ['now', 'id'],
    });
    expect(statementText(mysql.settle.finish(everyRoleLeaseTable.spec, { fenced: true }))).toEqual({
      name: 'settle.finish',
      sql: 'UPDATE `email_jobs` SET `processed_at` = ?, `locked_until` = NULL WHERE `job_id` = ? AND `locked_until` = ?',
      params: ['now', 'id', 'held'],
    });
  });
});

describe('mysql settle.deadLetter', () => {
  it('moves the row into a group, its headers gaining the last error, on MariaDB too', () => {
    const target = { kind: 'group', group: 'dead' } as const;
    const expected = [
      {
        name: 'settle.deadLetter',
        sql: `UPDATE \`email_jobs\` SET \`queue\` = ?, \`locked_until\` = NULL, \`meta\` = ${META_WITH_LAST_ERROR} WHERE \`job_id\` = ? AND \`locked_until\` = ?`,
        params: ['destination', 'lastError', 'id', 'held'],
      },
    ];
    expect(mysql.settle.deadLetter(everyRoleLeaseTable.spec, everyRoleLeaseTable.columns, target, { fenced: true }).map(statementText)).toEqual(expected);
    expect(mariadb.settle.deadLetter(everyRoleLeaseTable.spec, everyRoleLeaseTable.columns, target, { fenced: true }).map(statementText)).toEqual(expected);
    expect(() => mysql.settle.deadLetter(minimalTable.spec, minimalTable.columns, target, { fenced: false })).toThrow(DeclarationError);
  });

  it('moves the row of a table without headers into a group as it is', () => {
    const target = { kind: 'group', group: 'dead' } as const;
    expect(mysql.settle.deadLetter(schemaQualifiedTable.spec, schemaQualifiedTable.columns, target, { fenced: true }).map(statementText)).toEqual([
      {
        name: 'settle.deadLetter',
        sql: 'UPDATE `app`.`jobs` SET `queue` = ?, `locked_until` = NULL WHERE `id` = ? AND `locked_until` = ?',
        params: ['destination', 'id', 'held'],
      },
    ]);
  });

  it('copies with the last error in the headers, then deletes, on MySQL and MariaDB alike', () => {
    const target = { kind: 'table', schema: undefined, name: 'email_jobs_dead' } as const;
    const copied = EVERY_ROLE_COLUMNS.replace('`meta`', META_WITH_LAST_ERROR);
    const expected = [
      {
        name: 'settle.deadLetter.copy',
        sql: `INSERT INTO \`email_jobs_dead\` (${EVERY_ROLE_COLUMNS}) SELECT ${copied} FROM \`email_jobs\` WHERE \`job_id\` = ?`,
        params: ['lastError', 'id'],
      },
      { name: 'settle.deadLetter.remove', sql: 'DELETE FROM `email_jobs` WHERE `job_id` = ?', params: ['id'] },
    ];
    expect(mariadb.settle.deadLetter(everyRoleTable.spec, everyRoleTable.columns, target, { fenced: false }).map(statementText)).toEqual(expected);
    expect(mysql.settle.deadLetter(everyRoleTable.spec, everyRoleTable.columns, target, { fenced: false }).map(statementText)).toEqual(expected);
  });

  it('fences both halves and writes NULL for the lease', () => {
    const target = { kind: 'table', schema: 'archive', name: 'jobs' } as const;
    expect(mysql.settle.deadLetter(schemaQualifiedTable.spec, schemaQualifiedTable.columns, target, { fenced: true }).map(statementText)).toEqual([
      {
        name: 'settle.deadLetter.copy',
        sql: 'INSERT INTO `archive`.`jobs` (`id`, `queue`, `locked_until`, `payload`) SELECT `id`, `queue`, NULL, `payload` FROM `app`.`jobs` WHERE `id` = ? AND `locked_until` = ?',
        params: ['id', 'held'],
      },
      {
        name: 'settle.deadLetter.remove',
        sql: 'DELETE FROM `app`.`jobs` WHERE `id` = ? AND `locked_until` = ?',
        params: ['id', 'held'],
      },
    ]);
  });

  it('refuses a destination that is not an identifier', () => {
    const target = { kind: 'table', schema: undefined, name: 'jobs`; DROP TABLE x' } as const;
    expect(() => mysql.settle.deadLetter(minimalTable.spec, minimalTable.columns, target, { fenced: false })).toThrow(DeclarationError);
  });
});

describe('mysql insert.rows', () => {
  it('returns ids on MariaDB only', () => {
    expect(statementText(mysql.insert.rows(everyRoleTable.spec, ['queue', 'payload'], 2))).toEqual({
      name: 'insert.rows',
      sql: 'INSERT INTO `email_jobs` (`queue`, `payload`) VALUES (?, ?), (?, ?)',
      params: ['column:queue', 'column:payload', 'column:queue', 'column:payload'],
    });
    expect(statementText(mariadb.insert.rows(everyRoleTable.spec, ['payload'], 1))).toEqual({
      name: 'insert.rows',
      sql: 'INSERT INTO `email_jobs` (`payload`) VALUES (?) RETURNING `job_id`',
      params: ['column:payload'],
    });
  });

  it('writes rows of defaults as empty value lists', () => {
    expect(statementText(mysql.insert.rows(minimalTable.spec, [], 3))).toEqual({
      name: 'insert.rows',
      sql: 'INSERT INTO `jobs` () VALUES (), (), ()',
      params: [],
    });
    expect(mariadb.insert.rows(minimalTable.spec, [], 1).sql).toBe('INSERT INTO `jobs` () VALUES () RETURNING `id`');
    expect(() => mysql.insert.rows(minimalTable.spec, [], 0)).toThrow(TypeError);
  });
});

describe('mysql schema.probeColumns', () => {
  it('selects every column of no row', () => {
    expect(statementText(mysql.schema.probeColumns(reservedWordTable.spec))).toEqual({
      name: 'schema.probeColumns',
      sql: 'SELECT * FROM `user`.`order` WHERE 1 = 0',
      params: [],
    });
  });
});

describe('mysql schema.createTable', () => {
  it('indexes the leases of any lease table when asked (inWorkIndex), every row, on both servers', () => {
    for (const dialect of [mysql, mariadb]) {
      expect(dialect.schema.createTable(minimalLeaseTable.spec, { inWorkIndex: true }).slice(1)).toEqual(['CREATE INDEX `jobs_in_work` ON `jobs` (`locked_until`)']);
      expect(dialect.schema.createTable(everyRoleLeaseTable.spec, { inWorkIndex: true }).at(-1)).toBe('CREATE INDEX `email_jobs_in_work` ON `email_jobs` (`queue`, `locked_until`)');
    }
  });

  it('indexes the leases of a FIFO lease table by group, every row (no partial indexes), on both servers', () => {
    for (const dialect of [mysql, mariadb]) {
      expect(dialect.schema.createTable(minimalFifoLeaseTable.spec).slice(1)).toEqual([
        'CREATE INDEX `jobs_claim_order` ON `app`.`jobs` (`queue`, `id`)',
        'CREATE INDEX `jobs_in_work` ON `app`.`jobs` (`queue`, `locked_until`)',
      ]);
      expect(dialect.schema.createTable(fifoTable.spec).slice(1)).toEqual([
        'CREATE INDEX `email_jobs_claim_order` ON `email_jobs` (`queue`, `processed_at`, `priority`, `retry_after`, `job_id`)',
      ]);
    }
  });

  it('renders every role for InnoDB, the text columns that name rows in the flavour\'s NO PAD binary collation', () => {
    const expected = (collation: string) => [
      `CREATE TABLE \`email_jobs\` (\`job_id\` BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, \`queue\` VARCHAR(255) CHARACTER SET utf8mb4 COLLATE ${collation} NOT NULL, \`priority\` SMALLINT NOT NULL DEFAULT 0, \`customer\` VARCHAR(255) CHARACTER SET utf8mb4 COLLATE ${collation} NULL, \`retry_after\` DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)), \`attempt\` SMALLINT NOT NULL DEFAULT 1, \`processed_at\` DATETIME(6) NULL, \`locked_until\` DATETIME NULL, \`meta\` JSON NULL, \`payload\` LONGBLOB NOT NULL) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`,
      'CREATE INDEX `email_jobs_claim_order` ON `email_jobs` (`queue`, `processed_at`, `priority`, `retry_after`, `job_id`)',
    ];
    expect(mysql.schema.createTable(everyRoleLeaseTable.spec).map(collapseWhitespace)).toEqual(expected('utf8mb4_0900_bin'));
    expect(mariadb.schema.createTable(everyRoleLeaseTable.spec).map(collapseWhitespace)).toEqual(expected('utf8mb4_nopad_bin'));
  });

  it('renders supplied ids in a schema, and no index the primary key already is', () => {
    expect(mysql.schema.createTable(schemaQualifiedTable.spec).map(collapseWhitespace)).toEqual([
      'CREATE TABLE `app`.`jobs` (`id` VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_0900_bin NOT NULL PRIMARY KEY, `queue` VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_0900_bin NOT NULL, `locked_until` DATETIME NULL, `payload` LONGBLOB NOT NULL) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4',
      'CREATE INDEX `jobs_claim_order` ON `app`.`jobs` (`queue`, `id`)',
    ]);
    expect(mysql.schema.createTable(minimalTable.spec)).toHaveLength(1);
  });

  it('shortens a long index name to 64 characters with a stable hash', () => {
    const long = 'q'.repeat(60);
    const [, index] = mysql.schema.createTable(createTableSpec({ table: long, id: 'id', priority: 'priority' }));
    const name = /^CREATE INDEX `([^`]+)`/.exec(index ?? '')?.[1] ?? '';
    expect(name).toMatch(/^q+_[0-9a-f]{8}_claim_order$/);
    expect(name).toHaveLength(64);
    const other = mysql.schema.createTable(createTableSpec({ table: `${'q'.repeat(59)}r`, id: 'id', priority: 'priority' }))[1];
    expect(other).not.toContain(name);
  });
});

describe('mysql schema.indexes', () => {
  it('reads the key columns of each index from information_schema, on both servers', () => {
    for (const dialect of [mysql, mariadb]) {
      expect(statementText(dialect.schema.indexes!.read(everyRoleLeaseTable.spec))).toEqual({
        name: 'schema.indexes.read',
        sql: "SELECT INDEX_NAME AS `index_name`, COLUMN_NAME AS `column_name` FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'email_jobs' ORDER BY INDEX_NAME, SEQ_IN_INDEX",
        params: [],
      });
      expect(dialect.schema.indexes!.read(minimalFifoLeaseTable.spec).sql).toContain("WHERE TABLE_SCHEMA = 'app' AND TABLE_NAME = 'jobs'");
    }
  });

  it('renders the in-work index createTableSql adds, over every row', () => {
    expect(mysql.schema.indexes!.renderInWorkIndex(minimalFifoLeaseTable.spec)).toBe('CREATE INDEX `jobs_in_work` ON `app`.`jobs` (`queue`, `locked_until`)');
  });
});

describe('mysql schema.textCollation', () => {
  const collation = mysql.schema.textCollation!;

  it('reads the collation, type and nullability of the group, partition key and a supplied id', () => {
    expect(statementText(collation.read(everyRoleLeaseTable.spec)!)).toEqual({
      name: 'schema.textCollation',
      sql: "SELECT COLUMN_NAME AS `column`, COLLATION_NAME AS `collation`, COLUMN_TYPE AS `type`, IS_NULLABLE AS `nullable` FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'email_jobs' AND COLUMN_NAME IN ('queue', 'customer') AND COLLATION_NAME IS NOT NULL ORDER BY ORDINAL_POSITION",
      params: [],
    });
    expect(statementText(mariadb.schema.textCollation!.read(schemaQualifiedTable.spec)!)).toEqual({
      name: 'schema.textCollation',
      sql: "SELECT COLUMN_NAME AS `column`, COLLATION_NAME AS `collation`, COLUMN_TYPE AS `type`, IS_NULLABLE AS `nullable` FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'app' AND TABLE_NAME = 'jobs' AND COLUMN_NAME IN ('id', 'queue') AND COLLATION_NAME IS NOT NULL ORDER BY ORDINAL_POSITION",
      params: [],
    });
  });

  it('reads nothing of a table whose rows are named by a generated id alone', () => {
    expect(collation.read(minimalLeaseTable.spec)).toBeUndefined();
  });

  it('tells what a collation ignores from its name: case, accents, trailing spaces (PAD SPACE)', () => {
    expect(collation.ignoredBy('utf8mb4_general_ci')).toEqual(['case', 'accents', 'trailing spaces']);
    expect(collation.ignoredBy('latin1_swedish_ci')).toEqual(['case', 'accents', 'trailing spaces']);
    expect(collation.ignoredBy('utf8mb4_0900_ai_ci')).toEqual(['case', 'accents']);
    expect(collation.ignoredBy('utf8mb4_0900_as_ci')).toEqual(['case']);
    expect(collation.ignoredBy('utf8mb4_general_nopad_ci')).toEqual(['case', 'accents']);
    expect(collation.ignoredBy('utf8mb4_uca1400_as_ci')).toEqual(['case', 'trailing spaces']);
    expect(collation.ignoredBy('utf8mb4_bin')).toEqual(['trailing spaces']);
    expect(collation.ignoredBy('UTF8MB4_BIN')).toEqual(['trailing spaces']);
    expect(collation.ignoredBy('utf8mb4_0900_as_cs')).toEqual(['differences between characters it weighs alike']);
    expect(collation.ignoredBy('utf8mb4_nopad_bin')).toEqual([]);
    expect(collation.ignoredBy('utf8mb4_0900_bin')).toEqual([]);
    expect(collation.ignoredBy('binary')).toEqual([]);
  });

  it("renders the fix in the flavour's exact collation, keeping the column's type and nullability", () => {
    expect(collation.renderFix(schemaQualifiedTable.spec, { name: 'queue', type: 'varchar(255)', isNullable: false })).toBe(
      'ALTER TABLE `app`.`jobs` MODIFY `queue` varchar(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_0900_bin NOT NULL',
    );
    expect(
      mariadb.schema.textCollation!.renderFix(everyRoleLeaseTable.spec, { name: 'customer', type: 'text', isNullable: true }),
    ).toBe('ALTER TABLE `email_jobs` MODIFY `customer` text CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NULL');
  });
});

describe('mysql validateTable', () => {
  it('WP-11: refuses FIFO row lock tables at serializable, naming the fix', () => {
    expect(() => mysql.validateTable(fifoSerializableTable.spec)).toThrow(UnsupportedError);
    expect(() => mariadb.validateTable(fifoSerializableTable.spec)).toThrow(/declare isolation: "read committed" or add lockedUntil/);
    const leaseAtSerializable = createTableSpec({
      table: 'jobs',
      id: 'id',
      group: { column: 'queue', fifo: true },
      lockedUntil: 'locked_until',
      isolation: 'serializable',
    });
    expect(() => mysql.validateTable(leaseAtSerializable)).not.toThrow();
    const atReadCommitted = createTableSpec({ table: 'jobs', id: 'id', group: { column: 'queue', fifo: true } });
    expect(() => mariadb.validateTable(atReadCommitted)).not.toThrow();
    expect(() => mysql.validateTable(everyRoleTable.spec)).not.toThrow();
  });
});

describe('mysql quoting', () => {
  it('doubles a backtick inside a name', () => {
    expect(BACKTICK_STYLE.quoteIdentifier('a`b')).toBe('`a``b`');
  });
});

describe('parseMysqlServerVersion', () => {
  it.each([
    ['8.0.36', { flavor: 'mysql', major: 8, minor: 0, patch: 36 }],
    ['8.4.0-log', { flavor: 'mysql', major: 8, minor: 4, patch: 0 }],
    ['10.11.19-MariaDB-0+deb12u1', { flavor: 'mariadb', major: 10, minor: 11, patch: 19 }],
    ['10.6.16-MariaDB-1:10.6.16+maria~ubu2004', { flavor: 'mariadb', major: 10, minor: 6, patch: 16 }],
    ['5.5.5-10.11.6-MariaDB', { flavor: 'mariadb', major: 10, minor: 11, patch: 6 }],
  ])('reads %s', (text, expected) => {
    expect(parseMysqlServerVersion(text)).toEqual(expected);
  });

  it.each(['garbage', '8.0', '', 'MariaDB'])('refuses %j as malformed, naming it', (text) => {
    expect(() => parseMysqlServerVersion(text)).toThrow(ServerVersionError);
    expect(() => parseMysqlServerVersion(text)).toThrow(JSON.stringify(text));
  });
});

describe('checkMysqlServerVersion', () => {
  it.each(['8.0.1', '8.0.36', '8.4.0-log', '10.6.0-MariaDB', '10.11.19-MariaDB-0+deb12u1', '11.4.2-MariaDB'])(
    'accepts %s',
    (text) => {
      expect(() => checkMysqlServerVersion(text)).not.toThrow();
    },
  );

  it('refuses servers without SKIP LOCKED, naming found and required versions', () => {
    expect(() => checkMysqlServerVersion('8.0.0')).toThrow(/MySQL 8\.0\.0 is older than MySQL 8\.0\.1/);
    expect(() => checkMysqlServerVersion('5.7.44-log')).toThrow(ServerVersionError);
    expect(() => checkMysqlServerVersion('10.5.23-MariaDB')).toThrow(/MariaDB 10\.5\.23 is older than MariaDB 10\.6\.0/);
    expect(() => checkMysqlServerVersion('8.0')).toThrow(ServerVersionError);
    expect(() => checkMysqlServerVersion('10.5.23-MariaDB')).toThrow(
      expect.objectContaining({ found: '10.5.23-MariaDB', required: 'MariaDB 10.6.0' }),
    );
  });
});

describe('mysql checkServerVersion', () => {
  it('checks the floor, and refuses the other flavour, whose capabilities differ', () => {
    expect(() => mysql.checkServerVersion('8.0.36')).not.toThrow();
    expect(() => mariadb.checkServerVersion('10.11.6-MariaDB')).not.toThrow();
    expect(() => mysql.checkServerVersion('5.7.44')).toThrow(ServerVersionError);
    expect(() => mysql.checkServerVersion('10.11.6-MariaDB')).toThrow(
      new DeclarationError('the server is MariaDB (version "10.11.6-MariaDB"), but the dialect follows the built-in mysql one; base it on "mariadb" instead'),
    );
    expect(() => mariadb.checkServerVersion('8.0.36')).toThrow('the server is MySQL (version "8.0.36"), but the dialect follows the built-in mariadb one');
  });
});
