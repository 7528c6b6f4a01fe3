import { DeclarationError, UnsupportedError } from '../../errors.js';
import type { Statement } from '../../statement.js';
import type { IsolationLevel, TableSpec } from '../../table/table-spec.js';
import { mysqlCapabilities } from '../capabilities.js';
import {
  isFifo,
  keyFreed,
  leaseIsFree,
  candidatesThenLockSelect,
  passesRowsItCannotTake,
  refuseUnbuiltClaims,
  skipLockedSelect,
  tableOf,
} from '../claim-clauses.js';
import { MYSQL_CLOCK, nowOf } from '../database-clock.js';
import {
  DIALECT_INTERFACE_VERSION,
  GROUP_GUARD_COLUMN,
  type Dialect,
  type InsertOptions,
  type LeaseClaim,
  type LeaseClaimOptions,
  type LeaseSettleManyRequest,
  type TableColumns,
  type CreateTableOptions,
} from '../dialect.js';
import { MYSQL_HEADERS_WITH_LAST_ERROR } from '../last-error-header.js';
import { renderPairedSettleMany } from '../lease-settle-many.js';
import {
  createLeaseSettlements,
  createRowLockStatements,
  createSavepointStatements,
  createSettleStatements,
  isolationLevelSql,
  leaseStampAssignments,
  leaseStampOfIds,
  refuseSqliteBeginMode,
  renderInsertRows,
  renderProbeColumns,
} from '../portable-statements.js';
import { createDedupeStatements } from '../dedupe-statements.js';
import { MYSQL_FIFO_GUARD_ROWS } from '../fifo-guard-statements.js';
import { BACKTICK_STYLE, identifier, joinSql, param, renderStatement, sql, type SqlStyle } from '../quoting.js';
import { parseDottedVersion, requireVersion, unreadableVersion, type VersionNumber } from '../server-version.js';
import { createMysqlAdvisoryStatements } from './mysql-advisory.js';
import { createMysqlTextCollation } from './mysql-collation.js';
import { MYSQL_INDEX_STATEMENTS, renderMysqlCreateTable } from './mysql-ddl.js';

const style: SqlStyle = { ...BACKTICK_STYLE, clock: MYSQL_CLOCK };

/** MySQL 8 and MariaDB 10.6+: one dialect; what MariaDB adds shows in the capabilities only. */
export function createMysqlDialect(options: { mariadb: boolean }): Dialect {
  const database = options.mariadb ? 'mariadb' : 'mysql';
  const capabilities = mysqlCapabilities(options);
  const begin = (isolation: IsolationLevel = 'read committed'): Statement[] => [
    renderStatement(style, 'session.isolation', sql`SET TRANSACTION ISOLATION LEVEL ${isolationLevelSql(isolation)}`),
    renderStatement(style, 'session.begin', sql`START TRANSACTION`),
  ];
  return Object.freeze({
    interfaceVersion: DIALECT_INTERFACE_VERSION,
    name: 'mysql',
    label: database,
    basedOn: database,
    capabilities,
    session: Object.freeze({
      // SET TRANSACTION applies to the next transaction only, so each begin names its level.
      begin: (beginOptions?: { isolation?: IsolationLevel | undefined }) => begin(beginOptions?.isolation),
      commit: () => renderStatement(style, 'session.commit', sql`COMMIT`),
      rollback: () => renderStatement(style, 'session.rollback', sql`ROLLBACK`),
      ...createSavepointStatements(style),
      serverVersion: () => renderStatement(style, 'session.serverVersion', sql`SELECT VERSION() AS version`),
    }),
    rowLock: Object.freeze({
      ...createRowLockStatements(style, database),
      claim: (spec: TableSpec, columns: TableColumns) => {
        refuseUnbuiltClaims(spec, database);
        const select = passesRowsItCannotTake(spec) ? candidatesThenLockSelect(spec, columns) : skipLockedSelect(spec, columns, 'rowLock');
        return renderStatement(style, 'rowLock.claim', select);
      },
      finishMany: (spec: TableSpec, rowCount: number) => renderRowLockFinishMany(spec, rowCount),
    }),
    lease: Object.freeze({
      // Without UPDATE … RETURNING the claim reads with row locks, then stamps each row. READ
      // COMMITTED whatever the table declares: no gap locks, so publishers are never blocked.
      claim: (spec: TableSpec, columns: TableColumns, claimOptions?: LeaseClaimOptions): LeaseClaim => {
        refuseUnbuiltClaims(spec, database);
        const select = renderStatement(style, 'lease.claim', skipLockedSelect(spec, columns, 'lease', claimOptions));
        const stamp = renderLeaseStamp(spec);
        const guard = renderGroupGuard(spec);
        const stampAll = (rowCount: number) => renderLeaseStampAll(spec, rowCount);
        const claim = { kind: 'selectThenStamp', begin: begin('read committed'), select, stamp, stampAll } as const;
        return guard === undefined ? claim : { ...claim, guard };
      },
      ...createLeaseSettlements(style),
      // The locking select and its write run at READ COMMITTED, as the claims do: no gap locks.
      settleMany: (spec: TableSpec, _columns: TableColumns, request: LeaseSettleManyRequest) =>
        renderPairedSettleMany(
          {
            style,
            updateReturns: capabilities.supportsUpdateReturning,
            deleteReturns: capabilities.supportsDeleteReturning,
            begin: () => begin('read committed'),
          },
          spec,
          request,
        ),
    }),
    fifo: Object.freeze({ guard: (spec: TableSpec) => renderGroupGuard(spec) }),
    advisory: createMysqlAdvisoryStatements(options),
    // MariaDB's DELETE … RETURNING cannot feed an INSERT, so both flavours copy then delete.
    settle: Object.freeze(createSettleStatements(style, MYSQL_HEADERS_WITH_LAST_ERROR)),
    dedupe: createDedupeStatements(style, 'error'),
    insert: Object.freeze({
      rows: (spec: TableSpec, columns: readonly string[], rowCount: number, insertOptions?: InsertOptions) => {
        if (insertOptions?.skipHeldKeys === true) {
          throw new TypeError('insert.rows cannot skip held dedupe keys on MySQL or MariaDB: a held key fails the insert (errno 1062)');
        }
        return renderInsertRows(
          style,
          spec,
          columns,
          rowCount,
          { returnsId: capabilities.supportsInsertReturning, rowOfDefaults: 'emptyValueLists' },
          insertOptions,
        );
      },
    }),
    schema: Object.freeze({
      probeColumns: (spec: TableSpec) => renderProbeColumns(style, spec),
      createTable: (spec: TableSpec, tableOptions?: CreateTableOptions) => renderMysqlCreateTable(spec, options, tableOptions),
      textCollation: createMysqlTextCollation(options),
      indexes: MYSQL_INDEX_STATEMENTS,
    }),
    validateTable: (spec: TableSpec) => {
      refuseFifoRowLockAtSerializable(spec, database);
      refuseSqliteBeginMode(spec, database);
    },
    checkServerVersion: (version: string) => checkFlavour(version, database),
  });
}

