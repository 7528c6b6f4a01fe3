import { describe, expect, it } from 'vitest';
import { DeclarationError } from '../errors.js';
import { parseSideTable, renderCreateSideTable, sideTableTypes } from './side-table.js';

describe('side table DDL', () => {
  it('declares a one-column key on its column', () => {
    const table = parseSideTable('ops.leases', 'postgres', 'leases table');
    expect(
      renderCreateSideTable('postgres', table, {
        columns: [
          ['task', 'text NOT NULL'],
          ['until', `${sideTableTypes('postgres').time} NULL`],
        ],
        primaryKey: ['task'],
      }),
    ).toBe(['CREATE TABLE IF NOT EXISTS "ops"."leases" (', '  "task" text NOT NULL PRIMARY KEY,', '  "until" timestamptz NULL', ')'].join('\n'));
  });

  it('puts a longer key in a clause after the columns, with backticks on MySQL, MariaDB and SQLite', () => {
    const shape = {
      columns: [
        ['queue_table', `${sideTableTypes('mysql').binaryKey} NOT NULL`],
        ['row_id', `${sideTableTypes('mysql').exactText(64)} NOT NULL`],
      ],
      primaryKey: ['queue_table', 'row_id'],
    } as const;
    const expected = [
      'CREATE TABLE IF NOT EXISTS `records` (',
      '  `queue_table` varbinary(1020) NOT NULL,',
      '  `row_id` varchar(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,',
      '  PRIMARY KEY (`queue_table`, `row_id`)',
      ')',
    ].join('\n');
    expect(renderCreateSideTable('mysql', { schema: undefined, name: 'records' }, shape)).toBe(expected);
    expect(renderCreateSideTable('mariadb', { schema: undefined, name: 'records' }, shape)).toBe(expected);
    expect(renderCreateSideTable('sqlite', { schema: 'aux', name: 'records' }, { columns: [['a', 'text NOT NULL']], primaryKey: ['a'] })).toBe(
      'CREATE TABLE IF NOT EXISTS `aux`.`records` (\n  `a` text NOT NULL PRIMARY KEY\n)',
    );
  });

  it('spells the shared types per database', () => {
    expect(sideTableTypes('postgres')).toMatchObject({ time: 'timestamptz', binaryKey: 'text' });
    expect(sideTableTypes('sqlite').exactText(255)).toBe('text');
    expect(sideTableTypes('mariadb').time).toBe('datetime(6)');
  });

  it('refuses a key column that is not a column', () => {
    expect(() => renderCreateSideTable('postgres', { schema: undefined, name: 't' }, { columns: [['a', 'text NOT NULL']], primaryKey: ['b'] })).toThrow(
      /primary key column "b"/,
    );
  });

  it('parses name or schema.name, naming the table in a refusal; Postgres holds names to 63 bytes', () => {
    expect(parseSideTable('ops.records', 'mysql', 'records table')).toEqual({ schema: 'ops', name: 'records' });
    expect(parseSideTable('records', 'sqlite', 'records table')).toEqual({ schema: undefined, name: 'records' });
    expect(() => parseSideTable('a.b.c', 'postgres', 'records table')).toThrow(DeclarationError);
    expect(() => parseSideTable('a.b.c', 'postgres', 'records table')).toThrow(/records table/);
    expect(() => parseSideTable(`${'x'.repeat(64)}.t`, 'postgres', 'records table')).toThrow(/schema of records table/);
    expect(parseSideTable(`${'x'.repeat(64)}`, 'mysql', 'records table').name).toHaveLength(64);
  });
});
