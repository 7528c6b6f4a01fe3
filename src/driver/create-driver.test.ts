import { describe, expect, it } from 'vitest';
import { DeclarationError } from '../errors.js';
import { loadClientLibrary } from './client-library.js';
import { createDriver } from './create-driver.js';

const fakePgPool = {
  connect: () => undefined,
  totalCount: 0,
  idleCount: 0,
  waitingCount: 0,
  options: { max: 4, host: 'db', port: 6432 },
};
const fakeMysql2Pool = {
  getConnection: () => undefined,
  config: { connectionLimit: 7, connectionConfig: { host: 'my', port: 3307, clientFlags: 2 } },
};
const fakeSqliteDatabase = {
  prepare: () => undefined,
  pragma: () => undefined,
  name: 'app.db',
  memory: false,
  open: true,
};

describe('createDriver', () => {
  it.each([
    ['postgres://u@h:5433/db', 'postgres', 'postgres at h:5433'],
    ['mysql://u@h/db', 'mysql', 'mysql at h:3306'],
    ['mariadb://u@h:3307/db', 'mysql', 'mariadb at h:3307'],
    ['sqlite:./queue.db', 'sqlite', 'sqlite file ./queue.db'],
    ['sqlite::memory:', 'sqlite', 'sqlite in memory'],
  ])('opens nothing for %s until open(), and owns the pool it will open', (url, kind, description) => {
    const driver = createDriver(url, { poolSize: 4 });
    expect(driver).toMatchObject({ kind, description, ownsPool: true });
    const size = kind === 'sqlite' ? 1 : 4;
    expect(driver.stats()).toEqual({ size, held: 0, idle: 0, spare: size, maxHeld: 0, reservedForRenewals: 0 });
  });

  it('sizes URL pools at ten connections unless told', () => {
    expect(createDriver('postgres://h/db').stats().size).toBe(10);
  });

  it('tells the service pools and handles apart by shape, and keeps their own size', () => {
    expect(createDriver(fakePgPool, { poolSize: 99 })).toMatchObject({
      kind: 'postgres',
      ownsPool: false,
      description: 'postgres at db:6432',
    });
    expect(createDriver(fakePgPool).stats().size).toBe(4);
    expect(createDriver(fakeMysql2Pool)).toMatchObject({
      kind: 'mysql',
      ownsPool: false,
      description: 'mysql at my:3307',
    });
    expect(createDriver({ pool: fakeMysql2Pool, getConnection: () => undefined }).kind).toBe('mysql');
    expect(createDriver(fakeMysql2Pool).stats().size).toBe(7);
    expect(createDriver(fakeSqliteDatabase)).toMatchObject({
      kind: 'sqlite',
      ownsPool: false,
      description: 'sqlite file app.db',
    });
  });

  it('refuses a mysql2 pool whose UPDATE would count changed rows instead of matched ones', () => {
    const withoutFoundRows = { ...fakeMysql2Pool, config: { connectionConfig: { clientFlags: 0 } } };
    expect(() => createDriver(withoutFoundRows)).toThrowError(/FOUND_ROWS/);
  });

  it.each([
    ['a pg client', { query: () => undefined, on: () => undefined }, /got an object of another shape/],
    ['a class instance', new (class Client {})(), /got a Client/],
    ['null', null as unknown as object, /got null/],
  ])('refuses %s, saying what it accepts', (_case, value, got) => {
    expect(() => createDriver(value)).toThrowError(DeclarationError);
    expect(() => createDriver(value)).toThrowError(/a URL .*a pg\.Pool, a mysql2 pool or a better-sqlite3 Database/);
    expect(() => createDriver(value)).toThrowError(got);
  });

  it.each([0, -1, 2.5])('refuses a pool size of %s', (poolSize) => {
    expect(() => createDriver('postgres://h/db', { poolSize })).toThrowError(DeclarationError);
  });
});

describe('loadClientLibrary', () => {
  it('says how to install a client package that is missing', async () => {
    const failure = loadClientLibrary('tq-no-such-package', () => import('tq-no-such-package' as string));
    await expect(failure).rejects.toThrowError(DeclarationError);
    await expect(failure).rejects.toThrowError(/npm install tq-no-such-package/);
  });
});
