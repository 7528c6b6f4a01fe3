import { describe, expect, it } from 'vitest';
import { DeclarationError, UnsupportedError } from '../errors.js';
import { Broker } from './broker.js';

describe('Broker lifecycle', () => {
  it('says to create a new Broker when start() follows stop()', async () => {
    const broker = new Broker({ database: 'sqlite::memory:' });
    await broker.stop();
    const failure = await broker.start().catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(DeclarationError);
    expect((failure as Error).message).toMatch(/this broker has stopped .* create a new Broker, with its subscriptions, to run again/);
    expect((failure as Error).message).not.toMatch(/already called/);
  });
});

describe('Broker publish from JavaScript', () => {
  it('says what a publish takes when given something other than a queue', async () => {
    const broker = new Broker({ database: 'sqlite::memory:' });
    await broker.start();
    try {
      for (const notAQueue of [{}, 'jobs', null]) {
        await expect(broker.publish(notAQueue as never, { n: 1 })).rejects.toThrow(
          new DeclarationError('publish needs a queue: table.queue("name") of a table from defineTable'),
        );
        await expect(broker.publishMany(notAQueue as never, [])).rejects.toThrow(
          new DeclarationError('publishMany needs a queue: table.queue("name") of a table from defineTable'),
        );
      }
    } finally {
      await broker.stop();
    }
  });
});

describe('Broker start on a database that is not a Galera node', () => {
  it('refuses the galera option anywhere but MySQL and MariaDB', async () => {
    const broker = new Broker({ database: 'sqlite::memory:', galera: { singleWriter: true } });
    const failure = await broker.start().catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(UnsupportedError);
    expect(failure).toMatchObject({ feature: 'galera', database: 'sqlite' });
    expect((failure as Error).message).toMatch(/^galera is for MySQL and MariaDB Galera clusters, and the database is sqlite .*; remove the option$/);
  });
});

describe('Broker start on a database that is not PostgreSQL', () => {
  it('refuses the pooler option, which only PostgreSQL poolers take', async () => {
    const broker = new Broker({ database: 'sqlite::memory:', pooler: 'transaction' });
    const failure = await broker.start().catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(UnsupportedError);
    expect(failure).toMatchObject({ feature: 'pooler', database: 'sqlite' });
    expect((failure as Error).message).toMatch(/^pooler is for PostgreSQL poolers such as PgBouncer, and the database is sqlite in memory; remove it$/);
  });
});
