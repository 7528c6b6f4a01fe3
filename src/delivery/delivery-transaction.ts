import type { Connection, QueryResult } from '../driver/driver.js';
import { TransactionEndedError } from '../errors.js';
import type { BoundStatement } from '../statement.js';

/**
 * `context.tx` in transactional mode: the delivery's own transaction. What the handler writes
 * through it commits together with an ack and is rolled back by every other outcome, and by a
 * throw. Pass it as `publish(queue, payload, { tx: context.tx })` to publish inside it.
 */
export interface HandlerTransaction {
  /** Runs a query inside the delivery's transaction. `$1` placeholders on Postgres, `?` elsewhere. */
  query<Row = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<Row[]>;
}

/**
 * The handler's side of a delivery's transaction. The claim form that opened the transaction
 * keeps the connection and ends the transaction; this object only lends it, until the handler
 * returns.
 */
export class DeliveryTransaction implements HandlerTransaction {
  readonly #connection: Connection;
  readonly #messageId: string;
  #afterCommit: (() => void)[] = [];
  #isLent = true;
  /** The handler's statements that have not answered yet. */
  #runningCount = 0;

  constructor(connection: Connection, messageId: string) {
    this.#connection = connection;
    this.#messageId = messageId;
  }

  async query<Row = Record<string, unknown>>(sql: string, params: readonly unknown[] = []): Promise<Row[]> {
    return (await this.#execute({ name: 'context.tx.query', sql, values: params })).rows as Row[];
  }

  /**
   * The transaction as a connection, for statements the broker runs in it on the handler's
   * behalf (a publish with `tx`). Releasing or destroying it does nothing: the form ends the
   * delivery's connection when it settles.
   */
  asConnection(): Connection {
    return {
      execute: (statement) => this.#execute(statement),
      prepare: async (statement) => {
        this.#requireLent();
        await this.#connection.prepare(statement);
      },
      release: () => undefined,
      destroy: () => undefined,
    };
  }

  /** Runs `callback` once the transaction commits, and never when it rolls back. */
  afterCommit(callback: () => void): void {
    this.#requireLent();
    this.#afterCommit.push(callback);
  }

  /** The handler returned: from now on the transaction belongs to the settlement alone. */
  endLoan(): void {
    this.#isLent = false;
  }

  /**
   * The handler ran out of time (`timeoutMs`) and is given up on: the loan ends, and a statement
   * of the handler's that still runs is cancelled on the server through `cancel` (the driver's
   * `cancelRunningOn`), since the settlement's own statements would otherwise queue behind it
   * for as long as it runs. The transaction stays open for the settlement, which rolls the
   * handler's writes back as for any failure.
   */
  async interrupt(cancel: (connection: Connection) => Promise<void>): Promise<void> {
    this.endLoan();
    if (this.#runningCount > 0) await cancel(this.#connection);
  }

  /** The form committed the handler's writes. */
  committed(): void {
    this.endLoan();
    const callbacks = this.#afterCommit;
    this.#afterCommit = [];
    for (const callback of callbacks) callback();
  }

  /** The form rolled the handler's writes back. */
  rolledBack(): void {
    this.endLoan();
    this.#afterCommit = [];
  }

  async #execute(statement: BoundStatement): Promise<QueryResult> {
    this.#requireLent();
    this.#runningCount += 1;
    try {
      return await this.#connection.execute(statement);
    } finally {
      this.#runningCount -= 1;
    }
  }

  #requireLent(): void {
    if (!this.#isLent) throw new TransactionEndedError({ id: this.#messageId });
  }
}
