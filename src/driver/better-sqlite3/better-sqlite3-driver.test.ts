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
