import { loadClientLibrary } from '../client-library.js';
import type { BetterSqlite3DatabaseLike, BetterSqlite3ModuleLike } from './better-sqlite3-like.js';

/**
 * A fresh in-memory SQLite database as a handle the caller owns (`tablequeue/testing`'s default).
 * Each connection to `:memory:` is a database of its own, so the tables and the broker share
 * this one handle, passed to the broker as the service's own.
 */
export async function openMemoryDatabase(): Promise<BetterSqlite3DatabaseLike> {
  const Database = await loadClientLibrary<BetterSqlite3ModuleLike>('better-sqlite3', () => import('better-sqlite3'));
  return new Database(':memory:', { timeout: 0 });
}
