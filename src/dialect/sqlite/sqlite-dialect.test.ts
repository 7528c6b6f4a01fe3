import { describe, expect, it } from 'vitest';
import { DeclarationError, ServerVersionError, UnsupportedError } from '../../errors.js';
import { createTableSpec } from '../../table/table-spec.js';
import {
  advisoryKeyTable,
  collapseWhitespace,
  everyRoleLeaseTable,
  everyRoleTable,
  fifoLeaseTable,
  minimalFifoLeaseTable,
  minimalLeaseTable,
  minimalTable,
  reservedWordTable,
  schemaQualifiedTable,
  statementText,
} from '../test-tables.fixture.js';
import { checkSqliteVersion, createSqliteDialect } from './sqlite-dialect.js';

const sqlite = createSqliteDialect();
const EVERY_LEASE_COLUMNS =
  '`job_id`, `queue`, `priority`, `customer`, `retry_after`, `attempt`, `processed_at`, `locked_until`, `meta`, `payload`';
/** The fixture's headers column `meta` as a dead letter writes it, the last error bound at the one `?`. */
const META_WITH_LAST_ERROR =
  "CASE WHEN json_valid(COALESCE(NULLIF(`meta`, ''), '{}')) THEN CASE json_type(COALESCE(NULLIF(`meta`, ''), '{}')) " +
  "WHEN 'object' THEN json_set(COALESCE(NULLIF(`meta`, ''), '{}'), '$.\"tablequeue-last-error\"', ?) ELSE `meta` END ELSE `meta` END";

describe('sqlite capabilities', () => {
  it('has one writer, shares its session with the service, no row locks, and returns the counted attempt from the lease claim', () => {
    expect(sqlite.capabilities).toMatchObject({
      supportsRowLock: false,
      hasSingleWriter: true,
      sharesSessionWithService: true,
      leaseClaimReturnsCountedAttempt: true,
      isolationLevels: [],
    });
  });
});

describe('sqlite session', () => {
  it('begins immediate by default, or in the declared mode', () => {
    expect(sqlite.session.begin().map(statementText)).toEqual([{ name: 'session.begin', sql: 'BEGIN IMMEDIATE', params: [] }]);
    expect(sqlite.session.begin({ sqliteBegin: 'deferred' })[0]?.sql).toBe('BEGIN DEFERRED');
    expect(sqlite.session.begin({ sqliteBegin: 'exclusive' })[0]?.sql).toBe('BEGIN EXCLUSIVE');
  });

  it('refuses an isolation level, and a begin mode that is not one', () => {
    expect(() => sqlite.session.begin({ isolation: 'read committed' })).toThrow(UnsupportedError);
    expect(() => sqlite.session.begin({ sqliteBegin: 'now' as 'immediate' })).toThrow(DeclarationError);
  });

  it('commits, rolls back and reads sqlite_version()', () => {
    expect(statementText(sqlite.session.commit())).toEqual({ name: 'session.commit', sql: 'COMMIT', params: [] });
    expect(statementText(sqlite.session.rollback())).toEqual({ name: 'session.rollback', sql: 'ROLLBACK', params: [] });
    expect(statementText(sqlite.session.serverVersion())).toEqual({
      name: 'session.serverVersion',
      sql: 'SELECT sqlite_version() AS version',
      params: [],
    });
  });
});

describe('sqlite rowLock', () => {
  it('refuses every row lock statement, saying to add lockedUntil', () => {
    expect(() => sqlite.rowLock.claim(everyRoleTable.spec, everyRoleTable.columns)).toThrow(UnsupportedError);
    expect(() => sqlite.rowLock.claim(everyRoleTable.spec, everyRoleTable.columns)).toThrow(/add a lockedUntil column/);
    expect(() => sqlite.rowLock.retry(everyRoleTable.spec)).toThrow(UnsupportedError);
    expect(() => sqlite.rowLock.retryAfter(everyRoleTable.spec)).toThrow(UnsupportedError);
  });
});

