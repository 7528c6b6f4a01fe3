import { describe, expect, it } from 'vitest';
import { DeclarationError, DialectVersionError, StatementError, UnsupportedError } from '../errors.js';
import { createTableSpec } from '../table/table-spec.js';
import { createDialect } from './create-dialect.js';
import { defineDialect, type DialectOverrides } from './define-dialect.js';
import { DIALECT_INTERFACE_VERSION, type Dialect } from './dialect.js';
import { acceptServiceDialect, checkDialectProtocol } from './service-dialect.js';

const leaseTable = createTableSpec({ table: 'jobs', id: 'id', group: 'queue', lockedUntil: 'locked_until', payload: 'payload' });
const fifoLeaseTable = createTableSpec({ table: 'jobs', id: 'id', group: { column: 'queue', fifo: true }, lockedUntil: 'locked_until' });
const rowLockTable = createTableSpec({ table: 'jobs', id: 'id', group: 'queue', payload: 'payload' });

function fork(overrides: DialectOverrides | ((base: Dialect) => DialectOverrides), interfaceVersion = DIALECT_INTERFACE_VERSION): Dialect {
  return defineDialect({ basedOn: 'postgres', label: 'fork', interfaceVersion, overrides });
}

function thrown(run: () => unknown): unknown {
  try {
    run();
  } catch (error) {
    return error;
  }
  throw new Error('expected a throw');
}

describe('acceptServiceDialect: the interface version', () => {
  it('refuses an older version with a DialectVersionError saying what to change', () => {
    const error = thrown(() => acceptServiceDialect(fork({}, 0)));
    expect(error).toBeInstanceOf(DialectVersionError);
    expect(error).toMatchObject({
      code: 'DIALECT_VERSION',
      dialect: 'fork',
      found: 0,
      required: 1,
      message:
        'dialect "fork" was written for version 0 of the Dialect interface, and this tablequeue implements version 1; docs/dialects.md lists what each version changed: bring the dialect\'s statements up to date, run checkDialectStatements from tablequeue/testing on it, then declare interfaceVersion: 1',
    });
  });

  it('refuses a newer version, and a dialect that declares none', () => {
    expect((thrown(() => acceptServiceDialect(fork({}, 2))) as Error).message).toMatch(
      /^dialect "fork" was written for version 2 of the Dialect interface, newer than this tablequeue's version 1: upgrade tablequeue, or bring the dialect back to version 1;/,
    );
    const undeclared = { ...createDialect('postgres'), label: 'mine', interfaceVersion: undefined } as unknown as Dialect;
    expect((thrown(() => acceptServiceDialect(undeclared)) as Error).message).toMatch(/^dialect "mine" declares no interfaceVersion \(found undefined\);/);
  });

  it('takes the built-ins as they are', () => {
    for (const name of ['postgres', 'mysql', 'mariadb', 'sqlite'] as const) expect(acceptServiceDialect(createDialect(name)).basedOn).toBe(name);
  });
});

describe('acceptServiceDialect: the members', () => {
  it('names every member missing from a dialect written by hand', () => {
    const base = createDialect('sqlite');
    const partial = { ...base, label: 'by-hand', lease: { claim: base.lease.claim }, notify: { channel: () => 'x' } } as unknown as Dialect;
    expect((thrown(() => acceptServiceDialect(partial)) as Error).message).toBe(
      'new Broker: dialect "by-hand" is not a complete Dialect: lease.release is missing; lease.retryAfter is missing; lease.extend is missing; lease.confirm is missing; lease.settleMany is missing; notify.maxPayloadBytes must be a whole number of bytes. defineDialect({ basedOn, … }) keeps every statement of the built-in it extends that the dialect does not override',
    );
  });

  it('refuses a protocol that is not the one of the built-in it follows, and a database of another protocol at start', () => {
    const crossed = { ...createDialect('postgres'), name: 'mysql' } as Dialect;
    expect(thrown(() => acceptServiceDialect(crossed))).toBeInstanceOf(DeclarationError);
    const error = thrown(() => checkDialectProtocol(acceptServiceDialect(fork({})), 'mysql', 'MySQL at 127.0.0.1:3306'));
    expect((error as Error).message).toBe(
      'dialect "fork" speaks postgres (it is based on postgres), but the database is MySQL at 127.0.0.1:3306, which speaks mysql; give the broker a dialect based on a mysql one',
    );
  });
});

