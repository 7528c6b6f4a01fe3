import { createConcurrencyStatements } from '../dialect/concurrency-statements.js';
import { withConnection } from '../driver/connection-scope.js';
import { bindStatement, type ParamValues, type Statement } from '../statement.js';
import type { ClaimForm, HeldRow } from './claim-form.js';
import { ownsGroup } from './claim-guard.js';
import { ClaimTransaction, type ClaimTransactionStatements } from './claim-transaction.js';
import { claimsOneAtATime, type FormContext } from './form-context.js';
import { readClaimedRow } from './row-values.js';

/** The statements of the row lock form, rendered once when the subscription opens. */
interface RowLockStatements extends ClaimTransactionStatements {
  /** At the table's isolation level: it governs the claim and, in transactional mode, the handler. */
  readonly begin: Statement[];
  /** FIFO tables on Postgres and MySQL: run first; 0 means another claim owns the group. */
  readonly guard: Statement | undefined;
  /** `concurrency.global`: free slots locked first, in the claim's own transaction. */
  readonly takeSlots: Statement | undefined;
  readonly claim: Statement;
  /** Transactional mode: set right after the claim, so the handler's writes can be undone alone. */
  readonly savepoint: Statement;
  readonly rollback: Statement;
}

/**
 * Row lock form: `SELECT … FOR UPDATE SKIP LOCKED` in a transaction that stays open while the
 * handler runs. The settlement runs in that transaction and commits it, so a crash or a lost
 * connection rolls back and the row is claimable again at once, with no attempt spent.
 * Transactional mode lends the handler that same transaction, after a savepoint.
 */
export class RowLockForm implements ClaimForm {
  readonly holdsConnection = true;
  readonly claimsOneAtATime: boolean;
  /** Every settlement runs in the claim's transaction, which the delivery holds until it commits. */
  readonly isDoneAtHandover = false;
  readonly #context: FormContext;
  readonly #statements: RowLockStatements;

  constructor(context: FormContext) {
    this.#context = context;
    this.#statements = renderRowLockStatements(context);
    this.claimsOneAtATime = claimsOneAtATime(context);
  }

  rowsPerClaim(): number {
    return 1;
  }

  /** Every statement this form runs, for the start-up prepare check. */
  get statements(): Statement[] {
    const { guard, takeSlots, claim, settlements } = this.#statements;
    const finishMany = this.#statements.finishMany?.(1);
    const before = [...(guard ? [guard] : []), ...(takeSlots ? [takeSlots] : [])];
    return [...before, claim, ...Object.values(settlements).flat(), ...(finishMany ? [finishMany] : [])];
  }

  /**
   * The claim's transaction stays open through the handlers: the connection goes on to the
   * `ClaimTransaction` that settles the rows and commits. Taking nothing ends it here.
   */
  claim(limit: number, now: Date): Promise<HeldRow[]> {
    const { driver, spec, group, transactional, subscription } = this.#context;
    const statements = this.#statements;
    return withConnection(driver, async (connection, keep) => {
      const run = (statement: Statement, values: ParamValues = {}) => connection.execute(bindStatement(statement, values));
      for (const statement of statements.begin) await run(statement);
      // Another claim or delivery owning the group ends the transaction, dropping what the guard took.
      if (statements.guard !== undefined && !(await ownsGroup(connection, statements.guard, { group }))) {
        await run(statements.rollback);
        return [];
      }
      let rowLimit = transactional ? 1 : limit;
      // Each row in work holds a slot until its transaction ends: no free slot, no claim.
      const global = this.#context.concurrency?.global;
      if (statements.takeSlots !== undefined) {
        rowLimit = (await run(statements.takeSlots, { group, global, limit: rowLimit })).rows.length;
        if (rowLimit === 0) {
          await run(statements.rollback);
          return [];
        }
      }
      const rows = (await run(statements.claim, { group, now, limit: rowLimit })).rows;
      if (rows.length === 0) {
        await run(statements.commit);
        return [];
      }
      if (transactional) await run(statements.savepoint);
      keep();
      const transaction = new ClaimTransaction({ statements, connection, rowCount: rows.length, subscription, transactional });
      return rows.map((row) => transaction.hold(readClaimedRow(spec, row, false)));
    });
  }

  close(): void {}
}

function renderRowLockStatements(context: FormContext): RowLockStatements {
  const { dialect, spec, columns, deadLetter, concurrency } = context;
  const retry = dialect.rowLock.retry(spec);
  const slots = concurrency?.global === undefined ? undefined : createConcurrencyStatements(dialect.name).slots;
  const retryAfter = dialect.rowLock.retryAfter(spec) ?? retry;
  const finishMany = new Map<number, Statement>();
  const renderFinishMany = dialect.rowLock.finishMany;
  return {
    begin: dialect.session.begin({ isolation: spec.isolation }),
    guard: dialect.fifo.guard(spec),
    takeSlots: slots?.take(spec),
    claim: dialect.rowLock.claim(spec, columns),
    savepoint: dialect.session.savepoint(),
    rollbackToSavepoint: dialect.session.rollbackToSavepoint(),
    commit: dialect.session.commit(),
    rollback: dialect.session.rollback(),
    settlements: {
      finish: [dialect.settle.finish(spec, { fenced: false })],
      retry: retry ? [retry] : [],
      retryAfter: retryAfter ? [retryAfter] : [],
      // The lease and advisory claims count the attempt they start; a row lock claim counts it
      // only when it retries. Counting it before the move too leaves every dead letter, in every
      // form, with the attempt column one past the attempts made, as a retried row has it.
      deadLetter: deadLetter ? [...(retry ? [retry] : []), ...dialect.settle.deadLetter(spec, columns, deadLetter, { fenced: false })] : [],
    },
    finishMany: renderFinishMany === undefined ? undefined : (rowCount) => {
      let statement = finishMany.get(rowCount);
      if (statement === undefined) {
        statement = renderFinishMany(spec, rowCount);
        finishMany.set(rowCount, statement);
      }
      return statement;
    },
  };
}