describe('sqlite lease.claim', () => {
  it('stamps in one UPDATE … RETURNING and returns the rows as written', () => {
    const claim = sqlite.lease.claim(everyRoleLeaseTable.spec, everyRoleLeaseTable.columns);
    if (claim.kind !== 'single') throw new Error('expected one statement');
    expect(statementText(claim.statement)).toEqual({
      name: 'lease.claim',
      sql: `UPDATE \`email_jobs\` SET \`locked_until\` = ?, \`attempt\` = \`attempt\` + 1 WHERE \`job_id\` IN (SELECT \`job_id\` FROM \`email_jobs\` WHERE \`queue\` = ? AND \`retry_after\` <= ? AND \`processed_at\` IS NULL AND (\`locked_until\` IS NULL OR \`locked_until\` <= ?) ORDER BY \`priority\`, \`retry_after\`, \`job_id\` LIMIT ?) RETURNING ${EVERY_LEASE_COLUMNS}`,
      params: ['lockedUntil', 'group', 'now', 'leaseNow', 'limit'],
    });
  });

  it('stamps only the lease on a minimal table', () => {
    const claim = sqlite.lease.claim(minimalLeaseTable.spec, minimalLeaseTable.columns);
    if (claim.kind !== 'single') throw new Error('expected one statement');
    expect(statementText(claim.statement)).toEqual({
      name: 'lease.claim',
      sql: 'UPDATE `jobs` SET `locked_until` = ? WHERE `id` IN (SELECT `id` FROM `jobs` WHERE (`locked_until` IS NULL OR `locked_until` <= ?) ORDER BY `id` LIMIT ?) RETURNING `id`, `body`, `locked_until`',
      params: ['lockedUntil', 'leaseNow', 'limit'],
    });
  });

  it('quotes reserved words with backticks', () => {
    const claim = sqlite.lease.claim(reservedWordTable.spec, reservedWordTable.columns);
    if (claim.kind !== 'single') throw new Error('expected one statement');
    expect(statementText(claim.statement)).toEqual({
      name: 'lease.claim',
      sql: 'UPDATE `user`.`order` SET `where` = ?, `limit` = `limit` + 1 WHERE `select` IN (SELECT `select` FROM `user`.`order` WHERE `group` = ? AND `from` <= ? AND (`where` IS NULL OR `where` <= ?) ORDER BY `from`, `select` LIMIT ?) RETURNING `select`, `group`, `from`, `limit`, `where`, `table`',
      params: ['lockedUntil', 'group', 'now', 'leaseNow', 'limit'],
    });
  });

  it('WP-11: stamps only the head of a FIFO group, while no row of its group is in work, one row whatever the limit', () => {
    const claim = sqlite.lease.claim(fifoLeaseTable.spec, fifoLeaseTable.columns);
    if (claim.kind !== 'single') throw new Error('expected one statement');
    expect(claim.guarded).toBeUndefined();
    expect(statementText(claim.statement)).toEqual({
      name: 'lease.claim',
      sql: `UPDATE \`email_jobs\` SET \`locked_until\` = ?, \`attempt\` = \`attempt\` + 1 WHERE \`job_id\` IN (SELECT \`job_id\` FROM \`email_jobs\` WHERE \`job_id\` = (SELECT \`job_id\` FROM \`email_jobs\` WHERE \`queue\` = ? AND \`processed_at\` IS NULL ORDER BY \`priority\`, \`retry_after\`, \`job_id\` LIMIT 1) AND \`queue\` = ? AND \`retry_after\` <= ? AND \`processed_at\` IS NULL AND (\`locked_until\` IS NULL OR \`locked_until\` <= ?) AND (SELECT MAX(tablequeue_work.\`locked_until\`) FROM \`email_jobs\` AS tablequeue_work WHERE tablequeue_work.\`queue\` = ? AND tablequeue_work.\`locked_until\` > ?) IS NULL) RETURNING ${EVERY_LEASE_COLUMNS}`,
      params: ['lockedUntil', 'group', 'group', 'now', 'leaseNow', 'group', 'leaseNow'],
    });
  });

  it('WP-11: counts every row of the group as unfinished on a table that deletes finished rows', () => {
    const claim = sqlite.lease.claim(minimalFifoLeaseTable.spec, minimalFifoLeaseTable.columns);
    if (claim.kind !== 'single') throw new Error('expected one statement');
    expect(statementText(claim.statement)).toEqual({
      name: 'lease.claim',
      sql: 'UPDATE `app`.`jobs` SET `locked_until` = ? WHERE `id` IN (SELECT `id` FROM `app`.`jobs` WHERE `id` = (SELECT `id` FROM `app`.`jobs` WHERE `queue` = ? ORDER BY `id` LIMIT 1) AND `queue` = ? AND (`locked_until` IS NULL OR `locked_until` <= ?) AND (SELECT MAX(tablequeue_work.`locked_until`) FROM `app`.`jobs` AS tablequeue_work WHERE tablequeue_work.`queue` = ? AND tablequeue_work.`locked_until` > ?) IS NULL) RETURNING `id`, `queue`, `locked_until`',
      params: ['lockedUntil', 'group', 'group', 'leaseNow', 'group', 'leaseNow'],
    });
  });
});

