import { DeliveryTransaction } from '../delivery/delivery-transaction.js';
import { executeAll } from '../driver/connection-scope.js';
import type { Connection, QueryResult } from '../driver/driver.js';
import { BatchRolledBackError } from '../errors.js';
import { createDeferred } from '../internal/deferred.js';
import { powerOfTwoAtLeast } from '../internal/power-of-two.js';
import { bindRepeated, bindStatement, type BoundStatement, type Statement } from '../statement.js';
import { commitsHandlerWrites, settlementValues, type ClaimedRow, type HeldRow, type Settlement } from './claim-form.js';
import { settlementStatementNameOf, type ServiceStatementSet } from './service-statements.js';

/** The statements a claim transaction runs after the claim, rendered once when the subscription opens. */
export interface ClaimTransactionStatements {
  readonly commit: Statement;
  /** Transactional mode: undoes the handler's writes, back to the savepoint set after the claim. */
  readonly rollbackToSavepoint: Statement;
  readonly settlements: Readonly<Record<Settlement['kind'], Statement[]>>;
  /** The table's settlements of the service's own, which replace the built-in ones of their kind. */
  readonly serviceSettlements?: ServiceStatementSet['settlements'] | undefined;
  /**
   * Finishes (ack, drop) of `rowCount` rows in one statement, where the dialect has one. A
   * batch's finishes then wait for its last settlement and go together before the commit,
   * instead of one round trip per row while the transaction holds the batch.
   */
  readonly finishMany: ((rowCount: number) => Statement) | undefined;
}

/** Rows per grouped finish: the statement is padded to a power of two up to this, then split. */
export const MAX_FINISHES_PER_STATEMENT = 256;

/**
 * A claim to run on a claim transaction's connection right after its COMMIT, written with the
 * last settlement and the COMMIT in one round trip (PostgreSQL, whose client pipelines).
 */
export interface ChainedClaimRun {
  /** BEGIN and the claim, bound. */
  readonly statements: readonly BoundStatement[];
  /**
   * The claim's rows, read on `connection` in its open transaction: from here the claim owns the
   * connection (it holds the rows, or ends the transaction and releases it). Never rejects.
   */
  claimed(connection: Connection, rows: Record<string, unknown>[]): Promise<void>;
  /** BEGIN or the claim failed after the COMMIT succeeded: the connection is ended here. */
  failed(error: unknown): void;
  /** The settlement or the COMMIT failed, so the claim's result counts for nothing. */
  abandoned(): void;
}

export interface ClaimTransactionOptions {
  readonly statements: ClaimTransactionStatements;
  readonly connection: Connection;
  /**
   * A claim to chain after the commit of a one-row, non-transactional claim, asked when its
   * settlement is about to commit; undefined (or returning undefined) for none.
   */
  readonly chainClaim?: (() => ChainedClaimRun | undefined) | undefined;
  readonly rowCount: number;
  /** Names the subscription in `BatchRolledBackError`. */
  readonly subscription: string;
  /** Transactional mode: the one row's handler writes into this transaction, after its savepoint. */
  readonly transactional: boolean;
}

/**
 * The open transaction of one row lock claim, shared by the rows it took (a batch, or one row).
 * Each row's settlement runs its statements in it; the last one commits and returns the
 * connection, so the settlements take effect together. The finishes of a batch wait for the
 * last settlement and run as one statement just before the commit. A failed statement ends the
 * session: the server rolls the whole claim back and every row returns to the queue as it was.
 * The rows whose statement failed get that error (every finished row, when the grouped finish
 * failed); the others get `BatchRolledBackError`, whether they settled before or after it,
 * since their settlements never took effect.
 */
export class ClaimTransaction {
  readonly #options: ClaimTransactionOptions;
  readonly #ended = createDeferred();
  #open: number;
  #failure: unknown;
  #queue: Promise<unknown> = Promise.resolve();
  #handlerTransaction: DeliveryTransaction | undefined;
  /** A batch's finished rows, waiting for the grouped finish before the commit. */
  readonly #finished: ClaimedRow[] = [];
  /** The finished rows of a grouped finish that failed: the failure is theirs, not a rollback. */
  #failedFinishes: ReadonlySet<ClaimedRow> | undefined;

  constructor(options: ClaimTransactionOptions) {
    this.#options = options;
    this.#open = options.rowCount;
    // Rows that failed on their own statement never wait for the end; the failure is theirs.
    this.#ended.promise.catch(() => undefined);
  }