describe('a guarded dialect', () => {
  const refusing = (): never => {
    throw new Error('this fork has no FOR UPDATE SKIP LOCKED');
  };

  it('turns a renderer that throws into a StatementError naming the statement and the dialect', () => {
    const error = thrown(() => acceptServiceDialect(fork({ rowLock: { claim: refusing } })).rowLock.claim(rowLockTable, ['id']));
    expect(error).toBeInstanceOf(StatementError);
    expect(error).toMatchObject({
      statement: 'rowLock.claim',
      database: 'fork',
      message: 'dialect "fork" cannot render statement "rowLock.claim": this fork has no FOR UPDATE SKIP LOCKED',
    });
  });

  it('turns a plain throw of validateTable into an UnsupportedError naming the table, and of checkServerVersion into a ServerVersionError', () => {
    const guarded = acceptServiceDialect(
      fork({
        validateTable: () => {
          throw new Error('no advisory locks here');
        },
        checkServerVersion: (version) => {
          throw new Error(`${version} is too old`);
        },
      }),
    );
    expect(thrown(() => guarded.validateTable(rowLockTable))).toMatchObject({
      name: 'UnsupportedError',
      database: 'fork',
      message: 'dialect "fork" refuses table "jobs": no advisory locks here',
    });
    expect(thrown(() => guarded.checkServerVersion('90624'))).toMatchObject({
      name: 'ServerVersionError',
      found: '90624',
      message: 'dialect "fork" refuses the server\'s version "90624": 90624 is too old',
    });
  });

  it('refuses a row lock table when the dialect declares no row locks, though its statements would render', () => {
    const guarded = acceptServiceDialect(fork({ capabilities: { supportsRowLock: false } }));
    expect(thrown(() => guarded.validateTable(rowLockTable))).toMatchObject({
      name: 'UnsupportedError',
      message: 'table "jobs" uses the row lock form, but dialect "fork" has no row locks (supportsRowLock: false); add a lockedUntil column (lease form)',
    });
    expect(() => guarded.validateTable(leaseTable)).not.toThrow();
  });

  it("passes tablequeue's own errors through as they are", () => {
    const guarded = acceptServiceDialect(fork({}));
    expect(() => guarded.session.begin({ isolation: 'read uncommitted' })).toThrow(UnsupportedError);
  });

  it("refuses a table in validateTable, which every subscription calls at start, when a statement of the table's form does not render", () => {
    const guarded = acceptServiceDialect(fork({ rowLock: { claim: refusing } }));
    const error = thrown(() => guarded.validateTable(rowLockTable));
    expect(error).toBeInstanceOf(StatementError);
    expect(error).toMatchObject({
      statement: 'rowLock.claim',
      database: 'fork',
      message:
        'dialect "fork" (based on postgres) cannot serve table "jobs": rowLock.claim refuses (this fork has no FOR UPDATE SKIP LOCKED) where the built-in postgres dialect renders one. Fix these statements; checkDialectStatements from tablequeue/testing checks every one',
    });
    // A lease table never asks for the row lock claim.
    expect(() => guarded.validateTable(leaseTable)).not.toThrow();
  });

  it('names every problem of the table in one error: a refusal only for FIFO tables, and a parameter dropped', () => {
    const guarded = acceptServiceDialect(
      fork((base) => ({
        fifo: {
          guard: (spec) => {
            if (spec.group?.fifo === true) throw new Error('no hashtextextended before PostgreSQL 11');
            return undefined;
          },
        },
        lease: { extend: (spec) => ({ ...base.lease.extend(spec), sql: 'UPDATE "jobs" SET "locked_until" = $1 WHERE "id" = $2', params: ['lockedUntil', 'id'] }) },
      })),
    );
    const error = thrown(() => guarded.validateTable(fifoLeaseTable)) as StatementError;
    expect(error.statement).toBe('lease.extend');
    expect(error.message).toBe(
      'dialect "fork" (based on postgres) cannot serve table "jobs": lease.extend does not bind held (built-in postgres: lockedUntil, id, held); fifo.guard refuses (no hashtextextended before PostgreSQL 11) where the built-in postgres dialect renders one. Fix these statements; checkDialectStatements from tablequeue/testing checks every one',
    );
  });

  it('wraps the stampAll a lease claim hands out', () => {
    const mysqlFork = defineDialect({
      basedOn: 'mysql',
      label: 'tidb',
      interfaceVersion: DIALECT_INTERFACE_VERSION,
      overrides: (base) => ({
        lease: {
          claim: (spec, columns, options) => {
            const claim = base.lease.claim(spec, columns, options);
            return claim.kind === 'selectThenStamp' ? { ...claim, stampAll: refusing } : claim;
          },
        },
      }),
    });
    const claim = acceptServiceDialect(mysqlFork).lease.claim(leaseTable, ['id', 'queue', 'locked_until']);
    expect(claim.kind === 'selectThenStamp' && thrown(() => claim.stampAll?.(2))).toMatchObject({ statement: 'lease.stampAll', database: 'tidb' });
  });
});
