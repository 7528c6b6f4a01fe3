import { describe, expect, it } from 'vitest';
import { EncodeError } from '../errors.js';
import { createDialect } from '../dialect/create-dialect.js';
import { createTableSpec } from '../table/table-spec.js';
import { payloadColumnValue } from './codec.js';

describe('payloadColumnValue', () => {
  it('binds the bytes as they are into a bytes column, and their JSON text into a JSON column', () => {
    const bytes = Buffer.from('{"n":1}', 'utf8');
    expect(payloadColumnValue(bytes, 'bytes', true, 'publish')).toBe(bytes);
    expect(payloadColumnValue(bytes, 'json', true, 'publish')).toBe('{"n":1}');
    expect(payloadColumnValue(bytes, 'json', false, 'publish')).toBe('{"n":1}');
  });

  it('refuses bytes that are not UTF-8 JSON for a JSON column, saying nothing was written', () => {
    for (const bytes of [Buffer.from('not json'), Buffer.from([0xff, 0xfe])]) {
      expect(() => payloadColumnValue(bytes, 'json', true, 'publish to "jobs/emails"')).toThrow(EncodeError);
      expect(() => payloadColumnValue(bytes, 'json', true, 'publish to "jobs/emails"')).toThrow(
        'publish to "jobs/emails": the payload column holds JSON, and these payload bytes are not UTF-8 JSON; nothing was written',
      );
    }
  });
});

describe('a JSON payload column in createTableSql', () => {
  const spec = createTableSpec({ table: 'jobs', id: 'id', lockedUntil: 'locked_until', payload: { column: 'data', json: true } });
  it.each([
    ['postgres', '"data" JSONB NOT NULL'],
    ['mysql', '`data` JSON NOT NULL'],
    ['mariadb', '`data` JSON NOT NULL'],
    ['sqlite', '`data` TEXT NOT NULL'],
  ] as const)('is the JSON type on %s', (database, column) => {
    expect(createDialect(database).schema.createTable(spec)[0]).toContain(column);
  });
});