  /** Settles once the claim's transaction has ended, committed or not; never rejects. */
  get ended(): Promise<void> {
    return this.#ended.promise.then(
      () => undefined,
      () => undefined,
    );
  }

  hold(claimed: ClaimedRow): HeldRow {
    return new ClaimTransactionRow(claimed, this.#lendTransaction(claimed), this.#rowSettler);
  }

  /** What every row of this claim settles through; one per claim, not one per row. */
  readonly #rowSettler: RowSettler = {
    settle: async (claimed, settlement) => {
      await this.#serial(() => this.#settle(claimed, settlement));
      await this.#untilCommitted(claimed);
    },
    // The row returns to the queue whether the claim commits or rolls back: nothing to wait for.
    handBack: () => this.#serial(() => this.#handBack()),
  };

  /** Transactional mode lends the claim's one row the transaction, from its savepoint on. */
  #lendTransaction(claimed: ClaimedRow): DeliveryTransaction | undefined {
    if (!this.#options.transactional) return undefined;
    if (this.#handlerTransaction !== undefined || this.#options.rowCount !== 1) {
      throw new TypeError('a transactional claim takes one row: transactional mode is for single deliveries');
    }
    this.#handlerTransaction = new DeliveryTransaction(this.#options.connection, claimed.id);
    return this.#handlerTransaction;
  }

  /** Statements on one connection run one after another, in settlement order. */
  #serial(run: () => Promise<void>): Promise<void> {
    const next = this.#queue.then(run);
    this.#queue = next.catch(() => undefined);
    return next;
  }

  async #untilCommitted(claimed: ClaimedRow): Promise<void> {
    try {
      await this.#ended.promise;
    } catch (failure) {
      if (this.#failedFinishes?.has(claimed)) throw failure;
      throw new BatchRolledBackError({ id: claimed.id, subscription: this.#options.subscription, cause: failure });
    }
  }

  async #settle(claimed: ClaimedRow, settlement: Settlement): Promise<void> {
    if (this.#failure !== undefined) return;
    const { connection, statements } = this.#options;
    const values = settlementValues(claimed.idValue, settlement);
    if (settlement.kind === 'finish' && this.#options.rowCount > 1 && this.#options.statements.finishMany !== undefined) {
      this.#finished.push(claimed);
      await this.#finishRow();
      return;
    }
    const isLast = this.#open === 1 && this.#finished.length === 0;
    const chain = isLast ? this.#chainedClaim() : undefined;
    let chainAnswers: Promise<QueryResult>[] = [];
    try {
      if (!commitsHandlerWrites(settlement)) await this.#rollBackHandlerWrites();
      this.#handlerTransaction?.endLoan();
      const own = statements.serviceSettlements?.[settlementStatementNameOf(settlement)];
      const settles = (own ?? statements.settlements[settlement.kind]).map((statement) => bindStatement(statement, values));
      const committing = isLast ? [...settles, bindStatement(statements.commit, {})] : settles;
      if (chain === undefined) {
        // The last settlement goes with the COMMIT, in one round trip where the driver pipelines;
        // a failed statement aborts the transaction, and a COMMIT after it then rolls back.
        await executeAll(connection, committing);
      } else {
        const each = connection.executeEach!([...committing, ...chain.statements]);
        chainAnswers = each.slice(committing.length);
        // Each answer is awaited or caught: the claim's may reject after the settlement's did.
        for (const answer of chainAnswers) answer.catch(() => undefined);
        await Promise.all(each.slice(0, committing.length));
      }
    } catch (error) {
      chain?.abandoned();
      this.#fail(error);
      throw error;
    }
    if (isLast) {
      this.#open = 0;
      if (chain === undefined) this.#end();
      else await this.#endInto(chain, chainAnswers);
      return;
    }
    await this.#finishRow();
  }

  /** The claim to chain after this one-row claim's commit, where the client pipelines. */
  #chainedClaim(): ChainedClaimRun | undefined {
    const { connection, rowCount, transactional, chainClaim } = this.#options;
    if (chainClaim === undefined || rowCount !== 1 || transactional || connection.executeEach === undefined) return undefined;
    return chainClaim();
  }

  /**
   * Committed, and the connection goes on to the chained claim instead of back to the pool. The
   * row's settlement is done once that claim has its rows, so the worker finds them waiting.
   */
  async #endInto(run: ChainedClaimRun, answers: Promise<QueryResult>[]): Promise<void> {
    const { connection } = this.#options;
    this.#handlerTransaction?.committed();
    try {
      let rows: Record<string, unknown>[];
      try {
        rows = (await Promise.all(answers)).at(-1)!.rows;
      } catch (error) {
        connection.destroy();
        run.failed(error);
        return;
      }
      await run.claimed(connection, rows);
    } finally {
      this.#ended.resolve();
    }
  }

  async #handBack(): Promise<void> {
    if (this.#failure !== undefined) return;
    try {
      await this.#rollBackHandlerWrites();
    } catch (error) {
      this.#fail(error);
      throw error;
    }
    await this.#finishRow();
  }

  /** Transactional mode: back to the savepoint, keeping the claim's row locks (and FIFO guard). */
  async #rollBackHandlerWrites(): Promise<void> {
    const transaction = this.#handlerTransaction;
    if (transaction === undefined) return;
    transaction.endLoan();
    await this.#options.connection.execute(bindStatement(this.#options.statements.rollbackToSavepoint, {}));
    transaction.rolledBack();
  }

  async #finishRow(): Promise<void> {
    this.#open -= 1;
    if (this.#open > 0 || this.#failure !== undefined) return;
    const { connection, statements } = this.#options;
    try {
      await this.#finishTogether();
    } catch (error) {
      this.#failedFinishes = new Set(this.#finished);
      this.#fail(error);
      return;
    }
    try {
      await connection.execute(bindStatement(statements.commit, {}));
    } catch (error) {
      this.#fail(error);
      throw error;
    }
    this.#end();
  }

  /** Committed: the connection goes back to the pool and every row's settlement is done. */
  #end(): void {
    this.#options.connection.release();
    this.#handlerTransaction?.committed();
    this.#ended.resolve();
  }

  /** The batch's finishes, as few statements as the row limit allows. */
  async #finishTogether(): Promise<void> {
    const { connection, statements } = this.#options;
    const now = new Date();
    for (let first = 0; first < this.#finished.length; first += MAX_FINISHES_PER_STATEMENT) {
      const ids = this.#finished.slice(first, first + MAX_FINISHES_PER_STATEMENT).map((row) => row.idValue);
      const statement = statements.finishMany!(powerOfTwoAtLeast(ids.length));
      await connection.execute(bindRepeated(statement, ids.map((id) => ({ id })), { now }, 'id'));
    }
  }

  #fail(error: unknown): void {
    if (this.#failure !== undefined) return;
    this.#failure = error;
    // The transaction's state is unknown: ending the session rolls all of it back.
    this.#options.connection.destroy();
    this.#handlerTransaction?.rolledBack();
    this.#ended.reject(error);
  }
}

