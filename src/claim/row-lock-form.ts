import type { Statement } from '../statement.js';
import { bindStatement, type ParamValues } from '../statement.js';
import { GROUP_GUARD_COLUMN } from '../dialect/dialect.js';
import type { Connection } from '../driver/driver.js';
import type { ClaimForm, ClaimedRow, HeldRow, Settlement } from './claim-form.js';
import type { FormContext } from './form-context.js';
import { readClaimedRow } from './row-values.js';

/**
 * Row lock form: `SELECT … FOR UPDATE SKIP LOCKED` in a transaction that stays open while the
 * handler runs. The settlement runs in that transaction and commits it, so a crash or a lost
 * connection rolls back and the row is claimable again at once, with no attempt spent.
 */
/** The statements of the row lock form, rendered once when the subscription opens. */
interface RowLockStatements {
  readonly begin: Statement[];
  /** FIFO tables on Postgres and MySQL: run first; 0 means another claim owns the group. */
  readonly guard: Statement | undefined;
  readonly claim: Statement;
  readonly commit: Statement;
  readonly rollback: Statement;
  readonly settlements: Readonly<Record<Settlement['kind'], Statement[]>>;
}

export class RowLockForm implements ClaimForm {
  readonly holdsConnection = true;
  readonly #context: FormContext;
  readonly #statements: RowLockStatements;

  constructor(context: FormContext) {
    this.#context = context;
    this.#statements = renderRowLockStatements(context);
  }

  /** Every statement this form runs, for the start-up prepare check. */
  get statements(): Statement[] {
    const { guard, claim, settlements } = this.#statements;
    return [...(guard ? [guard] : []), claim, ...Object.values(settlements).flat()];
  }

  async claim(limit: number, now: Date): Promise<HeldRow[]> {
    const { driver, spec, group } = this.#context;
    const statements = this.#statements;
    const connection = await driver.acquire();
    let rows: Record<string, unknown>[];
    try {
      for (const statement of statements.begin) await connection.execute(bindStatement(statement, {}));
      if (statements.guard !== undefined) {
        const answer = (await connection.execute(bindStatement(statements.guard, { group }))).rows[0];
        if (Number(answer?.[GROUP_GUARD_COLUMN]) !== 1) {
          // Another claim or delivery owns the group: end the transaction to drop what the guard took.
          await connection.execute(bindStatement(statements.rollback, {}));
          connection.release();
          return [];
        }
      }
      rows = (await connection.execute(bindStatement(statements.claim, { group, now, limit }))).rows;
      if (rows.length === 0) {
        await connection.execute(bindStatement(statements.commit, {}));
        connection.release();
        return [];
      }
    } catch (error) {
      // The transaction's state is unknown after a failure: end the session, never pool it.
      connection.destroy();
      throw error;
    }
    const transaction = new ClaimTransaction(statements, connection, rows.length);
    return rows.map((row) => transaction.hold(readClaimedRow(spec, row, false)));
  }

  close(): void {}
}

function renderRowLockStatements(context: FormContext): RowLockStatements {
  const { dialect, spec, columns, deadLetter } = context;
  const retry = dialect.rowLock.retry(spec);
  const retryAfter = dialect.rowLock.retryAfter(spec) ?? retry;
  return {
    begin: dialect.session.begin({ isolation: spec.isolation }),
    guard: dialect.fifo.guard(spec),
    claim: dialect.rowLock.claim(spec, columns),
    commit: dialect.session.commit(),
    rollback: dialect.session.rollback(),
    settlements: {
      finish: [dialect.settle.finish(spec, { fenced: false })],
      retry: retry ? [retry] : [],
      retryAfter: retryAfter ? [retryAfter] : [],
      deadLetter: deadLetter ? dialect.settle.deadLetter(spec, columns, deadLetter, { fenced: false }) : [],
    },
  };
}

/**
 * The open claim transaction shared by the rows of one claim. Each row's settlement runs its
 * statement in it; the last one commits and returns the connection. A failed statement ends
 * the session so the server rolls everything back, and the rows return to the queue.
 */
class ClaimTransaction {
  readonly #statements: RowLockStatements;
  readonly #connection: Connection;
  #open: number;
  #failure: unknown;
  #queue: Promise<unknown> = Promise.resolve();

  constructor(statements: RowLockStatements, connection: Connection, rowCount: number) {
    this.#statements = statements;
    this.#connection = connection;
    this.#open = rowCount;
  }

  hold(claimed: ClaimedRow): HeldRow {
    let settled = false;
    const once = (run: () => Promise<void>) => {
      if (settled) return Promise.reject(new TypeError(`row ${claimed.id} was already settled`));
      settled = true;
      return this.#serial(run);
    };
    return {
      ...claimed,
      settle: (settlement) => once(() => this.#settle(claimed, settlement)),
      handBack: () => once(() => this.#finishRow()),
    };
  }

  /** Statements on one connection run one after another, in settlement order. */
  #serial(run: () => Promise<void>): Promise<void> {
    const next = this.#queue.then(run);
    this.#queue = next.catch(() => undefined);
    return next;
  }

  async #settle(claimed: ClaimedRow, settlement: Settlement): Promise<void> {
    if (this.#failure !== undefined) throw this.#failure;
    const values: ParamValues = {
      id: claimed.idValue,
      now: new Date(),
      retryAfterAt: settlement.kind === 'retryAfter' ? settlement.at : undefined,
      destination: settlement.kind === 'deadLetter' && settlement.target.kind === 'group' ? settlement.target.group : undefined,
    };
    try {
      for (const statement of this.#statements.settlements[settlement.kind]) {
        await this.#connection.execute(bindStatement(statement, values));
      }
    } catch (error) {
      this.#fail(error);
      throw error;
    }
    await this.#finishRow();
  }

  async #finishRow(): Promise<void> {
    this.#open -= 1;
    if (this.#open > 0 || this.#failure !== undefined) return;
    try {
      await this.#connection.execute(bindStatement(this.#statements.commit, {}));
      this.#connection.release();
    } catch (error) {
      this.#fail(error);
      throw error;
    }
  }

  #fail(error: unknown): void {
    if (this.#failure !== undefined) return;
    this.#failure = error;
    this.#connection.destroy();
  }
}
