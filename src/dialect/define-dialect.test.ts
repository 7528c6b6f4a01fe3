import { describe, expect, it } from 'vitest';
import { DeclarationError } from '../errors.js';
import { createTableSpec } from '../table/table-spec.js';
import { createDialect } from './create-dialect.js';
import { defineDialect, DIALECT_RESULT_COLUMNS } from './define-dialect.js';

const spec = createTableSpec({ table: 'jobs', id: 'id', lockedUntil: 'locked_until' });

describe('defineDialect', () => {
  it('keeps every statement of the built-in it extends but the ones it overrides, one level deep', () => {
    const base = createDialect('postgres');
    const dialect = defineDialect({
      basedOn: 'postgres',
      label: 'fork',
      interfaceVersion: 1,
      overrides: { lease: { extend: () => ({ name: 'lease.extend', sql: 'SELECT 1', params: [] }) } },
    });
    expect(dialect).toMatchObject({ interfaceVersion: 1, name: 'postgres', label: 'fork', basedOn: 'postgres' });
    expect(dialect.lease.extend(spec).sql).toBe('SELECT 1');
    expect(dialect.lease.release(spec)).toEqual(base.lease.release(spec));
    expect(dialect.settle.finish(spec, { fenced: true })).toEqual(base.settle.finish(spec, { fenced: true }));
    expect(dialect.capabilities).toEqual(base.capabilities);
    expect(Object.isFrozen(dialect) && Object.isFrozen(dialect.lease)).toBe(true);
  });

  it('hands a function of overrides the built-in, so an override can wrap its statement', () => {
    const dialect = defineDialect({
      basedOn: 'sqlite',
      label: 'traced',
      interfaceVersion: 1,
      overrides: (base) => ({ lease: { extend: (table) => ({ ...base.lease.extend(table), sql: `/* traced */ ${base.lease.extend(table).sql}` }) } }),
    });
    expect(dialect.lease.extend(spec).sql).toBe('/* traced */ UPDATE `jobs` SET `locked_until` = ? WHERE `id` = ? AND `locked_until` = ?');
  });

  it('merges capabilities, takes MariaDB as the MySQL protocol, and replaces the version check', () => {
    const dialect = defineDialect({
      basedOn: 'mariadb',
      label: 'proxied',
      interfaceVersion: 1,
      overrides: { capabilities: { supportsSessionLocks: false }, checkServerVersion: () => undefined },
    });
    expect(dialect.name).toBe('mysql');
    expect(dialect.capabilities).toEqual({ ...createDialect('mariadb').capabilities, supportsSessionLocks: false });
    expect(() => dialect.checkServerVersion('5.7.1')).not.toThrow();
  });

  it('refuses a name that is not part of the Dialect, so a misspelt override fails where it is written', () => {
    const misspelt = () =>
      defineDialect({
        basedOn: 'postgres',
        label: 'fork',
        interfaceVersion: 1,
        overrides: { lease: { extnd: () => undefined }, sessions: {} } as never,
      });
    expect(misspelt).toThrow(DeclarationError);
    expect(misspelt).toThrow('defineDialect "fork": "lease.extnd", "sessions" are not part of the Dialect; docs/dialects.md lists every statement');
  });

  it('refuses an unknown built-in and a missing label', () => {
    expect(() => defineDialect({ basedOn: 'oracle' as never, label: 'x', interfaceVersion: 1 })).toThrow(
      'defineDialect: basedOn must be "postgres", "mysql", "mariadb" or "sqlite", got "oracle"',
    );
    expect(() => defineDialect({ basedOn: 'sqlite', label: '', interfaceVersion: 1 })).toThrow('defineDialect: label must name the dialect for errors');
  });
});

describe('DIALECT_RESULT_COLUMNS', () => {
  it('names the columns the built-ins return', () => {
    expect(DIALECT_RESULT_COLUMNS).toEqual({
      serverVersion: 'version',
      groupGuard: 'owned',
      advisoryKey: 'tablequeue_key',
      advisoryConfirmed: 'confirmed',
      dedupeInWork: 'tablequeue_in_work',
      dedupeHeldKey: 'tablequeue_key',
      uniqueIndexName: 'index_name',
      uniqueIndexColumn: 'column_name',
    });
  });
});