describe('sqlite fifo.guard', () => {
  it('WP-11: needs no guard: the single writer runs one claim statement at a time', () => {
    expect(sqlite.fifo.guard(fifoLeaseTable.spec)).toBeUndefined();
    expect(sqlite.fifo.guard(minimalFifoLeaseTable.spec)).toBeUndefined();
  });
});

describe('sqlite lease settlements', () => {
  const spec = everyRoleLeaseTable.spec;

  it('releases, delays and extends under the held token', () => {
    expect(statementText(sqlite.lease.release(spec))).toEqual({
      name: 'lease.release',
      sql: 'UPDATE `email_jobs` SET `locked_until` = NULL WHERE `job_id` = ? AND `locked_until` = ?',
      params: ['id', 'held'],
    });
    expect(statementText(sqlite.lease.retryAfter(spec)!)).toEqual({
      name: 'lease.retryAfter',
      sql: 'UPDATE `email_jobs` SET `retry_after` = ?, `locked_until` = NULL WHERE `job_id` = ? AND `locked_until` = ?',
      params: ['retryAfterAt', 'id', 'held'],
    });
    expect(statementText(sqlite.lease.extend(spec))).toEqual({
      name: 'lease.extend',
      sql: 'UPDATE `email_jobs` SET `locked_until` = ? WHERE `job_id` = ? AND `locked_until` = ?',
      params: ['lockedUntil', 'id', 'held'],
    });
    expect(sqlite.lease.retryAfter(minimalLeaseTable.spec)).toBeUndefined();
  });
});

describe('sqlite settle.finish', () => {
  it('deletes or marks under the held token', () => {
    expect(statementText(sqlite.settle.finish(minimalLeaseTable.spec, { fenced: true }))).toEqual({
      name: 'settle.finish',
      sql: 'DELETE FROM `jobs` WHERE `id` = ? AND `locked_until` = ?',
      params: ['id', 'held'],
    });
    expect(statementText(sqlite.settle.finish(everyRoleLeaseTable.spec, { fenced: true }))).toEqual({
      name: 'settle.finish',
      sql: 'UPDATE `email_jobs` SET `processed_at` = ?, `locked_until` = NULL WHERE `job_id` = ? AND `locked_until` = ?',
      params: ['now', 'id', 'held'],
    });
  });
});

