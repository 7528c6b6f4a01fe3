import { ADVISORY_CONFIRMED_COLUMN, ADVISORY_KEY_COLUMN, type AdvisoryTake } from '../dialect/advisory-statements.js';
import { inTransaction, withConnection } from '../driver/connection-scope.js';
import type { Connection } from '../driver/driver.js';
import { bindStatement, type ParamValues, type Statement } from '../statement.js';
import { DeliveryTransaction } from '../delivery/delivery-transaction.js';
import { commitsHandlerWrites, type ClaimedRow, type ClaimForm, type HeldRow, type Settlement } from './claim-form.js';
import type { FormContext } from './form-context.js';
import { inProcessLocks } from './in-process-lock-registry.js';
import { readClaimedRow } from './row-values.js';

/** The statements of the advisory form, rendered once when the subscription opens. */
interface AdvisoryStatementSet {
  readonly candidates: Statement;
  /** Undefined where the database has no session locks: the keys live in `inProcessLocks`. */
  readonly sessionLocks: SessionLockStatements | undefined;
  readonly take: AdvisoryTake;
  readonly begin: Statement[];
  readonly commit: Statement;
  readonly settlements: Readonly<Record<Settlement['kind'], Statement[]>>;
  /** Transactional mode: a delivery's transaction, at the table's isolation level or begin mode. */
  readonly beginDelivery: Statement[];
  readonly rollback: Statement;
}

/** Transactional mode: the connection a delivery holds and the transaction lent on it. */
interface HeldTransaction {
  readonly connection: Connection;
  readonly transaction: DeliveryTransaction;
}

interface SessionLockStatements {
  readonly lock: Statement;
  readonly unlock: Statement;
}

/** A claimable row and its lock key as the database rendered it. */
interface Candidate {
  readonly idValue: unknown;
  readonly key: string;
}

/**
 * Advisory lock form: a claim selects candidate rows with their keys, locks each key without
 * waiting, and takes the row (counting the attempt while the row is still claimable). Rows that
 * share a key go one at a time.
 *
 * Postgres and MySQL/MariaDB: each delivery locks its key on a connection of its own and keeps
 * that connection, with no transaction open, until it settles (WP-5); the settlement runs there,
 * then the unlock returns the row or lets its successor in. A process that dies ends its
 * sessions, and the server drops their locks: the rows return at once.
 *
 * SQLite: no session locks. Keys are held in `inProcessLocks`, a claim takes a connection only
 * while its statements run, and so does a settlement; the handle is never held through a
 * handler. The registry holds within one process only.
 *
 * Transactional mode: after the take, the delivery opens a transaction on the connection it
 * holds (SQLite: the claim's, kept through the handler) and lends it to the handler. An ack
 * settles and commits inside it; anything else rolls it back first. It ends before the unlock.
 */
export class AdvisoryForm implements ClaimForm {
  readonly holdsConnection: boolean;
  readonly #context: FormContext;
  readonly #statements: AdvisoryStatementSet;
  /** Connections claims hold right now: the candidate select's, and rows not yet handed out. */
  readonly #claimConnections = new Set<Connection>();
  /** Connections claims in progress took for their further rows (see `connectionsInWork`). */
  #furtherClaimConnections = 0;
  /** Connections of deliveries handed out and not yet settled or handed back. */
  readonly #deliveryConnections = new Set<Connection>();

  constructor(context: FormContext) {
    this.#context = context;
    this.#statements = renderAdvisoryStatements(context);
    this.holdsConnection = this.#statements.sessionLocks !== undefined || context.transactional;
  }

  /** Every statement this form runs, for the start-up prepare check. */
  get statements(): Statement[] {
    const { candidates, sessionLocks, take, settlements } = this.#statements;
    return [
      candidates,
      ...(sessionLocks ? [sessionLocks.lock, sessionLocks.unlock] : []),
      ...(take.kind === 'single' ? [take.statement] : [take.count, take.read]),
      ...Object.values(settlements).flat(),
    ];
  }

