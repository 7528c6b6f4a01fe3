import { ADVISORY_CONFIRMED_COLUMN, ADVISORY_KEY_COLUMN, type AdvisoryTake } from '../dialect/advisory-statements.js';
import { inTransaction, withConnection } from '../driver/connection-scope.js';
import type { Connection } from '../driver/driver.js';
import { DeliveryTransaction } from '../delivery/delivery-transaction.js';
import { bindStatement, type Statement } from '../statement.js';
import { commitsHandlerWrites, settlementValues, type ClaimedRow, type HeldRow, type Settlement } from './claim-form.js';
import type { FormContext } from './form-context.js';
import { fetchRows, serviceStatementsOf, settlementStatementNameOf, type ServiceStatementSet } from './service-statements.js';

/** The statements both advisory forms run, rendered once when the subscription opens. */
export interface AdvisoryStatementSet {
  readonly candidates: Statement;
  readonly take: AdvisoryTake;
  readonly begin: Statement[];
  readonly commit: Statement;
  readonly rollback: Statement;
  readonly settlements: Readonly<Record<Settlement['kind'], Statement[]>>;
  /** Transactional mode: a delivery's transaction, at the table's isolation level or begin mode. */
  readonly beginDelivery: Statement[];
}

/** A claimable row and its lock key as the database rendered it. */
export interface Candidate {
  readonly idValue: unknown;
  readonly key: string;
}

/**
 * What the two advisory forms share: the candidate select, the take, the settlement of a row,
 * the delivery's transaction in transactional mode, and the connections claims and deliveries
 * hold, each ended once. The forms differ in where a key is held: a session lock
 * (`SessionLockForm`) or the in-process registry (`InProcessLockForm`).
 */
export class AdvisoryClaims {
  readonly context: FormContext;
  readonly statements: AdvisoryStatementSet;
  /** The table's statements of the service's own; undefined without. */
  readonly service: ServiceStatementSet | undefined;
  /** Connections claims hold right now: the candidate select's, and rows not yet handed out. */
  readonly #claimConnections = new Set<Connection>();
  /** Connections of deliveries handed out and not yet settled or handed back. */
  readonly #deliveryConnections = new Set<Connection>();

  constructor(context: FormContext) {
    this.context = context;
    this.service = serviceStatementsOf(context);
    this.statements = renderAdvisoryStatements(context);
  }

  /** The statements for the start-up prepare check, besides a form's own. */
  get statementList(): Statement[] {
    const { candidates, take, settlements } = this.statements;
    const service = this.service?.statements ?? [];
    return [candidates, ...(take.kind === 'single' ? [take.statement] : [take.count, take.read]), ...Object.values(settlements).flat(), ...service];
  }

  /** Connections that deliveries hold: one per row handed out and not yet settled. */
  get deliveryConnectionCount(): number {
    return this.#deliveryConnections.size;
  }

  /** A connection for a claim; the claim hands it to a delivery or ends it. */
  async acquire(): Promise<Connection> {
    const connection = await this.context.driver.acquire();
    this.#claimConnections.add(connection);
    return connection;
  }

  /** The claim handed these connections to their deliveries. */
  handOver(connections: Iterable<Connection>): void {
    for (const connection of connections) {
      this.#claimConnections.delete(connection);
      this.#deliveryConnections.add(connection);
    }
  }

  /** Ends a connection a claim or a delivery holds, once. */
  end(connection: Connection, how: 'release' | 'destroy'): void {
    if (!this.#claimConnections.delete(connection) && !this.#deliveryConnections.delete(connection)) return;
    if (how === 'release') connection.release();
    else connection.destroy();
  }

  /** Candidates in claim order, one per key: a second row of a key would only fail its lock. */
  async candidates(connection: Connection, limit: number, now: Date): Promise<Candidate[]> {
    const { spec, group } = this.context;
    const select = bindStatement(this.statements.candidates, { group, now, limit });
    const candidates: Candidate[] = [];
    const keys = new Set<string>();
    for (const row of (await connection.execute(select)).rows) {
      const key = String(row[ADVISORY_KEY_COLUMN]);
      if (keys.has(key)) continue;
      keys.add(key);
      candidates.push({ idValue: row[spec.id.column], key });
    }
    return candidates;
  }

  /**
   * The row with the attempt as it stood before, or undefined when it is no longer claimable.
   * With a fetch of the service's own, the row as it reads it, the attempt still the take's; a
   * fetch that fails or finds no row throws, and the claim ends the session.
   */
  async take(connection: Connection, candidate: Candidate, now: Date): Promise<Record<string, unknown> | undefined> {
    const row = await this.#takeRow(connection, candidate, now);
    const fetch = this.service?.fetch;
    if (row === undefined || fetch === undefined) return row;
    const [fetched] = await fetchRows(connection, this.context, fetch, [candidate.idValue]);
    const attempt = this.context.spec.attempt;
    if (attempt !== undefined && attempt in fetched!) fetched![attempt] = row[attempt];
    return fetched;
  }

  async #takeRow(connection: Connection, candidate: Candidate, now: Date): Promise<Record<string, unknown> | undefined> {
    const values = { id: candidate.idValue, group: this.context.group, now };
    const take = this.statements.take;
    if (take.kind === 'single') return (await connection.execute(bindStatement(take.statement, values))).rows[0];
    if ((await connection.execute(bindStatement(take.count, values))).affectedRows === 0) return undefined;
    return (await connection.execute(bindStatement(take.read, values))).rows[0];
  }