describe('sqlite settle.deadLetter', () => {
  it('moves the row into a group, its headers gaining the last error', () => {
    const target = { kind: 'group', group: 'dead' } as const;
    expect(sqlite.settle.deadLetter(everyRoleLeaseTable.spec, everyRoleLeaseTable.columns, target, { fenced: true }).map(statementText)).toEqual([
      {
        name: 'settle.deadLetter',
        sql: `UPDATE \`email_jobs\` SET \`queue\` = ?, \`locked_until\` = NULL, \`meta\` = ${META_WITH_LAST_ERROR} WHERE \`job_id\` = ? AND \`locked_until\` = ?`,
        params: ['destination', 'lastError', 'id', 'held'],
      },
    ]);
    expect(() => sqlite.settle.deadLetter(minimalLeaseTable.spec, minimalLeaseTable.columns, target, { fenced: true })).toThrow(DeclarationError);
  });

  it('moves the row of a table without headers into a group as it is', () => {
    const target = { kind: 'group', group: 'dead' } as const;
    expect(sqlite.settle.deadLetter(schemaQualifiedTable.spec, schemaQualifiedTable.columns, target, { fenced: true }).map(statementText)).toEqual([
      {
        name: 'settle.deadLetter',
        sql: 'UPDATE `app`.`jobs` SET `queue` = ?, `locked_until` = NULL WHERE `id` = ? AND `locked_until` = ?',
        params: ['destination', 'id', 'held'],
      },
    ]);
  });

  it('copies with NULL for the lease and the last error in the headers, then deletes, both fenced', () => {
    const target = { kind: 'table', schema: undefined, name: 'email_jobs_dead' } as const;
    const copied = EVERY_LEASE_COLUMNS.replace('`locked_until`', 'NULL').replace('`meta`', META_WITH_LAST_ERROR);
    expect(sqlite.settle.deadLetter(everyRoleLeaseTable.spec, everyRoleLeaseTable.columns, target, { fenced: true }).map(statementText)).toEqual([
      {
        name: 'settle.deadLetter.copy',
        sql: `INSERT INTO \`email_jobs_dead\` (${EVERY_LEASE_COLUMNS}) SELECT ${copied} FROM \`email_jobs\` WHERE \`job_id\` = ? AND \`locked_until\` = ?`,
        params: ['lastError', 'id', 'held'],
      },
      {
        name: 'settle.deadLetter.remove',
        sql: 'DELETE FROM `email_jobs` WHERE `job_id` = ? AND `locked_until` = ?',
        params: ['id', 'held'],
      },
    ]);
  });

  it('copies with NULL for the lease, then deletes, both fenced', () => {
    const target = { kind: 'table', schema: undefined, name: 'jobs_dead' } as const;
    expect(sqlite.settle.deadLetter(minimalLeaseTable.spec, minimalLeaseTable.columns, target, { fenced: true }).map(statementText)).toEqual([
      {
        name: 'settle.deadLetter.copy',
        sql: 'INSERT INTO `jobs_dead` (`id`, `body`, `locked_until`) SELECT `id`, `body`, NULL FROM `jobs` WHERE `id` = ? AND `locked_until` = ?',
        params: ['id', 'held'],
      },
      { name: 'settle.deadLetter.remove', sql: 'DELETE FROM `jobs` WHERE `id` = ? AND `locked_until` = ?', params: ['id', 'held'] },
    ]);
  });
});

describe('sqlite insert.rows', () => {
  it('inserts rows and returns the ids', () => {
    expect(statementText(sqlite.insert.rows(schemaQualifiedTable.spec, ['id', 'queue', 'payload'], 2))).toEqual({
      name: 'insert.rows',
      sql: 'INSERT INTO `app`.`jobs` (`id`, `queue`, `payload`) VALUES (?, ?, ?), (?, ?, ?) RETURNING `id`',
      params: ['column:id', 'column:queue', 'column:payload', 'column:id', 'column:queue', 'column:payload'],
    });
  });

  it('writes one row of defaults with DEFAULT VALUES', () => {
    expect(statementText(sqlite.insert.rows(minimalLeaseTable.spec, [], 1))).toEqual({
      name: 'insert.rows',
      sql: 'INSERT INTO `jobs` DEFAULT VALUES RETURNING `id`',
      params: [],
    });
    expect(() => sqlite.insert.rows(minimalLeaseTable.spec, [], 2)).toThrow(TypeError);
    expect(() => sqlite.insert.rows(minimalLeaseTable.spec, ['body'], 0)).toThrow(TypeError);
  });
});

describe('sqlite schema.probeColumns', () => {
  it('selects every column of no row', () => {
    expect(statementText(sqlite.schema.probeColumns(minimalLeaseTable.spec))).toEqual({
      name: 'schema.probeColumns',
      sql: 'SELECT * FROM `jobs` WHERE 1 = 0',
      params: [],
    });
  });
});

describe('sqlite schema.indexes', () => {
  it('reads the key columns of each index through the pragma functions, the schema as their last argument', () => {
    expect(statementText(sqlite.schema.indexes!.read(minimalFifoLeaseTable.spec))).toEqual({
      name: 'schema.indexes.read',
      sql: "SELECT l.name AS `index_name`, i.name AS `column_name` FROM pragma_index_list('jobs', 'app') AS l, pragma_index_info(l.name, 'app') AS i ORDER BY l.name, i.seqno",
      params: [],
    });
    expect(sqlite.schema.indexes!.read(minimalLeaseTable.spec).sql).toBe(
      "SELECT l.name AS `index_name`, i.name AS `column_name` FROM pragma_index_list('jobs') AS l, pragma_index_info(l.name) AS i ORDER BY l.name, i.seqno",
    );
  });

  it('renders the in-work index createTableSql adds', () => {
    expect(sqlite.schema.indexes!.renderInWorkIndex(minimalFifoLeaseTable.spec)).toBe(
      'CREATE INDEX `app`.`jobs_in_work` ON `jobs` (`queue`, `locked_until`) WHERE `locked_until` IS NOT NULL',
    );
  });
});