/**
 * The floor of the server's flavour, and the flavour itself: the two differ in what returns rows
 * (capabilities), so a dialect of one on a server of the other would leave a statement unused or
 * run one the server cannot.
 */
function checkFlavour(version: string, flavour: 'mysql' | 'mariadb'): void {
  const found = checkMysqlServerVersion(version);
  if (found.flavor === flavour) return;
  throw new DeclarationError(
    `the server is ${found.flavor === 'mariadb' ? 'MariaDB' : 'MySQL'} (version ${JSON.stringify(String(version))}), but the dialect follows the built-in ${flavour} one; base it on "${found.flavor}" instead`,
  );
}

/**
 * Stamps one selected row. The row is locked by the select already; the lease condition is
 * repeated so a stamp can never overwrite a live lease, whatever ran before it.
 */
function renderLeaseStamp(spec: TableSpec): Statement {
  return renderStatement(
    style,
    'lease.stamp',
    sql`UPDATE ${tableOf(spec)} SET ${leaseStampAssignments(spec)} WHERE ${identifier(spec.id.column)} = ${param('id')} AND ${leaseIsFree(spec)}`,
  );
}

/**
 * Stamps every row a claim selected in one statement: a claim of a row per worker or of a batch
 * otherwise spends a round trip per row while the claim, the only one in flight on these tables
 * (WP-7), holds its locks.
 */
function renderLeaseStampAll(spec: TableSpec, rowCount: number): Statement {
  return renderStatement(style, 'lease.stampAll', leaseStampOfIds(spec, rowCount, 'lease.stampAll'));
}

/** The derived table of a batch's finished ids, and its one column: names no queue table uses. */
const FINISHED_ROWS = 'tablequeue_finished';
const FINISHED_ID = 'tablequeue_id';

/**
 * The finishes (ack, drop) of a batch's rows, which the claim's transaction holds locked, in one
 * statement that never waits: the ids as a derived table read first (STRAIGHT_JOIN), then one
 * unique lookup of the primary key per id (FORCE INDEX, so eq_ref), which locks only the row it
 * finds, one this transaction holds already. Without either the optimizer scans the table where
 * its statistics count few rows (an `IN (…)` list below about 1,000 rows on MariaDB 10.11 with
 * 128 ids; the join's inner table below about 3), and a DELETE's scan at READ COMMITTED waits
 * for every row another claim holds: two such scans wait for each other (228 deadlocks in 30
 * drains of 800 rows, 16 claims of 100 at a time, with `IN (…)`; none in 100 with this one). A
 * padded id is the same row found twice, deleted or updated once.
 */
