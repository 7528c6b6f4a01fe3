import { DeclarationError, UnsupportedError } from '../../errors.js';
import type { Statement } from '../../statement.js';
import { SQLITE_BEGIN_MODES, type IsolationLevel, type SqliteBeginMode, type TableSpec } from '../../table/table-spec.js';
import { SQLITE_CAPABILITIES } from '../capabilities.js';
import {
  claimConditions,
  claimOrder,
  columnList,
  fifoHeadConditions,
  isFifo,
  perKeyConditions,
  rateKeyConditions,
  refuseUnbuiltClaims,
  tableOf,
  whereAll,
} from '../claim-clauses.js';
import { SQLITE_CLOCK } from '../database-clock.js';
import {
  DIALECT_INTERFACE_VERSION,
  type Dialect,
  type InsertOptions,
  type LeaseClaim,
  type LeaseClaimOptions,
  type LeaseSettleManyRequest,
  type TableColumns,
  type CreateTableOptions,
} from '../dialect.js';
import { SQLITE_HEADERS_WITH_LAST_ERROR } from '../last-error-header.js';
import { renderPairedSettleMany } from '../lease-settle-many.js';
import {
  createLeaseSettlements,
  createSavepointStatements,
  createSettleStatements,
  leaseStampAssignments,
  renderInsertRows,
  renderProbeColumns,
} from '../portable-statements.js';
import { createDedupeStatements } from '../dedupe-statements.js';
import { BACKTICK_STYLE, fixedSql, identifier, param, renderStatement, sql, type SqlStyle } from '../quoting.js';
import { parseDottedVersion, requireVersion, unreadableVersion, type VersionNumber } from '../server-version.js';
import { createSqliteAdvisoryStatements } from './sqlite-advisory.js';
import { renderSqliteCreateTable, SQLITE_INDEX_STATEMENTS } from './sqlite-ddl.js';

const DATABASE = 'sqlite';
const style: SqlStyle = { ...BACKTICK_STYLE, clock: SQLITE_CLOCK };

const BEGIN_MODE_SQL: Record<SqliteBeginMode, string> = {
  deferred: 'DEFERRED',
  immediate: 'IMMEDIATE',
  exclusive: 'EXCLUSIVE',
};

export function createSqliteDialect(): Dialect {
  return Object.freeze({
    interfaceVersion: DIALECT_INTERFACE_VERSION,
    name: 'sqlite',
    label: DATABASE,
    basedOn: DATABASE,
    capabilities: SQLITE_CAPABILITIES,
    session: Object.freeze({
      begin: (options?: { isolation?: IsolationLevel | undefined; sqliteBegin?: SqliteBeginMode | undefined }) => [
        renderBegin(options?.isolation, options?.sqliteBegin),
      ],
      commit: () => renderStatement(style, 'session.commit', sql`COMMIT`),
      rollback: () => renderStatement(style, 'session.rollback', sql`ROLLBACK`),
      ...createSavepointStatements(style),
      serverVersion: () => renderStatement(style, 'session.serverVersion', sql`SELECT sqlite_version() AS version`),
    }),
    rowLock: Object.freeze({
      claim: (spec: TableSpec): Statement => refuseRowLock(spec),
      retry: (spec: TableSpec): Statement => refuseRowLock(spec),
      retryAfter: (spec: TableSpec): Statement => refuseRowLock(spec),
    }),
    lease: Object.freeze({
      claim: (spec: TableSpec, columns: TableColumns, options?: LeaseClaimOptions): LeaseClaim => ({
        kind: 'single',
        statement: renderLeaseClaim(spec, columns, options),
      }),
      ...createLeaseSettlements(style),
      settleMany: (spec: TableSpec, _columns: TableColumns, request: LeaseSettleManyRequest) =>
        renderPairedSettleMany(
          {
            style,
            updateReturns: SQLITE_CAPABILITIES.supportsUpdateReturning,
            deleteReturns: SQLITE_CAPABILITIES.supportsDeleteReturning,
            begin: () => [renderBegin(undefined, 'immediate')],
          },
          spec,
          request,
        ),
    }),
    // The single writer runs one claim at a time, and each claim is one statement: no guard.
    fifo: Object.freeze({ guard: (): undefined => undefined }),
    advisory: createSqliteAdvisoryStatements(),
    settle: Object.freeze(createSettleStatements(style, SQLITE_HEADERS_WITH_LAST_ERROR)),
    dedupe: createDedupeStatements(style, 'skipped'),
    insert: Object.freeze({
      rows: (spec: TableSpec, columns: readonly string[], rowCount: number, options?: InsertOptions) =>
        renderInsertRows(style, spec, columns, rowCount, { returnsId: true, rowOfDefaults: 'defaultValues' }, options),
    }),
    schema: Object.freeze({
      probeColumns: (spec: TableSpec) => renderProbeColumns(style, spec),
      createTable: (spec: TableSpec, tableOptions?: CreateTableOptions) => renderSqliteCreateTable(spec, tableOptions),
      indexes: SQLITE_INDEX_STATEMENTS,
    }),
    validateTable: (spec: TableSpec) => {
      if (spec.form === 'rowLock') refuseRowLock(spec);
      if (spec.isolation !== undefined) refuseIsolation(spec.isolation, `table "${spec.qualifiedName}"`);
    },
    checkServerVersion: (version: string) => {
      checkSqliteVersion(version);
    },
  });
}