describe('sqlite schema.createTable', () => {
  it('indexes the leases of any lease table when asked (inWorkIndex), partially', () => {
    expect(sqlite.schema.createTable(minimalLeaseTable.spec, { inWorkIndex: true }).slice(1)).toEqual([
      'CREATE INDEX `jobs_in_work` ON `jobs` (`locked_until`) WHERE `locked_until` IS NOT NULL',
    ]);
  });

  it('indexes the leases of a FIFO lease table by group, partially, the schema on the index', () => {
    expect(sqlite.schema.createTable(minimalFifoLeaseTable.spec).slice(1)).toEqual([
      'CREATE INDEX `app`.`jobs_claim_order` ON `jobs` (`queue`, `id`)',
      'CREATE INDEX `app`.`jobs_in_work` ON `jobs` (`queue`, `locked_until`) WHERE `locked_until` IS NOT NULL',
    ]);
  });

  it('stores times as fixed-width UTC text and indexes unfinished rows only', () => {
    expect(sqlite.schema.createTable(everyRoleLeaseTable.spec).map(collapseWhitespace)).toEqual([
      "CREATE TABLE `email_jobs` (`job_id` INTEGER PRIMARY KEY AUTOINCREMENT, `queue` TEXT NOT NULL, `priority` INTEGER NOT NULL DEFAULT 0, `customer` TEXT, `retry_after` TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now')), `attempt` INTEGER NOT NULL DEFAULT 1, `processed_at` TEXT, `locked_until` TEXT, `meta` TEXT, `payload` BLOB NOT NULL)",
      'CREATE INDEX `email_jobs_claim_order` ON `email_jobs` (`queue`, `priority`, `retry_after`, `job_id`) WHERE `processed_at` IS NULL',
    ]);
  });

  it('names the schema on the index, not on the indexed table', () => {
    expect(sqlite.schema.createTable(schemaQualifiedTable.spec).map(collapseWhitespace)).toEqual([
      'CREATE TABLE `app`.`jobs` (`id` TEXT NOT NULL PRIMARY KEY, `queue` TEXT NOT NULL, `locked_until` TEXT, `payload` BLOB NOT NULL)',
      'CREATE INDEX `app`.`jobs_claim_order` ON `jobs` (`queue`, `id`)',
    ]);
  });

  it('adds advisory key columns and leaves out an index the primary key already is', () => {
    expect(sqlite.schema.createTable(advisoryKeyTable.spec).map(collapseWhitespace)).toEqual([
      'CREATE TABLE `jobs` (`id` INTEGER PRIMARY KEY AUTOINCREMENT, `payload` BLOB NOT NULL, `tenant` TEXT)',
    ]);
    expect(sqlite.schema.createTable(minimalTable.spec)).toHaveLength(1);
  });
});

describe('sqlite validateTable', () => {
  it('refuses a row lock table, saying to add lockedUntil', () => {
    expect(() => sqlite.validateTable(minimalTable.spec)).toThrow(UnsupportedError);
    expect(() => sqlite.validateTable(everyRoleTable.spec)).toThrow(/add a lockedUntil column \(lease form\)/);
  });

  it('refuses an isolation level', () => {
    const spec = createTableSpec({ table: 'jobs', id: 'id', lockedUntil: 'locked_until', isolation: 'serializable' });
    expect(() => sqlite.validateTable(spec)).toThrow(UnsupportedError);
  });

  it('accepts lease and advisory tables', () => {
    expect(() => sqlite.validateTable(everyRoleLeaseTable.spec)).not.toThrow();
    expect(() => sqlite.validateTable(advisoryKeyTable.spec)).not.toThrow();
  });
});

describe('checkSqliteVersion', () => {
  it('accepts 3.35.0 and later', () => {
    expect(checkSqliteVersion('3.35.0')).toEqual({ major: 3, minor: 35, patch: 0 });
    expect(checkSqliteVersion('3.53.2')).toEqual({ major: 3, minor: 53, patch: 2 });
  });

  it('refuses older or unreadable versions, naming what it found', () => {
    expect(() => checkSqliteVersion('3.34.1')).toThrow(/SQLite 3\.34\.1 is older than SQLite 3\.35\.0/);
    expect(() => checkSqliteVersion('3.35')).toThrow(ServerVersionError);
    expect(() => checkSqliteVersion('garbage')).toThrow(/"garbage"/);
  });
});
