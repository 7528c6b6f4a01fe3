import { DeliveryTransaction } from '../delivery/delivery-transaction.js';
import type { Connection } from '../driver/driver.js';
import { bindStatement, type Statement } from '../statement.js';

/**
 * Transactional mode, lease form: the transaction a delivery opens on its own connection after
 * its claim committed, and the connection itself until the settlement ends both. Each ending
 * happens once; later ones do nothing.
 */
export class LeaseDeliveryTransaction {
  readonly connection: Connection;
  /** What the handler gets as `context.tx`. */
  readonly lent: DeliveryTransaction;
  readonly #rollback: Statement;
  #isOpen = true;

  constructor(connection: Connection, messageId: string, rollback: Statement) {
    this.connection = connection;
    this.lent = new DeliveryTransaction(connection, messageId);
    this.#rollback = rollback;
  }

  get isOpen(): boolean {
    return this.#isOpen;
  }

  /**
   * Rolls back what the handler wrote and returns the connection. It never fails: a rollback
   * that fails ends the session instead, and the server rolls back what the session left open.
   */
  async rollBack(): Promise<void> {
    if (!this.#end()) return;
    this.lent.rolledBack();
    try {
      await this.connection.execute(bindStatement(this.#rollback, {}));
    } catch {
      this.connection.destroy();
      return;
    }
    this.connection.release();
  }

  /** The settlement committed the handler's writes with it. */
  committed(): void {
    if (!this.#end()) return;
    this.connection.release();
    this.lent.committed();
  }

  /** The transaction's state is unknown (a statement failed): the server rolls it back. */
  destroy(): void {
    if (!this.#end()) return;
    this.lent.rolledBack();
    this.connection.destroy();
  }

  #end(): boolean {
    const wasOpen = this.#isOpen;
    this.#isOpen = false;
    return wasOpen;
  }
}
