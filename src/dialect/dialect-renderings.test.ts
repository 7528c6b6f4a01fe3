import { describe, expect, it } from 'vitest';
import { createTableSpec, roleColumns } from '../table/table-spec.js';
import { createDialect } from './create-dialect.js';
import { DIALECT_GROUPS, DIALECT_MEMBERS, dialectRenderings } from './dialect-renderings.js';
import type { BuiltInDialectName, Dialect } from './dialect.js';

const BUILT_INS: readonly BuiltInDialectName[] = ['postgres', 'mysql', 'mariadb', 'sqlite'];

/** Every method of a dialect by path, found by walking its groups: what a new statement would add. */
function methodPaths(dialect: Dialect): string[] {
  const walk = (value: object, path: string): string[] =>
    Object.entries(value).flatMap(([key, member]) => {
      if (typeof member === 'function') return [`${path}${key}`];
      if (member !== null && typeof member === 'object' && !Array.isArray(member) && key !== 'capabilities') return walk(member as object, `${path}${key}.`);
      return [];
    });
  return walk(dialect, '');
}

describe('the catalogue of renderings', () => {
  it.each(BUILT_INS)('lists every method of the built-in %s dialect, and the built-in has every one it requires', (name) => {
    const dialect = createDialect(name);
    const members = DIALECT_MEMBERS.map((member) => member.path);
    expect(methodPaths(dialect).filter((path) => !members.includes(path))).toEqual([]);
    const required = DIALECT_MEMBERS.filter((member) => !member.optional).map((member) => member.path);
    expect(required.filter((path) => !methodPaths(dialect).includes(path))).toEqual([]);
  });

  it('renders every method but the ones that are not statements, and groups them as the Dialect does', () => {
    const spec = createTableSpec({ table: 'jobs', id: 'id', group: 'queue', lockedUntil: 'locked_until', dedupeKey: 'key' });
    const rendered = new Set(dialectRenderings({ spec, columns: roleColumns(spec) }).map((rendering) => rendering.method));
    const notStatements = ['validateTable', 'checkServerVersion', 'schema.textCollation.ignoredBy'];
    expect(DIALECT_MEMBERS.map((member) => member.path).filter((path) => !rendered.has(path) && !notStatements.includes(path))).toEqual([]);
    const groups = DIALECT_MEMBERS.filter((member) => member.path.includes('.')).map((member) => member.path.split('.')[0]);
    expect(new Set(groups)).toEqual(new Set(DIALECT_GROUPS));
  });

  it('renders for the forms that ask: a lease table gets no row lock or advisory statements', () => {
    const spec = createTableSpec({ table: 'jobs', id: 'id', lockedUntil: 'locked_until' });
    const forms = new Map(dialectRenderings({ spec, columns: roleColumns(spec) }).map((rendering) => [rendering.method, rendering.forms]));
    expect(forms.get('rowLock.claim')).toEqual(['rowLock']);
    expect(forms.get('advisory.take')).toEqual(['advisory']);
    expect(forms.get('lease.extend')).toEqual(['lease']);
    expect(forms.get('insert.rows')).toBeUndefined();
  });
});
