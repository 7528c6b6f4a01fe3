import { describe, expect, it } from 'vitest';
import { dropTableIfExists } from './drop-table-statements.js';

describe('dropTableIfExists', () => {
  it('quotes the name as each database does', () => {
    const jobs = { schema: undefined, name: 'jobs' };
    expect(dropTableIfExists('postgres', jobs)).toEqual({ name: 'testing.dropTable', sql: 'DROP TABLE IF EXISTS "jobs"', params: [] });
    expect(dropTableIfExists('mysql', jobs)).toEqual({ name: 'testing.dropTable', sql: 'DROP TABLE IF EXISTS `jobs`', params: [] });
    expect(dropTableIfExists('mariadb', jobs)).toEqual({ name: 'testing.dropTable', sql: 'DROP TABLE IF EXISTS `jobs`', params: [] });
    expect(dropTableIfExists('sqlite', jobs)).toEqual({ name: 'testing.dropTable', sql: 'DROP TABLE IF EXISTS `jobs`', params: [] });
  });

  it('names the schema of a qualified table', () => {
    expect(dropTableIfExists('postgres', { schema: 'ops', name: 'jobs' }).sql).toBe('DROP TABLE IF EXISTS "ops"."jobs"');
    expect(dropTableIfExists('mysql', { schema: 'ops', name: 'jobs' }).sql).toBe('DROP TABLE IF EXISTS `ops`.`jobs`');
  });
});
