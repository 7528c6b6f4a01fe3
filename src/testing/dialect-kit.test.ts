import { AssertionError } from 'node:assert';
import { describe, expect, it } from 'vitest';
import { createDialect } from '../dialect/create-dialect.js';
import { defineDialect } from '../dialect/define-dialect.js';
import { UnsupportedError } from '../errors.js';
import { checkDialectStatements, reportDialectStatements } from './dialect-kit.js';

describe('checkDialectStatements', () => {
  it.each(['postgres', 'mysql', 'mariadb', 'sqlite'] as const)('passes the built-in %s dialect, with nothing of its own', (name) => {
    const report = checkDialectStatements(createDialect(name));
    expect(report).toMatchObject({ dialect: name, matches: name, overridden: [], refusedTables: [], capabilityDifferences: [], problems: [] });
    expect(report.checked).toBeGreaterThan(300);
  });

  it('passes a dialect with statements of its own, and says which and what it does not do', () => {
    const postgres10 = defineDialect({
      basedOn: 'postgres',
      label: 'postgres10',
      interfaceVersion: 1,
      overrides: (base) => ({
        capabilities: { supportsListenNotify: false },
        fifo: {
          guard: (spec) =>
            spec.group?.fifo === true
              ? { name: 'fifo.guard', sql: `SELECT pg_try_advisory_xact_lock(hashtext('${spec.qualifiedName}:' || $1::text))::int AS owned`, params: ['group'] }
              : undefined,
        },
        validateTable: (spec) => {
          if (spec.form === 'advisory') throw new UnsupportedError({ database: 'postgres10', feature: 'advisory', message: 'no 64-bit lock keys before PostgreSQL 11' });
          base.validateTable(spec);
        },
      }),
    });
    const report = checkDialectStatements(postgres10);
    expect(report.overridden).toEqual(['fifo.guard']);
    expect(report.notAsked).toEqual(['notify.channel', 'notify.listen', 'notify.listenTo', 'notify.notify']);
    expect(report.capabilityDifferences).toEqual(['supportsListenNotify: false (postgres: true)']);
    expect(report.refusedTables.map((table) => table.table)).toEqual(['kit_advisory', 'kit_advisory_every_role', 'kit_advisory_database_clock']);
    expect(report.refusedTables[0]!.reason).toBe('no 64-bit lock keys before PostgreSQL 11');
  });

  it('takes a capability turned off: a proxy without row locks refuses the row lock tables, whose statements it is then never asked for', () => {
    const report = checkDialectStatements(defineDialect({ basedOn: 'mysql', label: 'proxy', interfaceVersion: 1, overrides: { capabilities: { supportsRowLock: false } } }));
    expect(report.refusedTables.map((table) => table.table)).toEqual(['kit_row_lock', 'kit_row_lock_every_role', 'kit_row_lock_fifo', 'kit_row_lock_database_clock']);
    expect(report.problems).toEqual([]);
  });

  it('fails a broken dialect with an AssertionError naming each problem once, with the tables it showed on', () => {
    const broken = defineDialect({
      basedOn: 'sqlite',
      label: 'broken',
      interfaceVersion: 1,
      overrides: (base) => ({
        lease: { extend: (spec) => ({ ...base.lease.extend(spec), params: ['lockedUntil', 'id'] }) },
        settle: {
          finish: (spec, options) => {
            if (options.fenced) throw new Error('not on this fork');
            return base.settle.finish(spec, options);
          },
        },
      }),
    });
    let failure: unknown;
    try {
      checkDialectStatements(broken);
    } catch (error) {
      failure = error;
    }
    expect(failure).toBeInstanceOf(AssertionError);
    const leaseTables = '[kit_lease, kit_lease_every_role, kit_lease_fifo, kit.order]';
    expect((failure as Error).message).toBe(
      [
        'dialect "broken" does not match the built-in sqlite dialect: 3 problems',
        `  lease.extend has 3 ? placeholders but declares 2 parameters (lockedUntil, id): one ? per parameter, in order ${leaseTables}`,
        `  lease.extend does not bind held (built-in sqlite: lockedUntil, id, held) ${leaseTables}`,
        `  settle.finish (fenced) refuses (not on this fork) where the built-in sqlite dialect renders one ${leaseTables}`,
      ].join('\n'),
    );
  });

  it('reports a dialect of another interface version as its one problem', () => {
    const old = defineDialect({ basedOn: 'sqlite', label: 'old', interfaceVersion: 0 });
    expect(reportDialectStatements(old).problems).toEqual([
      {
        method: 'dialect',
        variant: '',
        tables: [],
        problem:
          'dialect "old" was written for version 0 of the Dialect interface, and this tablequeue implements version 1; docs/dialects.md lists what each version changed: bring the dialect\'s statements up to date, run checkDialectStatements from tablequeue/testing on it, then declare interfaceVersion: 1',
      },
    ]);
  });

  it('holds a dialect against the built-in it names: MariaDB statements are not MySQL ones', () => {
    const report = reportDialectStatements(createDialect('mariadb'), { matches: 'mysql' });
    expect(report.problems.map((problem) => problem.method)).toContain('lease.settleMany');
  });
});