interface RowSettler {
  settle(claimed: ClaimedRow, settlement: Settlement): Promise<void>;
  handBack(): Promise<void>;
}

/**
 * A row of the claim, settled or handed back once. A class rather than an object of closures:
 * a batch makes one per row, and its methods are shared.
 */
class ClaimTransactionRow implements HeldRow {
  readonly row: Record<string, unknown>;
  readonly id: string;
  readonly idValue: unknown;
  readonly attempt: number;
  readonly transaction: DeliveryTransaction | undefined;
  /** The claimed row itself: the transaction knows its rows by this object. */
  readonly #claimed: ClaimedRow;
  readonly #settler: RowSettler;
  #isSettled = false;

  constructor(claimed: ClaimedRow, transaction: DeliveryTransaction | undefined, settler: RowSettler) {
    this.row = claimed.row;
    this.id = claimed.id;
    this.idValue = claimed.idValue;
    this.attempt = claimed.attempt;
    this.transaction = transaction;
    this.#claimed = claimed;
    this.#settler = settler;
  }

  settle(settlement: Settlement): Promise<void> {
    return this.#once() ?? this.#settler.settle(this.#claimed, settlement);
  }

  handBack(): Promise<void> {
    return this.#once() ?? this.#settler.handBack();
  }

  /** A rejection when the row was already settled; undefined the first time. */
  #once(): Promise<void> | undefined {
    if (this.#isSettled) return Promise.reject(new TypeError(`row ${this.id} was already settled`));
    this.#isSettled = true;
    return undefined;
  }
}