  /**
   * Connections the deliveries hold (one per row, so a batch of n holds n), and those a claim in
   * progress took beyond its first for further rows: the claim loop counts only the first.
   */
  get connectionsInWork(): number {
    return this.#deliveryConnections.size + this.#furtherClaimConnections;
  }

  claim(limit: number, now: Date): Promise<HeldRow[]> {
    const sessionLocks = this.#statements.sessionLocks;
    // Transactional mode is for single deliveries.
    const rowLimit = this.#context.transactional ? 1 : limit;
    return sessionLocks ? this.#claimOnSessions(rowLimit, now, sessionLocks) : this.#claimInProcess(rowLimit, now);
  }

  close(): void {}

  /**
   * The first connection may wait for the pool (the claim loop left room for it) and runs the
   * candidate select. Each further row needs a connection the pool lends without waiting, so a
   * batch shrinks to what the pool can spare rather than wait for its own deliveries.
   */
  async #claimOnSessions(limit: number, now: Date, locks: SessionLockStatements): Promise<HeldRow[]> {
    const taken: { row: HeldRow; connection: Connection }[] = [];
    let free: Connection | undefined = await this.#acquire();
    let further = 0;
    try {
      const candidates = await this.#candidates(free, limit, now);
      for (const candidate of candidates) {
        if (taken.length >= limit) break;
        if (free === undefined) {
          free = await this.#acquireIfSpare();
          if (free === undefined) break;
          further += 1;
          this.#furtherClaimConnections += 1;
        }
        // Another claim or process took the key after the select read it.
        if (!(await confirms(free, locks.lock, candidate.key))) continue;
        const row = await this.#take(free, candidate, now);
        if (row === undefined) {
          // Settled between the select and the lock: the key goes back, with the session if unconfirmed.
          if (!(await this.#unlock(free, locks.unlock, candidate.key))) free = undefined;
          continue;
        }
        const claimed = readClaimedRow(this.#context.spec, row, false);
        const transaction = await this.#openTransaction(free, claimed);
        taken.push({ connection: free, row: this.#holdOnSession(free, locks.unlock, candidate.key, claimed, transaction) });
        free = undefined;
      }
    } catch (error) {
      // Ending the session drops whatever lock it took; rows already taken go back unhandled.
      if (free !== undefined) this.#end(free, 'destroy');
      this.#furtherClaimConnections -= further;
      await Promise.allSettled(taken.map(({ row }) => row.handBack()));
      throw error;
    }
    this.#furtherClaimConnections -= further;
    if (free !== undefined) this.#end(free, 'release');
    for (const { connection } of taken) {
      this.#claimConnections.delete(connection);
      this.#deliveryConnections.add(connection);
    }
    return taken.map(({ row }) => row);
  }

  /** SQLite: one connection for the select and the takes; the registry filters held keys. */
  async #claimInProcess(limit: number, now: Date): Promise<HeldRow[]> {
    const { driver, spec } = this.#context;
    const database = driver.databaseIdentity ?? driver;
    const taken: HeldRow[] = [];
    const connection = await this.#acquire();
    let held: HeldTransaction | undefined;
    try {
      // The select cannot see the registry: reach past the rows whose keys this process holds.
      const candidates = await this.#candidates(connection, limit + inProcessLocks.heldCount(database), now);
      for (const candidate of candidates) {
        if (taken.length >= limit) break;
        if (!inProcessLocks.tryLock(database, candidate.key)) continue;
        let claimed: ClaimedRow | undefined;
        let transaction: DeliveryTransaction | undefined;
        let isHeld = false;
        try {
          const row = await this.#take(connection, candidate, now);
          if (row === undefined) continue;
          claimed = readClaimedRow(spec, row, false);
          transaction = await this.#openTransaction(connection, claimed);
          isHeld = true;
        } finally {
          if (!isHeld) inProcessLocks.unlock(database, candidate.key);
        }
        held = transaction === undefined ? undefined : { connection, transaction };
        taken.push(this.#holdInProcess(database, candidate.key, claimed, held));
      }
    } catch (error) {
      this.#end(connection, 'destroy');
      await Promise.allSettled(taken.map((row) => row.handBack()));
      throw error;
    }
    if (held === undefined) {
      this.#end(connection, 'release');
    } else {
      this.#claimConnections.delete(connection);
      this.#deliveryConnections.add(connection);
    }
    return taken;
  }

  /** Candidates in claim order, one per key: a second row of a key would only fail its lock. */
  async #candidates(connection: Connection, limit: number, now: Date): Promise<Candidate[]> {
    const { spec, group } = this.#context;
    const select = bindStatement(this.#statements.candidates, { group, now, limit });
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

  /** The row with the attempt as it stood before, or undefined when it is no longer claimable. */
  async #take(connection: Connection, candidate: Candidate, now: Date): Promise<Record<string, unknown> | undefined> {
    const values: ParamValues = { id: candidate.idValue, group: this.#context.group, now };
    const take = this.#statements.take;
    if (take.kind === 'single') return (await connection.execute(bindStatement(take.statement, values))).rows[0];
    if ((await connection.execute(bindStatement(take.count, values))).affectedRows === 0) return undefined;
    return (await connection.execute(bindStatement(take.read, values))).rows[0];
  }

  /** Transactional mode: opens the delivery's transaction on the connection it keeps. */
  async #openTransaction(connection: Connection, claimed: ClaimedRow): Promise<DeliveryTransaction | undefined> {
    if (!this.#context.transactional) return undefined;
    for (const statement of this.#statements.beginDelivery) await connection.execute(bindStatement(statement, {}));
    return new DeliveryTransaction(connection, claimed.id);
  }

  #holdOnSession(
    connection: Connection,
    unlock: Statement,
    key: string,
    claimed: ClaimedRow,
    transaction: DeliveryTransaction | undefined,
  ): HeldRow {
    const unlockAndEnd = async () => {
      if (await this.#unlock(connection, unlock, key)) this.#end(connection, 'release');
    };
    return holdUntilSettled(
      claimed,
      transaction,
      async (settlement) => {
        await this.#settleOnHeldConnection(connection, transaction, claimed, settlement);
        await unlockAndEnd();
      },
      async () => {
        if (await this.#rollBackHandlerWrites(connection, transaction)) await unlockAndEnd();
      },
    );
  }

  #holdInProcess(database: unknown, key: string, claimed: ClaimedRow, held: HeldTransaction | undefined): HeldRow {
    if (held !== undefined) {
      const { connection, transaction } = held;
      return holdUntilSettled(
        claimed,
        transaction,
        async (settlement) => {
          try {
            await this.#settleOnHeldConnection(connection, transaction, claimed, settlement);
            this.#end(connection, 'release');
          } finally {
            inProcessLocks.unlock(database, key);
          }
        },
        async () => {
          if (await this.#rollBackHandlerWrites(connection, transaction)) this.#end(connection, 'release');
          inProcessLocks.unlock(database, key);
        },
      );
    }
    return holdUntilSettled(
      claimed,
      undefined,
      async (settlement) => {
        try {
          if (this.#statements.settlements[settlement.kind].length === 0) return;
          await withConnection(this.#context.driver, (connection) => this.#runSettlement(connection, claimed, settlement));
        } finally {
          inProcessLocks.unlock(database, key);
        }
      },
      async () => inProcessLocks.unlock(database, key),
    );
  }

  /**
   * Settles on the connection the delivery holds. Transactional mode: an ack runs inside the
   * delivery's transaction and commits with the handler's writes; anything else rolls them back
   * first. A failure leaves the session's state unknown: ending it rolls back and drops the
   * lock, and the row returns as it was.
   */
  async #settleOnHeldConnection(
    connection: Connection,
    transaction: DeliveryTransaction | undefined,
    claimed: ClaimedRow,
    settlement: Settlement,
  ): Promise<void> {
    const keepsHandlerWrites = transaction !== undefined && commitsHandlerWrites(settlement);
    try {
      transaction?.endLoan();
      if (transaction !== undefined && !keepsHandlerWrites) {
        await connection.execute(bindStatement(this.#statements.rollback, {}));
        transaction.rolledBack();
      }
      await this.#runSettlement(connection, claimed, settlement);
      if (keepsHandlerWrites) await connection.execute(bindStatement(this.#statements.commit, {}));
    } catch (error) {
      transaction?.rolledBack();
      this.#end(connection, 'destroy');
      throw error;
    }
    transaction?.committed();
  }

  /**
   * Transactional mode: rolls the handler's writes back before a hand back; true when the
   * connection is still fit for the unlock. A failed rollback ends the session instead, which
   * rolls back and drops the lock.
   */
  async #rollBackHandlerWrites(connection: Connection, transaction: DeliveryTransaction | undefined): Promise<boolean> {
    if (transaction === undefined) return true;
    transaction.endLoan();
    transaction.rolledBack();
    try {
      await connection.execute(bindStatement(this.#statements.rollback, {}));
      return true;
    } catch {
      this.#end(connection, 'destroy');
      return false;
    }
  }

  /** No statement for a retry; a move into a table is two statements in one transaction. */
  async #runSettlement(connection: Connection, claimed: ClaimedRow, settlement: Settlement): Promise<void> {
    const statements = this.#statements.settlements[settlement.kind];
    const values: ParamValues = {
      id: claimed.idValue,
      now: new Date(),
      retryAfterAt: settlement.kind === 'retryAfter' ? settlement.at : undefined,
      delayMicroseconds: settlement.kind === 'retryAfter' ? Math.round(settlement.delayMs * 1000) : undefined,
      destination: settlement.kind === 'deadLetter' && settlement.target.kind === 'group' ? settlement.target.group : undefined,
      lastError: settlement.kind === 'deadLetter' ? settlement.lastError : undefined,
    };
    const run = async () => {
      for (const statement of statements) await connection.execute(bindStatement(statement, values));
    };
    await (statements.length <= 1 ? run() : inTransaction(connection, this.#statements, run));
  }

  /**
   * Unlocks `key` on its session; true when confirmed. A session that does not confirm (0, NULL
   * or an error) may still hold the key, so it is destroyed: the server drops its locks.
   */
  async #unlock(connection: Connection, unlock: Statement, key: string): Promise<boolean> {
    // A failed unlock is answered like an unconfirmed one: ending the session is what releases the key.
    const isConfirmed = await confirms(connection, unlock, key).catch(() => false);
    if (!isConfirmed) this.#end(connection, 'destroy');
    return isConfirmed;
  }

  async #acquire(): Promise<Connection> {
    const connection = await this.#context.driver.acquire();
    this.#claimConnections.add(connection);
    return connection;
  }

  /**
   * A further connection for a claim, only when it comes without waiting and leaves one spare
   * (as a parallel claim, WP-3), and within the budget the pool's subscriptions share (WP-2, WP-4).
   */
  async #acquireIfSpare(): Promise<Connection | undefined> {
    if (!this.#context.hasRoomForConnection() || this.#context.driver.stats().spare < 2) return undefined;
    return this.#acquire();
  }

  /** Ends a connection this form holds, once. */
  #end(connection: Connection, how: 'release' | 'destroy'): void {
    if (!this.#claimConnections.delete(connection) && !this.#deliveryConnections.delete(connection)) return;
    if (how === 'release') connection.release();
    else connection.destroy();
  }
}

/** Runs a lock or unlock statement for `key`: true when its one integer is 1. */
async function confirms(connection: Connection, statement: Statement, key: string): Promise<boolean> {
  const answer = (await connection.execute(bindStatement(statement, { key }))).rows[0];
  return Number(answer?.[ADVISORY_CONFIRMED_COLUMN]) === 1;
}

/**
 * A held row that settles once. A hand back that meets a settlement already running waits for
 * it: the settlement unlocks when it ends.
 */
function holdUntilSettled(
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
    sessionLocks: dialect.capabilities.supportsSessionLocks
      ? { lock: dialect.advisory.lock(), unlock: dialect.advisory.unlock() }
      : undefined,
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
