import { IN_WORK_COLUMN } from '../dialect/concurrency-statements.js';
import type { LeaseClaim } from '../dialect/dialect.js';
import { inTransaction, withConnection, type OpenTransaction, type TransactionStatements } from '../driver/connection-scope.js';
import type { Connection, Driver } from '../driver/driver.js';
import { powerOfTwoAtLeast } from '../internal/power-of-two.js';
import { bindRepeated, bindStatement, type ParamValues, type Statement } from '../statement.js';
import { ownsGroup, type GuardRowAddition } from './claim-guard.js';
import type { RateClaim } from './form-context.js';

export interface LeaseClaimerOptions {
  readonly claim: LeaseClaim;
  readonly commit: Statement;
  readonly rollback: Statement;
  /** The id column: the select-then-stamp form stamps each selected row by it. */
  readonly idColumn: string;
  /**
   * A transaction of the claim's own around a one-statement claim that opens none (see
   * `DialectCapabilities.sharesSessionWithService`); undefined runs the statement as it is.
   */
  readonly ownTransaction?: readonly Statement[] | undefined;
  /**
   * Select-then-stamp: stop at the first selected row that could not be stamped, so the rows
   * taken are the first ones with no gap (the relay's batch of one name). Otherwise such a row is
   * skipped and the others taken.
   */
  readonly stopsAtFirstTaken: boolean;
  /** Concurrency limits: the claim runs behind the queue's guard and takes what the limits leave. */
  readonly concurrency?: ConcurrencyClaim | undefined;
  /**
   * A rate limit: the claim runs in a transaction of its own (`begin`, unless the concurrency
   * limits' opens it) behind the rate guard, takes at most the free slots and uses one per row.
   */
  readonly rate?: { readonly begin: readonly Statement[]; readonly claim: RateClaim } | undefined;
  /**
   * Select-then-stamp with a claim of the service's own: reads the rows to stamp in place of
   * running `select` (its ids, then their rows fetched), in the claim's transaction.
   */
  readonly selectRows?: ((connection: Connection, values: ParamValues) => Promise<Record<string, unknown>[]>) | undefined;
  /** MySQL, MariaDB, FIFO tables: the group's guard row, added when the guard finds none (see claim-guard.ts). */
  readonly addGuardRow?: Statement | undefined;
}

/**
 * A claim under `concurrency` (dialect/concurrency-statements.ts): `begin`, the `guard` when the
 * database needs one, then with `global` the count of rows in work, then the claim for at most
 * `global` minus that count, then commit. Per-key room is in the claim statement itself.
 */
export interface ConcurrencyClaim {
  readonly begin: readonly Statement[];
  readonly guard: Statement | undefined;
  readonly inWork: Statement;
  readonly global: number | undefined;
}

/**
 * Runs a lease claim, whichever shape the dialect gave it: one statement (Postgres, SQLite), on a
 * FIFO table inside its own transaction behind the group guard (Postgres), or a select that locks
 * the rows and a stamp of each (MySQL, MariaDB). Every claim ends the transaction it opened, so
 * the connection is left with none open; the rows it returns carry the lease the values named.
 * The lease form and the outbox relay both claim through it.
 */
export class LeaseClaimer {
  readonly #options: LeaseClaimerOptions;
  /** `stampAll` statements by row count (powers of two). */
  readonly #stampAll = new Map<number, Statement>();

  constructor(options: LeaseClaimerOptions) {
    this.#options = options;
  }

  /** The claim's statements, for the start-up prepare check. */
  get statements(): Statement[] {
    const { claim, concurrency, rate } = this.#options;
    const limits = concurrency === undefined ? [] : [...(concurrency.guard ? [concurrency.guard] : []), concurrency.inWork];
    if (rate !== undefined) limits.push(...rate.claim.statements);
    const claims =
      claim.kind === 'single'
        ? [...(claim.guarded ? [claim.guarded.guard] : []), claim.statement]
        : [...(claim.guard ? [claim.guard] : []), claim.select, ...(claim.firstRows ? [claim.firstRows] : []), claim.stamp];
    return [...limits, ...claims];
  }

  /**
   * Claims on a connection of its own, released afterwards (destroyed after a failure). Undefined
   * when the claim's own transaction could not begin: the session was inside one of the service's.
   */
  claim(driver: Driver, values: ParamValues): Promise<Record<string, unknown>[] | undefined> {
    return withConnection(driver, (connection) => this.claimOn(connection, values));
  }

