/**
 * Advisory keys held in this process, by database. SQLite has no session locks, so the advisory
 * form keeps its keys here: brokers of one process that read one database file take turns on a
 * key, but two processes reading the same file each have their own registry and may handle rows
 * of one key at the same time. Run one process per SQLite file with the advisory form.
 */
export class InProcessLockRegistry {
  readonly #keysByDatabase = new Map<unknown, Set<string>>();

  /** Takes `key` in `database` unless it is held; true when taken. */
  tryLock(database: unknown, key: string): boolean {
    let keys = this.#keysByDatabase.get(database);
    if (keys === undefined) {
      keys = new Set();
      this.#keysByDatabase.set(database, keys);
    }
    if (keys.has(key)) return false;
    keys.add(key);
    return true;
  }

  /** Returns `key`; the database's entry goes when its last key does, so closed handles are not kept. */
  unlock(database: unknown, key: string): void {
    const keys = this.#keysByDatabase.get(database);
    if (keys === undefined) return;
    keys.delete(key);
    if (keys.size === 0) this.#keysByDatabase.delete(database);
  }

  /** Keys held in `database` now, by any broker of this process. */
  heldCount(database: unknown): number {
    return this.#keysByDatabase.get(database)?.size ?? 0;
  }
}

/** The one registry of the process: every broker and subscription shares it. */
export const inProcessLocks = new InProcessLockRegistry();
