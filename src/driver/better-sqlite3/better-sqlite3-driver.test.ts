import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConnectionError } from '../../errors.js';
import { BetterSqlite3Driver } from './better-sqlite3-driver.js';

describe('better-sqlite3 driver on the service\'s own handle', () => {
  let folder: string;
  beforeEach(async () => {
    folder = await mkdtemp(join(tmpdir(), 'tq-handle-'));
  });
  afterEach(async () => {
    await rm(folder, { recursive: true, force: true });
  });

  it('switches a file handle in the rollback journal to WAL when it opens, and leaves the handle open', async () => {
    const handle = new Database(join(folder, 'app.db'));
    try {
      expect(handle.pragma('journal_mode', { simple: true })).toBe('delete');
      const driver = new BetterSqlite3Driver({ database: handle });
      await driver.open();
      expect(handle.pragma('journal_mode', { simple: true })).toBe('wal');
      await driver.close();
      expect(handle.open).toBe(true);
    } finally {
      handle.close();
    }
    // WAL belongs to the file: a later connection finds it.
    const reopened = new Database(join(folder, 'app.db'));
    expect(reopened.pragma('journal_mode', { simple: true })).toBe('wal');
    reopened.close();
  });

  it('refuses a file handle it cannot switch, saying how to switch it', async () => {
    const handle = new Database(join(folder, 'app.db'));
    try {
      handle.exec('BEGIN IMMEDIATE');
      const opening = new BetterSqlite3Driver({ database: handle }).open();
      await expect(opening).rejects.toBeInstanceOf(ConnectionError);
      await expect(opening).rejects.toThrow(/could not switch sqlite file .*app\.db to WAL .*db\.pragma\('journal_mode = WAL'\)/);
      handle.exec('ROLLBACK');
      expect(handle.pragma('journal_mode', { simple: true })).toBe('delete');
    } finally {
      handle.close();
    }
  });

  it('leaves a transaction the service opened on its handle to the service when a lent connection ends', async () => {
    const handle = new Database(':memory:');
    try {
      handle.exec('CREATE TABLE items (value INTEGER)');
      const driver = new BetterSqlite3Driver({ database: handle });
      await driver.open();
      handle.exec('BEGIN');
      handle.exec('INSERT INTO items VALUES (1)');
      // A claim that begins its own transaction finds the service's open, and gives up.
      const connection = await driver.acquire();
      await expect(connection.execute({ name: 'begin', sql: 'BEGIN IMMEDIATE', values: [] })).rejects.toThrow(/within a transaction/);
      connection.release();
      expect(handle.inTransaction).toBe(true);
      handle.exec('COMMIT');
      expect(handle.prepare('SELECT value FROM items').pluck().all()).toEqual([1]);
      await driver.close();
    } finally {
      handle.close();
    }
  });

  it('rolls back a transaction its own connection opened and left open', async () => {
    const handle = new Database(':memory:');
    try {
      handle.exec('CREATE TABLE items (value INTEGER)');
      const driver = new BetterSqlite3Driver({ database: handle });
      await driver.open();
      const connection = await driver.acquire();
      await connection.execute({ name: 'begin', sql: 'BEGIN IMMEDIATE', values: [] });
      await connection.execute({ name: 'insert', sql: 'INSERT INTO items VALUES (2)', values: [] });
      connection.destroy();
      expect(handle.inTransaction).toBe(false);
      expect(handle.prepare('SELECT value FROM items').pluck().all()).toEqual([]);
      await driver.close();
    } finally {
      handle.close();
    }
  });

  it('leaves an in-memory handle in its own journal mode', async () => {
    const handle = new Database(':memory:');
    try {
      const driver = new BetterSqlite3Driver({ database: handle });
      await driver.open();
      expect(handle.pragma('journal_mode', { simple: true })).toBe('memory');
      await driver.close();
    } finally {
      handle.close();
    }
  });
});