function renderRowLockFinishMany(spec: TableSpec, rowCount: number): Statement {
  if (!Number.isInteger(rowCount) || rowCount < 1) {
    throw new TypeError(`rowLock.finishMany needs a whole number of rows of at least 1, got ${rowCount}`);
  }
  const table = tableOf(spec);
  const ids = joinSql(
    Array.from({ length: rowCount }, (_, index) =>
      index === 0 ? sql`SELECT ${param('id')} AS ${identifier(FINISHED_ID)}` : sql`SELECT ${param('id')}`,
    ),
    ' UNION ALL ',
  );
  const finished = identifier(FINISHED_ROWS);
  const rows = sql`(${ids}) AS ${finished} STRAIGHT_JOIN ${table} FORCE INDEX (PRIMARY) ON ${table}.${identifier(spec.id.column)} = ${finished}.${identifier(FINISHED_ID)}`;
  if (spec.processedAt === undefined) return renderStatement(style, 'rowLock.finishMany', sql`DELETE ${table} FROM ${rows}`);
  const assignments = joinSql([sql`${identifier(spec.processedAt)} = ${nowOf(spec)}`, ...keyFreed(spec)], ', ');
  return renderStatement(style, 'rowLock.finishMany', sql`UPDATE ${rows} SET ${assignments}`);
}

/**
 * The FIFO group guard: the claim owns the group only if it can lock the group's guard row
 * (dialect/fifo-guard-statements.ts), which it then holds until its transaction ends.
 */
function renderGroupGuard(spec: TableSpec): Statement | undefined {
  if (!isFifo(spec)) return undefined;
  return MYSQL_FIFO_GUARD_ROWS.guard(spec, GROUP_GUARD_COLUMN);
}

/**
 * A FIFO group in the row lock form at SERIALIZABLE: InnoDB turns the plain reads of such a claim
 * (the head lookup) into locking reads, which wait behind the row a held claim locks instead of
 * passing it. Lease claims always run at READ COMMITTED.
 */
function refuseFifoRowLockAtSerializable(spec: TableSpec, database: string): void {
  if (spec.group?.fifo !== true || spec.form !== 'rowLock' || spec.isolation !== 'serializable') return;
  throw new UnsupportedError({
    database,
    feature: 'fifo groups at serializable',
    message: `table "${spec.qualifiedName}" has a FIFO group in the row lock form at serializable, where the group guard cannot work on ${database}; declare isolation: "read committed" or add lockedUntil for the lease form`,
  });
}

export interface MysqlServerVersion extends VersionNumber {
  readonly flavor: 'mysql' | 'mariadb';
}

const MYSQL_FLOOR: VersionNumber = { major: 8, minor: 0, patch: 1 };
const MARIADB_FLOOR: VersionNumber = { major: 10, minor: 6, patch: 0 };
const REQUIRED = 'MySQL 8.0.1 or MariaDB 10.6';

/**
 * Reads `SELECT VERSION()`: `8.0.36`, `8.4.0-log`, `10.11.6-MariaDB-1:10.11.6+maria~ubu2204`.
 * MariaDB before 11 may report `5.5.5-10.11.6-MariaDB`: the prefix made old replication clients,
 * which expected a 5.x server, accept it.
 */
export function parseMysqlServerVersion(text: string): MysqlServerVersion {
  const trimmed = String(text).trim();
  const flavor = /mariadb/i.test(trimmed) ? 'mariadb' : 'mysql';
  const version = parseDottedVersion(flavor === 'mariadb' ? trimmed.replace(/^5\.5\.5-/, '') : trimmed);
  if (version === undefined) {
    throw unreadableVersion({ product: 'MySQL or MariaDB', found: String(text), required: REQUIRED });
  }
  return { flavor, ...version };
}

/** Refuses servers without `FOR UPDATE SKIP LOCKED`: MySQL before 8.0.1, MariaDB before 10.6. */
export function checkMysqlServerVersion(text: string): MysqlServerVersion {
  const version = parseMysqlServerVersion(text);
  const isMariadb = version.flavor === 'mariadb';
  requireVersion({
    product: isMariadb ? 'MariaDB' : 'MySQL',
    found: String(text),
    version,
    floor: isMariadb ? MARIADB_FLOOR : MYSQL_FLOOR,
    why: 'FOR UPDATE SKIP LOCKED',
  });
  return version;
}