  /**
   * Claims on `connection` and leaves no transaction open on it. Throws when a statement failed,
   * and the connection's state is then unknown; undefined as for `claim`.
   */
  async claimOn(connection: Connection, values: ParamValues): Promise<Record<string, unknown>[] | undefined> {
    const { claim, ownTransaction, concurrency, rate } = this.#options;
    if (concurrency !== undefined || rate !== undefined) return this.#claimUnderLimits(connection, values);
    if (claim.kind === 'selectThenStamp') {
      return inTransaction(connection, this.#session(claim.begin), (transaction) =>
        this.#selectThenStamp(connection, transaction, claim, values),
      );
    }
    const { guarded } = claim;
    const run = async () => (await connection.execute(bindStatement(claim.statement, values))).rows;
    if (guarded !== undefined) {
      // BEGIN with the guard and the claim with COMMIT: two round trips where the client
      // pipelines (PostgreSQL), not four. The transaction opens with the guard, so it is begun here.
      const begin = guarded.begin.map((statement) => bindStatement(statement, {}));
      return inTransaction(connection, this.#session([]), async (transaction) => {
        if (await ownsGroup(connection, guarded.guard, values, this.#guardRow(guarded.begin), begin)) {
          return (await transaction.commitWith(bindStatement(claim.statement, values))).rows;
        }
        await transaction.rollBack();
        return [];
      });
    }
    if (ownTransaction === undefined) return run();
    return inTransaction(connection, this.#session(ownTransaction), run, { whenBeginRefused: () => undefined });
  }

  /**
   * Behind the queue's guards, no other claim of the queue runs until this one commits, so the
   * rows counted in work stay the rows in work and the slots read free stay free; a limit reached
   * takes nothing, like an empty queue. The concurrency guard comes first in every claim, then
   * the rate's, so two claims never wait on each other's.
   */
  #claimUnderLimits(connection: Connection, values: ParamValues): Promise<Record<string, unknown>[]> {
    const { claim, concurrency, rate } = this.#options;
    const begin = concurrency?.begin ?? rate?.begin ?? [];
    return inTransaction(connection, this.#session(begin), async (transaction) => {
      let limit = Number(values.limit);
      if (concurrency !== undefined) {
        if (concurrency.guard !== undefined) await connection.execute(bindStatement(concurrency.guard, values));
        if (concurrency.global !== undefined) {
          const inWork = (await connection.execute(bindStatement(concurrency.inWork, values))).rows[0]?.[IN_WORK_COLUMN];
          limit = Math.min(limit, concurrency.global - Number(inWork));
        }
      }
      // The rate's window is read and its uses stamped at the time the rate guard let this claim
      // through, not when the claim began: a claim that waited on the guard and stamped the time
      // before its wait had its uses leave the window early, and the next claims took them again
      // (CI saw 12 rows of a key in one second under a rate of 10 per second per key).
      let rateValues = values;
      if (limit > 0 && rate !== undefined) {
        // Per key the rate bounds each key's rows in the claim statement, not the claim as a whole.
        await rate.claim.guard(connection);
        rateValues = { ...values, now: new Date() };
        limit = Math.min(limit, await rate.claim.free(connection, rateValues));
      }
      if (limit <= 0) {
        await transaction.rollBack();
        return [];
      }
      const limited = { ...values, ...rate?.claim.claimValues(rateValues), limit };
      const rows =
        claim.kind === 'selectThenStamp'
          ? await this.#selectThenStamp(connection, transaction, claim, limited)
          : (await connection.execute(bindStatement(claim.statement, limited))).rows;
      if (rate !== undefined) {
        if (rows.length > 0) await rate.claim.use(connection, rateValues, rows);
        else await rate.claim.tookNothing(connection, rateValues);
      }
      return rows;
    });
  }

  /** The guard (FIFO tables) and the select lock the rows; a stamp leases each, or one stamps all. */
  async #selectThenStamp(
    connection: Connection,
    transaction: OpenTransaction,
    claim: Extract<LeaseClaim, { kind: 'selectThenStamp' }>,
    values: ParamValues,
  ): Promise<Record<string, unknown>[]> {
    const { idColumn } = this.#options;
    if (claim.guard !== undefined && !(await ownsGroup(connection, claim.guard, values, this.#guardRow(claim.begin)))) {
      await transaction.rollBack();
      return [];
    }
    const selectRows = this.#options.selectRows;
    const read = selectRows === undefined ? (await connection.execute(bindStatement(claim.select, values))).rows : await selectRows(connection, values);
    const selected = claim.firstRows === undefined || read.length === 0 ? read : await this.#beforeFirstSkipped(connection, claim.firstRows, values, read);
    if (selected.length > 1 && claim.stampAll !== undefined) {
      const ids = selected.map((row) => row[idColumn]);
      // Padded to a power of two with the last id, so few texts are ever prepared.
      const stampAll = this.#stampAllFor(claim.stampAll, ids.length);
      const { affectedRows } = await connection.execute(bindRepeated(stampAll, ids.map((id) => ({ id })), values, 'id'));
      if (affectedRows === ids.length) return selected;
      // The select locked every row it returned; if one was not stamped, which one is unknown, so
      // the claim takes nothing and its rows stay where they were.
      await transaction.rollBack();
      return [];
    }
    const stamped: Record<string, unknown>[] = [];
    for (const row of selected) {
      const stamp = bindStatement(claim.stamp, { ...values, id: row[idColumn] });
      if ((await connection.execute(stamp)).affectedRows > 0) stamped.push(row);
      else if (this.#options.stopsAtFirstTaken) break;
    }
    return stamped;
  }

  /**
   * The selected rows up to the first of the group's first rows that the select did not return:
   * a row it skipped because another statement held it. The rows after that one stay locked by
   * the claim's transaction until it ends, and are not taken.
   */
  async #beforeFirstSkipped(
    connection: Connection,
    firstRows: Statement,
    values: ParamValues,
    selected: Record<string, unknown>[],
  ): Promise<Record<string, unknown>[]> {
    const { idColumn } = this.#options;
    const first = (await connection.execute(bindStatement(firstRows, values))).rows;
    const gap = selected.findIndex((row, place) => String(row[idColumn]) !== String(first[place]?.[idColumn]));
    return gap === -1 ? selected : selected.slice(0, gap);
  }

  #guardRow(begin: readonly Statement[]): GuardRowAddition | undefined {
    const add = this.#options.addGuardRow;
    return add === undefined ? undefined : { add, restart: [this.#options.commit, ...begin] };
  }

  #session(begin: readonly Statement[]): TransactionStatements {
    return { begin, commit: this.#options.commit, rollback: this.#options.rollback };
  }

  #stampAllFor(render: (rowCount: number) => Statement, idCount: number): Statement {
    const rowCount = powerOfTwoAtLeast(idCount);
    let statement = this.#stampAll.get(rowCount);
    if (statement === undefined) {
      statement = render(rowCount);
      this.#stampAll.set(rowCount, statement);
    }
    return statement;
  }
}
