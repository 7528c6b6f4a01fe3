import { ServerVersionError, UnsupportedError } from '../../errors.js';
import type { Statement } from '../../statement.js';
import { validatePostgresIdentifier } from '../../table/identifier.js';
import { roleColumns, type IsolationLevel, type TableSpec } from '../../table/table-spec.js';
import { POSTGRES_CAPABILITIES } from '../capabilities.js';
import {
  claimOrder,
  columnList,
  isFifo,
  refuseUnbuiltClaims,
  rowFilter,
  skipLockedSelect,
  tableOf,
} from '../claim-clauses.js';
import { POSTGRES_CLOCK } from '../database-clock.js';
import {
  DIALECT_INTERFACE_VERSION,
  GROUP_GUARD_COLUMN,
  type DeadLetterTarget,
  type Dialect,
  type InsertOptions,
  type LeaseClaim,
  type LeaseClaimOptions,
  type LeaseSettleManyRequest,
  type TableColumns,
  type CreateTableOptions,
} from '../dialect.js';
import { POSTGRES_HEADERS_WITH_LAST_ERROR } from '../last-error-header.js';
import {
  copiedColumns,
  createLeaseSettlements,
  createRowLockStatements,
  createSavepointStatements,
  createSettleStatements,
  deadLetterTableOf,
  isolationLevelSql,
  leaseStampAssignments,
  refuseSqliteBeginMode,
  renderInsertRows,
  renderProbeColumns,
  renderRowLockFinishMany,
} from '../portable-statements.js';
import { createDedupeStatements } from '../dedupe-statements.js';
import { DOUBLE_QUOTE_STYLE, identifier, param, renderStatement, sql, textLiteral, type SqlStyle } from '../quoting.js';
import { POSTGRES_INDEX_STATEMENTS, renderPostgresCreateTable } from './postgres-ddl.js';
import { createPostgresAdvisoryStatements } from './postgres-advisory.js';
import { renderPostgresSettleMany } from './postgres-lease-settle-many.js';
import { createPostgresNotifyStatements } from './postgres-notify.js';

const DATABASE = 'postgres';
const style: SqlStyle = { ...DOUBLE_QUOTE_STYLE, clock: POSTGRES_CLOCK };

export function createPostgresDialect(): Dialect {
  return Object.freeze({
    interfaceVersion: DIALECT_INTERFACE_VERSION,
    name: 'postgres',
    label: DATABASE,
    basedOn: DATABASE,
    capabilities: POSTGRES_CAPABILITIES,
    session: Object.freeze({
      begin: (options?: { isolation?: IsolationLevel | undefined }): Statement[] => [renderBegin(options?.isolation)],
      commit: () => renderStatement(style, 'session.commit', sql`COMMIT`),
      rollback: () => renderStatement(style, 'session.rollback', sql`ROLLBACK`),
      ...createSavepointStatements(style),
      // The number form ('150020') needs no parsing of distribution suffixes such as '15.2 (Debian …)'.
      serverVersion: () =>
        renderStatement(style, 'session.serverVersion', sql`SELECT current_setting('server_version_num') AS version`),
    }),
    rowLock: Object.freeze({
      ...createRowLockStatements(style, DATABASE),
      finishMany: (spec: TableSpec, rowCount: number) => renderRowLockFinishMany(style, spec, rowCount),
    }),
    lease: Object.freeze({
      claim: (spec: TableSpec, columns: TableColumns, options?: LeaseClaimOptions): LeaseClaim => {
        const statement = renderLeaseClaim(spec, columns, options);
        const guard = renderGroupGuard(spec);
        if (guard === undefined) return { kind: 'single', statement };
        // The advisory lock lives as long as the transaction, so claim and stamp inside one; at
        // read committed the claim reads what was committed before the guard took the lock.
        return { kind: 'single', statement, guarded: { begin: [renderBegin('read committed')], guard } };
      },
      ...createLeaseSettlements(style),
      settleMany: (spec: TableSpec, columns: TableColumns, request: LeaseSettleManyRequest) =>
        renderPostgresSettleMany(style, spec, columns, request),
    }),
    fifo: Object.freeze({ guard: (spec: TableSpec) => renderGroupGuard(spec) }),
    advisory: createPostgresAdvisoryStatements(),
    settle: Object.freeze(
      createSettleStatements(style, POSTGRES_HEADERS_WITH_LAST_ERROR, (spec, columns, target, options) => [
        renderDeadLetterToTable(spec, columns, target, options),
      ]),
    ),
    dedupe: createDedupeStatements(style, 'skipped'),
    insert: Object.freeze({
      rows: (spec: TableSpec, columns: readonly string[], rowCount: number, options?: InsertOptions) =>
        renderInsertRows(style, spec, columns, rowCount, { returnsId: true, rowOfDefaults: 'defaultValues' }, options),
    }),
    schema: Object.freeze({
      probeColumns: (spec: TableSpec) => renderProbeColumns(style, spec),
      createTable: (spec: TableSpec, tableOptions?: CreateTableOptions) => {
        validatePostgresIdentifiers(spec);
        return renderPostgresCreateTable(spec, tableOptions);
      },
      indexes: POSTGRES_INDEX_STATEMENTS,
    }),
    validateTable: (spec: TableSpec) => {
      validatePostgresIdentifiers(spec);
      if (spec.isolation !== undefined) refuseReadUncommitted(spec.isolation, `table "${spec.qualifiedName}"`);
      refuseSqliteBeginMode(spec, DATABASE);
    },
    checkServerVersion: (version: string) => {
      checkPostgresServerVersion(version);
    },
    notify: createPostgresNotifyStatements(),
  });
}

