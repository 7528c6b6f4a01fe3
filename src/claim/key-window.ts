/**
 * How many claimable rows, from the head of the queue in claim order, a claim that works by
 * partition key reads the keys of: the lease form's perKey and rate-by-key claims rank them, the
 * row lock form's key slots are added and taken for them. Reading every claimable row's key
 * cost each claim in proportion to the backlog: at 1,000,000 rows on PostgreSQL, 1.76 s for a
 * lease claim under perKey (the rank sorted on disk) and 472 ms for the row lock form's take of
 * a key slot. A key whose first row lies deeper runs as the rows ahead of it settle, or at the
 * next claim that reads all of them (see `KeyWindow`).
 */
export const KEY_WINDOW_ROWS = 1_000;

/** A window over every claimable row: a 32-bit integer, which LIMIT takes on every database. */
export const KEY_WINDOW_ALL = 2_147_483_647;

/**
 * After a claim that came up short, the next reads the keys of all claimable rows, since the keys
 * in the window may all be at their limit while a key deeper in the queue has room. While they
 * stay there, this is the one read whose cost grows with the backlog, so it runs at most once a
 * second, and no more often than keeps it under a twentieth of the time: a claim that read all
 * of 1,000,000 rows for 0.6 s waits 12 s for the next.
 */
const READ_ALL_INTERVAL_MS = 1_000;
const READ_ALL_TIME_SHARE = 20;

/** The window each claim of one subscription reads keys in. */
export class KeyWindow {
  /** The last claim took fewer than it wanted. True before the first, which reads every row. */
  #isShort = true;
  /** When a claim last read every claimable row (`Date.now()`). */
  #readAllAt = Number.NEGATIVE_INFINITY;
  #readAllEveryMs = READ_ALL_INTERVAL_MS;

  /** The window of the claim about to run: `KEY_WINDOW_ROWS`, or `KEY_WINDOW_ALL` now and then after a short claim. */
  open(): number {
    if (!this.#isShort || Date.now() - this.#readAllAt < this.#readAllEveryMs) return KEY_WINDOW_ROWS;
    this.#readAllAt = Date.now();
    return KEY_WINDOW_ALL;
  }

  /** The claim that ran in `window` ended; `isShort`: it took fewer than it wanted (or failed). */
  close(window: number, isShort: boolean): void {
    this.#isShort = isShort;
    if (window === KEY_WINDOW_ALL) this.#readAllEveryMs = Math.max(READ_ALL_INTERVAL_MS, READ_ALL_TIME_SHARE * (Date.now() - this.#readAllAt));
  }
}