  /** Transactional mode: opens the delivery's transaction on the connection it keeps. */
  async openTransaction(connection: Connection, claimed: ClaimedRow): Promise<DeliveryTransaction | undefined> {
    if (!this.context.transactional) return undefined;
    for (const statement of this.statements.beginDelivery) await connection.execute(bindStatement(statement, {}));
    return new DeliveryTransaction(connection, claimed.id);
  }

  /** Settles on a connection of its own, taken only for the settlement's statements. */
  async settleAlone(claimed: ClaimedRow, settlement: Settlement): Promise<void> {
    if (this.#statementsOf(settlement).statements.length === 0) return;
    await withConnection(this.context.driver, (connection) => this.#runSettlement(connection, claimed, settlement));
  }

  /**
   * Settles on the connection the delivery holds. Transactional mode: an ack runs inside the
   * delivery's transaction and commits with the handler's writes; anything else rolls them back
   * first. A failure leaves the session's state unknown: ending it rolls back and drops the
   * lock, and the row returns as it was.
   */
  async settleOnHeldConnection(
    connection: Connection,
    transaction: DeliveryTransaction | undefined,
    claimed: ClaimedRow,
    settlement: Settlement,
  ): Promise<void> {
    const keepsHandlerWrites = transaction !== undefined && commitsHandlerWrites(settlement);
    try {
      transaction?.endLoan();
      if (transaction !== undefined && !keepsHandlerWrites) {
        await connection.execute(bindStatement(this.statements.rollback, {}));
        transaction.rolledBack();
      }
      await this.#runSettlement(connection, claimed, settlement, keepsHandlerWrites);
      if (keepsHandlerWrites) await connection.execute(bindStatement(this.statements.commit, {}));
    } catch (error) {
      transaction?.rolledBack();
      this.end(connection, 'destroy');
      throw error;
    }
    transaction?.committed();
  }

  /**
   * Transactional mode: rolls the handler's writes back before a hand back; true when the
   * connection is still fit for the unlock. A failed rollback ends the session instead, which
   * rolls back and drops the lock.
   */
  async rollBackHandlerWrites(connection: Connection, transaction: DeliveryTransaction | undefined): Promise<boolean> {
    if (transaction === undefined) return true;
    transaction.endLoan();
    transaction.rolledBack();
    try {
      await connection.execute(bindStatement(this.statements.rollback, {}));
      return true;
    } catch {
      this.end(connection, 'destroy');
      return false;
    }
  }

  /**
   * No statement for a retry; a move into a table is two statements in one transaction, and the
   * service's own statements always run in one. `inTransaction`: the delivery's is open already.
   */
  async #runSettlement(connection: Connection, claimed: ClaimedRow, settlement: Settlement, inTransactionAlready = false): Promise<void> {
    const { statements, isOwn } = this.#statementsOf(settlement);
    const values = settlementValues(claimed.idValue, settlement);
    const run = async () => {
      for (const statement of statements) await connection.execute(bindStatement(statement, values));
    };
    await (inTransactionAlready || (statements.length <= 1 && !isOwn) ? run() : inTransaction(connection, this.statements, run));
  }

  #statementsOf(settlement: Settlement): { statements: readonly Statement[]; isOwn: boolean } {
    const own = this.service?.settlements[settlementStatementNameOf(settlement)];
    return own === undefined ? { statements: this.statements.settlements[settlement.kind], isOwn: false } : { statements: own, isOwn: true };
  }
}

/**
 * Runs a lock or unlock statement for `key`: true when its one value is 1 (or true). A dialect's
 * names the column `ADVISORY_CONFIRMED_COLUMN`; one of the service's own answers in its first column.
 */
export async function confirms(connection: Connection, statement: Statement, key: string): Promise<boolean> {
  const result = await connection.execute(bindStatement(statement, { key }));
  const answer = result.rows[0];
  if (answer === undefined) return false;
  const value = ADVISORY_CONFIRMED_COLUMN in answer ? answer[ADVISORY_CONFIRMED_COLUMN] : answer[result.columns[0] ?? ''];
  return value === true || Number(value) === 1;
}

/**
 * A held row that settles once. A hand back that meets a settlement already running waits for
 * it: the settlement unlocks when it ends.
 */
export function holdUntilSettled(
  claimed: ClaimedRow,
  transaction: DeliveryTransaction | undefined,
  settle: (settlement: Settlement) => Promise<void>,
  handBack: () => Promise<void>,
): HeldRow {
  let ending: Promise<void> | undefined;
  return {
    ...claimed,
    transaction,
    settle: (settlement) => {
      if (ending !== undefined) return Promise.reject(new TypeError(`row ${claimed.id} was already settled`));
      ending = settle(settlement);
      return ending;
    },
    handBack: () => {
      ending ??= handBack();
      return ending.catch(() => undefined);
    },
  };
}

function renderAdvisoryStatements(context: FormContext): AdvisoryStatementSet {
  const { dialect, spec, columns, deadLetter } = context;
  const retryAfter = dialect.advisory.retryAfter(spec);
  return {
    candidates: dialect.advisory.candidates(spec),
    take: dialect.advisory.take(spec, columns),
    begin: dialect.session.begin({ sqliteBegin: 'immediate' }),
    commit: dialect.session.commit(),
    beginDelivery: dialect.session.begin({ isolation: spec.isolation, sqliteBegin: spec.sqliteBegin }),
    rollback: dialect.session.rollback(),
    settlements: {
      finish: [dialect.settle.finish(spec, { fenced: false })],
      // Unlocking returns the row: the take counted the attempt already.
      retry: [],
      retryAfter: retryAfter ? [retryAfter] : [],
      deadLetter: deadLetter ? dialect.settle.deadLetter(spec, columns, deadLetter, { fenced: false }) : [],
    },
  };
}