/**
 * One statement that locks, stamps and returns: the first CTE takes the rows, the second stamps
 * them, and the final SELECT reads the first CTE, whose snapshot predates the stamp, so the
 * attempt returned is the one before this claim counted it. The stamp finds its rows through
 * `id = ANY(ARRAY(…))`, which only the primary key's index answers: joined to the CTE instead,
 * a claim of 250 rows from a 20,000-row table was planned as a hash join over a sequential scan
 * of the whole table (5 of its 8 ms; at a million rows the planner chose the index itself).
 */
function renderLeaseClaim(spec: TableSpec, columns: TableColumns, options?: LeaseClaimOptions): Statement {
  refuseUnbuiltClaims(spec, DATABASE);
  const id = identifier(spec.id.column);
  const claimed = skipLockedSelect(spec, columns, 'lease', options);
  const stamp = sql`UPDATE ${tableOf(spec)} SET ${leaseStampAssignments(spec)} WHERE ${id} = ANY(ARRAY(SELECT tablequeue_claimed.${id} FROM tablequeue_claimed))`;
  return renderStatement(
    style,
    'lease.claim',
    sql`WITH tablequeue_claimed AS (${claimed}), tablequeue_stamp AS (${stamp}) SELECT ${columnList(columns)} FROM tablequeue_claimed ORDER BY ${claimOrder(spec)}`,
  );
}

/**
 * The FIFO group guard: a transaction-scoped advisory lock keyed by a 64-bit hash of
 * `<schema.>table:<group>`, so it ends with the claim's transaction (row lock form: with the
 * delivery's settlement). Two groups whose keys collide only take turns; nothing is lost.
 */
function renderGroupGuard(spec: TableSpec): Statement | undefined {
  if (!isFifo(spec)) return undefined;
  const key = sql`${textLiteral(`${spec.qualifiedName}:`)} || ${param('group')}::text`;
  return renderStatement(
    style,
    'fifo.guard',
    sql`SELECT pg_try_advisory_xact_lock(hashtextextended(${key}, 0))::int AS ${identifier(GROUP_GUARD_COLUMN)}`,
  );
}

/** One statement: the delete's RETURNING feeds the insert, so the row is moved or left whole. */
function renderDeadLetterToTable(
  spec: TableSpec,
  columns: TableColumns,
  target: Extract<DeadLetterTarget, { kind: 'table' }>,
  options: { fenced: boolean },
): Statement {
  if (target.schema !== undefined) validatePostgresIdentifier(target.schema, 'schema of the dead-letter table');
  validatePostgresIdentifier(target.name, 'dead-letter table');
  const list = columnList(columns);
  const moved = sql`DELETE FROM ${tableOf(spec)} WHERE ${rowFilter(spec, options)} RETURNING ${list}`;
  const copied = copiedColumns(spec, columns, options, POSTGRES_HEADERS_WITH_LAST_ERROR);
  const copy = sql`INSERT INTO ${deadLetterTableOf(target)} (${list}) SELECT ${copied} FROM tablequeue_moved`;
  return renderStatement(style, 'settle.deadLetter', sql`WITH tablequeue_moved AS (${moved}) ${copy}`);
}

function renderBegin(isolation: IsolationLevel | undefined): Statement {
  if (isolation === undefined) return renderStatement(style, 'session.begin', sql`BEGIN`);
  refuseReadUncommitted(isolation, 'a transaction');
  return renderStatement(style, 'session.begin', sql`BEGIN ISOLATION LEVEL ${isolationLevelSql(isolation)}`);
}

function refuseReadUncommitted(isolation: IsolationLevel, what: string): void {
  if (isolation !== 'read uncommitted') return;
  throw new UnsupportedError({
    database: DATABASE,
    feature: 'read uncommitted',
    message: `${what} asks for read uncommitted, which PostgreSQL runs as read committed; declare isolation: "read committed"`,
  });
}

/** Postgres would truncate a name over 63 bytes and then address another table or column. */
function validatePostgresIdentifiers(spec: TableSpec): void {
  if (spec.schema !== undefined) validatePostgresIdentifier(spec.schema, `schema of table "${spec.qualifiedName}"`);
  validatePostgresIdentifier(spec.name, 'table name');
  for (const column of roleColumns(spec)) {
    validatePostgresIdentifier(column, `column of table "${spec.qualifiedName}"`);
  }
}

const POSTGRES_FLOOR_MAJOR = 11;

/**
 * Checks `server_version_num` (`150020` for 15.20): from 10 on it is major * 10000 + minor;
 * 9.6.24 reads 90624. Returns the major and minor version.
 */
export function checkPostgresServerVersion(text: string): { major: number; minor: number } {
  const trimmed = String(text).trim();
  const required = `PostgreSQL ${POSTGRES_FLOOR_MAJOR}`;
  if (!/^\d{5,6}$/.test(trimmed)) {
    throw new ServerVersionError({
      found: String(text),
      required,
      message: `could not read a PostgreSQL version number from ${JSON.stringify(String(text))}; tablequeue needs ${required} or later`,
    });
  }
  const versionNumber = Number(trimmed);
  const major = Math.floor(versionNumber / 10000);
  const minor = major >= 10 ? versionNumber % 10000 : Math.floor(versionNumber / 100) % 100;
  if (major < POSTGRES_FLOOR_MAJOR) {
    throw new ServerVersionError({
      found: trimmed,
      required,
      message: `PostgreSQL ${major}.${minor} is older than ${required}, the first with hashtextextended (advisory locks, FIFO groups); upgrade the server`,
    });
  }
  return { major, minor };
}
