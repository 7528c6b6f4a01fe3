import { describe, expect, it } from 'vitest';
import { createDialect } from '../dialect/create-dialect.js';
import type { BuiltInDialectName } from '../dialect/dialect.js';
import { DeclarationError, StatementError, UnsupportedError } from '../errors.js';
import { createTableSpec, type TableDeclaration } from '../table/table-spec.js';
import type { FormContext } from './form-context.js';
import { claimedIds, serviceStatementsOf, settlementStatementNameOf } from './service-statements.js';

const lease: TableDeclaration = { table: 'jobs', id: 'id', group: 'queue', partitionKey: 'tenant', lockedUntil: 'locked_until', payload: 'payload' };
const rowLock: TableDeclaration = { table: 'jobs', id: 'id', group: 'queue', payload: 'payload' };
const claim = 'SELECT id FROM jobs WHERE queue = :group LIMIT :limit';

/** What opening a form with these statements decides; the driver is never reached. */
function contextOf(declaration: TableDeclaration, database: BuiltInDialectName, options: Partial<FormContext> = {}): FormContext {
  return {
    driver: undefined as never,
    dialect: createDialect(database),
    spec: createTableSpec(declaration),
    columns: ['id', 'queue', 'tenant', 'locked_until', 'payload'],
    group: 'emails',
    deadLetter: undefined,
    subscription: 'jobs/emails',
    transactional: false,
    keyed: false,
    hasRoomForConnection: () => true,
    concurrency: undefined,
    ...options,
  };
}

function refusalOf(context: FormContext): Error {
  try {
    serviceStatementsOf(context);
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected a refusal');
}

describe("a table's statements of the service's own, as a form opens", () => {
  it('renders what the lease form runs around a claim of its own, and PostgreSQL fetches the ids itself', () => {
    const set = serviceStatementsOf(contextOf({ ...lease, statements: { claim, extend: 'UPDATE jobs SET locked_until = :lockedUntil WHERE id = :id AND locked_until = :held' } }, 'postgres'))!;
    expect(set.claim).toEqual({ name: 'statements.claim', sql: 'SELECT id FROM jobs WHERE queue = $1 LIMIT $2', params: ['group', 'limit'] });
    expect(set.stamp?.name).toBe('serviceClaim.stamp');
    expect(set.lock).toBeUndefined();
    expect(set.fetch).toEqual({ name: 'serviceClaim.fetch', sql: 'SELECT "id", "queue", "tenant", "locked_until", "payload" FROM "jobs" WHERE "id" = ANY($1)', params: ['ids'] });
    expect(set.statements.map((statement) => statement.name)).toEqual(['statements.claim', 'serviceClaim.stamp', 'serviceClaim.fetch', 'statements.extend']);
    expect(serviceStatementsOf(contextOf(lease, 'postgres'))).toBeUndefined();
  });

  it('refuses what a form cannot keep its promises with, saying why', () => {
    const fifo = refusalOf(contextOf({ ...lease, group: { column: 'queue', fifo: true }, statements: { claim } }, 'postgres'));
    expect(fifo).toBeInstanceOf(DeclarationError);
    expect(fifo.message).toMatch(/^table "jobs": statements\.claim cannot serve FIFO groups: only tablequeue's claim takes a group's head alone/);
    const perKey = refusalOf(contextOf({ ...lease, statements: { claim } }, 'postgres', { concurrency: { global: undefined, perKey: 2 } }));
    expect(perKey.message).toMatch(/statements\.claim cannot keep concurrency\.perKey: each key's room is counted inside tablequeue's claim statement/);
    expect(refusalOf(contextOf({ ...rowLock, statements: { extend: 'UPDATE jobs SET x = :lockedUntil WHERE id = :id AND y = :held' } }, 'mysql')).message).toMatch(
      /statements\.extend renews a lease, and the table is in the row lock form, which has none/,
    );
    expect(refusalOf(contextOf({ ...rowLock, statements: { retryAfter: 'UPDATE jobs SET queue = queue WHERE id = :id' } }, 'mysql')).message).toMatch(
      /statements\.retryAfter would never run: without a retryAfter column/,
    );
    expect(refusalOf(contextOf({ ...rowLock, statements: { lock: 'SELECT 1', unlock: 'SELECT 1' } }, 'postgres')).message).toMatch(
      /statements\.lock and unlock replace the advisory lock form's session locks, and the table is in the row lock form/,
    );
    const sqliteLock = refusalOf(
      contextOf({ table: 'jobs', id: 'id', advisoryLock: 'job-{id}', statements: { lock: 'SELECT :key', unlock: 'SELECT :key' } }, 'sqlite'),
    );
    expect(sqliteLock).toBeInstanceOf(UnsupportedError);
    expect(sqliteLock.message).toMatch(/need session locks that every process sees, which sqlite lacks/);
    const mysqlClaim = refusalOf(contextOf({ ...lease, statements: { claim } }, 'mariadb'));
    expect(mysqlClaim).toBeInstanceOf(UnsupportedError);
    expect(mysqlClaim.message).toMatch(/on mariadb tablequeue has no statement that reads the rows of a list of ids/);
    expect(refusalOf(contextOf({ ...lease, statements: { fetch: 'SELECT * FROM jobs WHERE id = :id OR id = ANY(:ids)' } }, 'postgres')).message).toBe(
      'table "jobs": statements.fetch must use either :ids (every claimed id, as an array) or :id (run once per id)',
    );
    expect(refusalOf(contextOf({ ...lease, statements: { fetch: 'SELECT * FROM jobs WHERE id IN (:ids)' } }, 'sqlite')).message).toBe(
      'table "jobs": statements.fetch uses :ids, which tablequeue does not bind there; it binds :id',
    );
  });

  it('runs the ack or the drop for a finish: only an ack commits the handler writes', () => {
    expect(settlementStatementNameOf({ kind: 'finish', commitsHandlerWrites: true })).toBe('ack');
    expect(settlementStatementNameOf({ kind: 'finish', commitsHandlerWrites: false })).toBe('drop');
    expect(settlementStatementNameOf({ kind: 'finish' })).toBe('drop');
    expect(settlementStatementNameOf({ kind: 'retryAfter', at: new Date(0), delayMs: 0 })).toBe('retryAfter');
  });

  it('takes each id a claim returned once, at most the limit, and refuses rows without the id column', () => {
    const context = contextOf(lease, 'postgres');
    const statement = { name: 'statements.claim', sql: '', params: [] };
    expect(claimedIds([{ id: 3 }, { id: 1 }, { id: 3 }, { id: 2 }], context, statement, 2)).toEqual([3, 1]);
    const failure = (() => {
      try {
        claimedIds([{ job: 3 }], context, statement, 2);
      } catch (error) {
        return error;
      }
      return undefined;
    })();
    expect(failure).toBeInstanceOf(StatementError);
    expect(failure).toMatchObject({ statement: 'statements.claim', message: 'table "jobs": statements.claim returns no column "id", the table\'s id' });
  });
});
