import { ADVISORY_KEY_COLUMN } from '../dialect/advisory-statements.js';
import type { Connection } from '../driver/driver.js';
import { bindStatement, type Statement } from '../statement.js';
import type { FormContext } from './form-context.js';

/**
 * `concurrency.global` in the advisory lock form: the queue has `global` slot keys, and a
 * delivery holds one of them beside its row's key, taken without waiting before the row's. So at
 * most `global` rows of the queue are in work across every session of every process; a session
 * that ends (its process killed) lets go of its slot with its row's key, at once. No table is
 * needed: the slots are locks like the rows' keys (SQLite: keys in the process's registry).
 */
export class AdvisorySlots {
  /** The slot keys' statement, for the start-up prepare check. */
  readonly statement: Statement;
  readonly #global: number;
  readonly #group: string;
  #keys: Promise<readonly string[]> | undefined;
  /**
   * Where the next search for a free slot starts, just past the slot taken last: a broker's
   * deliveries spread over the slots instead of all trying slot 1 first.
   */
  #next = 0;

  constructor(context: FormContext, global: number) {
    this.statement = context.dialect.advisory.slotKeys(context.spec);
    this.#global = global;
    this.#group = context.group ?? '';
  }

  /**
   * Takes the first slot `tryTake` confirms, trying each at most once from the next one; the
   * slot's key, or undefined when every slot is held (the limit is reached).
   */
  async take(connection: Connection, tryTake: (key: string) => Promise<boolean>): Promise<string | undefined> {
    const keys = await this.#keysOn(connection);
    for (let offset = 0; offset < keys.length; offset += 1) {
      const index = (this.#next + offset) % keys.length;
      if (await tryTake(keys[index]!)) {
        this.#next = (index + 1) % keys.length;
        return keys[index];
      }
    }
    return undefined;
  }

  /** Read once, as the database spells them (MySQL: within the connection's database); read again after a failure. */
  #keysOn(connection: Connection): Promise<readonly string[]> {
    this.#keys ??= connection
      .execute(bindStatement(this.statement, { group: this.#group, slots: this.#global }))
      .then((result) => result.rows.map((row) => String(row[ADVISORY_KEY_COLUMN])));
    this.#keys.catch(() => {
      this.#keys = undefined;
    });
    return this.#keys;
  }
}