/**
 * One statement, serialised by the single writer. RETURNING reports the rows as written, so the
 * attempt comes back already counted (capability `leaseClaimReturnsCountedAttempt`), and in no
 * particular order. On a FIFO table it takes the group's head only.
 */
function renderLeaseClaim(spec: TableSpec, columns: TableColumns, options: LeaseClaimOptions = {}): Statement {
  refuseUnbuiltClaims(spec, DATABASE);
  const id = identifier(spec.id.column);
  const selectIds = sql`SELECT ${id} FROM ${tableOf(spec)}`;
  const conditions = [...claimConditions(spec, 'lease'), ...perKeyConditions(spec, options), ...rateKeyConditions(spec, options)];
  const claimable = isFifo(spec)
    ? sql`${selectIds}${whereAll(fifoHeadConditions(spec, 'lease'))}`
    : sql`${selectIds}${whereAll(conditions)} ORDER BY ${claimOrder(spec)} LIMIT ${param('limit')}`;
  return renderStatement(
    style,
    'lease.claim',
    sql`UPDATE ${tableOf(spec)} SET ${leaseStampAssignments(spec)} WHERE ${id} IN (${claimable}) RETURNING ${columnList(columns)}`,
  );
}

/** IMMEDIATE by default: a deferred read-then-write transaction fails with SQLITE_BUSY when it upgrades. */
function renderBegin(isolation: IsolationLevel | undefined, mode: SqliteBeginMode = 'immediate'): Statement {
  if (isolation !== undefined) refuseIsolation(isolation, 'a transaction');
  if (!SQLITE_BEGIN_MODES.includes(mode)) {
    throw new DeclarationError(
      `unknown SQLite begin mode ${JSON.stringify(mode)}; use one of ${SQLITE_BEGIN_MODES.join(', ')}`,
    );
  }
  return renderStatement(style, 'session.begin', sql`BEGIN ${fixedSql(BEGIN_MODE_SQL[mode])}`);
}

function refuseRowLock(spec: TableSpec): never {
  throw new UnsupportedError({
    database: DATABASE,
    feature: 'row lock form',
    message: `table "${spec.qualifiedName}" uses the row lock form, but SQLite has no row locks; add a lockedUntil column (lease form)`,
  });
}

function refuseIsolation(isolation: IsolationLevel, what: string): never {
  throw new UnsupportedError({
    database: DATABASE,
    feature: 'isolation level',
    message: `${what} asks for isolation "${isolation}", but SQLite transactions are always serializable; remove isolation and choose sqliteBegin ("deferred", "immediate" or "exclusive") instead`,
  });
}

const SQLITE_FLOOR: VersionNumber = { major: 3, minor: 35, patch: 0 };

/** Checks `sqlite_version()` (`3.45.1`) against 3.35.0, the first with `UPDATE … RETURNING`. */
export function checkSqliteVersion(text: string): VersionNumber {
  const version = parseDottedVersion(String(text));
  if (version === undefined) {
    throw unreadableVersion({ product: 'SQLite', found: String(text), required: 'SQLite 3.35.0' });
  }
  requireVersion({ product: 'SQLite', found: String(text), version, floor: SQLITE_FLOOR, why: 'UPDATE … RETURNING' });
  return version;
}
