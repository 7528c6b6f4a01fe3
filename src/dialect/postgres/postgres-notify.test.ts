import { describe, expect, it } from 'vitest';
import { DeclarationError } from '../../errors.js';
import { createTableSpec } from '../../table/table-spec.js';
import { createMysqlDialect } from '../mysql/mysql-dialect.js';
import { createSqliteDialect } from '../sqlite/sqlite-dialect.js';
import { createPostgresDialect } from './postgres-dialect.js';

const notify = createPostgresDialect().notify!;
const plainTable = createTableSpec({ table: 'jobs', id: 'id', group: 'queue' });
const schemaTable = createTableSpec({ schema: 'app', table: 'email_jobs', id: 'id' });

describe('postgres notify', () => {
  it('names a channel by the qualified table name, unquoted', () => {
    expect(notify.channel(plainTable)).toBe('jobs');
    expect(notify.channel(schemaTable)).toBe('app.email_jobs');
  });

  it('listens on the channel quoted as one identifier', () => {
    expect(notify.listen(plainTable)).toEqual({ name: 'notify.listen', sql: 'LISTEN "jobs"', params: [] });
    expect(notify.listen(schemaTable)).toEqual({ name: 'notify.listen', sql: 'LISTEN "app.email_jobs"', params: [] });
  });

  it('listens on a channel that names no table, quoted as one identifier', () => {
    expect(notify.listenTo('tablequeue_queue_controls')).toEqual({
      name: 'notify.listen',
      sql: 'LISTEN "tablequeue_queue_controls"',
      params: [],
    });
  });

  it('notifies one channel with the group as payload, both bound', () => {
    expect(notify.notify()).toEqual({ name: 'notify.notify', sql: 'SELECT pg_notify($1, $2)', params: ['channel', 'group'] });
  });

  it('accepts a channel of 63 bytes and refuses 64, naming the table', () => {
    const longest = createTableSpec({ schema: 's'.repeat(31), table: 't'.repeat(31), id: 'id' });
    expect(Buffer.byteLength(notify.channel(longest))).toBe(63);
    const tooLong = createTableSpec({ schema: 's'.repeat(31), table: 't'.repeat(32), id: 'id' });
    expect(() => notify.channel(tooLong)).toThrow(DeclarationError);
    expect(() => notify.listen(tooLong)).toThrow(`table "${'s'.repeat(31)}.${'t'.repeat(32)}"`);
  });

  it('counts bytes, not characters', () => {
    const multiByte = createTableSpec({ schema: 'ü'.repeat(16), table: 'ö'.repeat(16), id: 'id' });
    expect(() => notify.channel(multiByte)).toThrow('65 bytes long');
  });

  it('keeps payloads under the 8,000 bytes pg_notify accepts', () => {
    expect(notify.maxPayloadBytes).toBe(7_999);
  });
});

describe('notify elsewhere', () => {
  it('exists only where the capability says so', () => {
    expect(createPostgresDialect().capabilities.supportsListenNotify).toBe(true);
    for (const dialect of [createMysqlDialect({ mariadb: false }), createMysqlDialect({ mariadb: true }), createSqliteDialect()]) {
      expect(dialect.capabilities.supportsListenNotify).toBe(false);
      expect(dialect.notify).toBeUndefined();
    }
  });
});
