import { describe, expect, it } from 'vitest';
import { DeclarationError, UnsupportedError } from '../errors.js';
import { openDashboard, poolerShown } from './dashboard.js';

describe('openDashboard', () => {
  it('refuses a refresh interval no timer keeps before it opens anything', async () => {
    const opening = openDashboard({ database: 'sqlite::memory:', tables: ['jobs'], refreshMs: 2 ** 31 });
    await expect(opening).rejects.toThrow(DeclarationError);
    await expect(opening).rejects.toThrow(/from 100 to 2147483647, got 2147483648/);
  });

  it('refuses a pooler declared for a database that is not PostgreSQL', async () => {
    const opening = openDashboard({ database: 'sqlite::memory:', tables: ['jobs'], pooler: 'transaction' });
    await expect(opening).rejects.toThrow(UnsupportedError);
    await expect(opening).rejects.toThrow(/^pooler is for PostgreSQL poolers such as PgBouncer, and the database is sqlite in memory; remove it$/);
  });

  it('names the pooler after the database: declared, found, or both when they differ', () => {
    expect(poolerShown(undefined)).toBe('');
    expect(poolerShown({ declared: undefined, found: 'none' })).toBe('');
    expect(poolerShown({ declared: 'transaction', found: undefined })).toBe(', through a transaction pooler (declared)');
    expect(poolerShown({ declared: undefined, found: 'transaction' })).toBe(', through a transaction pooler (found)');
    expect(poolerShown({ declared: 'session', found: 'session' })).toBe(', through a session pooler');
    expect(poolerShown({ declared: 'session', found: 'transaction' })).toBe(', through a transaction pooler (found; session declared)');
    expect(poolerShown({ declared: 'session', found: 'none' })).toBe(', no pooler found (session declared)');
  });
});
