import { describe, expect, it } from 'vitest';
import { DeclarationError } from '../errors.js';
import { parseDatabaseUrl } from './database-url.js';

describe('parseDatabaseUrl', () => {
  it('reads a postgres URL and keeps it whole for node-postgres', () => {
    const text = 'postgres://app:s3cret@db.internal:6432/queue?sslmode=require';
    expect(parseDatabaseUrl(text)).toEqual({ kind: 'postgres', connectionString: text, host: 'db.internal', port: 6432 });
  });

  it('accepts the postgresql scheme and defaults the port', () => {
    expect(parseDatabaseUrl('postgresql://postgres@127.0.0.1/postgres')).toMatchObject({
      kind: 'postgres',
      host: '127.0.0.1',
      port: 5432,
    });
  });

  it('names a socket directory given as ?host= when the URL has no host', () => {
    expect(parseDatabaseUrl('postgres:///queue?host=/var/run/postgresql')).toMatchObject({
      host: '/var/run/postgresql',
      port: 5432,
    });
  });

  it('reads a mysql URL into its parts, decoding escapes', () => {
    expect(parseDatabaseUrl('mysql://app%40eu:p%2Fss@10.0.0.5:3307/jobs%20db')).toEqual({
      kind: 'mysql',
      flavor: 'mysql',
      host: '10.0.0.5',
      port: 3307,
      user: 'app@eu',
      password: 'p/ss',
      database: 'jobs db',
    });
  });

  it('serves a mariadb URL with mysql2, remembering the flavour', () => {
    expect(parseDatabaseUrl('mariadb://root@127.0.0.1/test')).toEqual({
      kind: 'mysql',
      flavor: 'mariadb',
      host: '127.0.0.1',
      port: 3306,
      user: 'root',
      password: undefined,
      database: 'test',
    });
  });

  it.each([
    ['sqlite:./queue.db', './queue.db'],
    ['sqlite:queue.db', 'queue.db'],
    ['sqlite:/var/lib/app/queue.db', '/var/lib/app/queue.db'],
  ])('reads %s as a file', (text, filename) => {
    expect(parseDatabaseUrl(text)).toEqual({ kind: 'sqlite', filename, isMemory: false });
  });

  it('reads sqlite::memory: as an in-memory database', () => {
    expect(parseDatabaseUrl('sqlite::memory:')).toEqual({ kind: 'sqlite', filename: ':memory:', isMemory: true });
  });

  it.each([
    ['an unknown scheme', 'redis://localhost:6379'],
    ['text that is no URL', 'queue.db'],
    ['an empty sqlite path', 'sqlite:'],
    ['a sqlite URL with //', 'sqlite:///tmp/queue.db'],
    ['a mysql URL without a host', 'mysql:///test'],
    ['mysql query parameters', 'mysql://root@localhost/test?ssl=true'],
    ['a bad percent-escape', 'mysql://root:%E0%A4%A@localhost/test'],
    ['a port out of range', 'postgres://localhost:99999/db'],
  ])('refuses %s with a DeclarationError naming the accepted forms', (_case, text) => {
    expect(() => parseDatabaseUrl(text)).toThrowError(DeclarationError);
    expect(() => parseDatabaseUrl(text)).toThrowError(/accepted forms are postgres:\/\/.*sqlite::memory:/);
  });

  it('never puts the password of a refused URL in the message', () => {
    const attempts = ['mysql://root:hunter2@localhost/test?x=1', 'postgres://u:hunter2@host:99999/db', 'pg://u:hunter2@h/db'];
    for (const text of attempts) {
      expect(() => parseDatabaseUrl(text)).toThrowError(DeclarationError);
      expect(() => parseDatabaseUrl(text)).not.toThrowError(/hunter2/);
    }
  });
});
