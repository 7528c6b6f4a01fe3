import { createConcurrencyStatements, type KeySlotTake } from '../dialect/concurrency-statements.js';
import { executeAll, withConnection } from '../driver/connection-scope.js';
import type { Connection } from '../driver/driver.js';
import { bindStatement, type BoundStatement, type ParamValues, type Statement } from '../statement.js';
import type { ChainedClaim, ChainedClaimSource, ClaimedRow, ClaimForm, HeldRow } from './claim-form.js';
import { guardRowAddition, ownsGroup, type GuardRowAddition } from './claim-guard.js';
import { ClaimTransaction, type ChainedClaimRun, type ClaimTransactionStatements } from './claim-transaction.js';
import { claimsOneAtATime, type FormContext } from './form-context.js';
import { readClaimedRow } from './row-values.js';
import { claimedIds, fetchRows, serviceStatementsOf, withFetchedRow, type ServiceStatementSet } from './service-statements.js';

/** The statements of the row lock form, rendered once when the subscription opens. */
interface RowLockStatements extends ClaimTransactionStatements {
  /** At the table's isolation level: it governs the claim and, in transactional mode, the handler. */
  readonly begin: Statement[];
  /** FIFO tables on Postgres and MySQL: run first; 0 means another claim owns the group. */
  readonly guard: Statement | undefined;
  /** MySQL, MariaDB: the group's guard row, added when the guard finds none (see claim-guard.ts). */
  readonly addGuardRow: GuardRowAddition | undefined;
  /** `concurrency.global`: free slots locked first, in the claim's own transaction. */
  readonly takeSlots: Statement | undefined;
  /** `concurrency.perKey`: slots of keys locked next, and rows taken under each. */
  readonly keySlots: KeySlotRun | undefined;
  readonly claim: Statement;
  /** Transactional mode: set right after the claim, so the handler's writes can be undone alone. */
  readonly savepoint: Statement;
  readonly rollback: Statement;
}

/** `concurrency.perKey`'s statements, and how its slots are added. */
interface KeySlotRun {
  readonly add: Statement;
  /** MySQL, MariaDB: `add` runs in its own read committed transaction after this guard (see `addInTransaction`). */
  readonly addBehind: { readonly begin: Statement[]; readonly guard: Statement } | undefined;
  readonly take: KeySlotTake;
  readonly claim: Statement;
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
  /** The table's statements of the service's own; undefined without. */
  readonly #service: ServiceStatementSet | undefined;
  /**
   * perKey: the last claim found fewer free key slots than it wanted, maybe because a key has
   * none yet, so the next claim adds the missing ones first. True before the first claim.
   */
  #isShortOfKeySlots = true;
  /** The statements that open the claim's transaction, bound once. */
  readonly #begin: readonly BoundStatement[];
  /** No guard, no slots, no claim of the service's own: the transaction opens with the claim itself. */
  readonly #isPlainClaim: boolean;
  /** perKey, taken in turn (MySQL, MariaDB): the last key whose slot this form took. */
  #lastKeyTaken = '';
  /** Where settlements ask for a claim to chain after their commit; undefined when this form chains none. */
  #chains: ChainedClaimSource | undefined;

  constructor(context: FormContext) {
    this.#context = context;
    this.#service = serviceStatementsOf(context);
    const statements = renderRowLockStatements(context, this.#service);
    this.#statements = statements;
    this.#begin = statements.begin.map((statement) => bindStatement(statement, {}));
    this.#isPlainClaim =
      statements.guard === undefined && statements.takeSlots === undefined && statements.keySlots === undefined && this.#service?.claim === undefined;
    this.claimsOneAtATime = claimsOneAtATime(context);
  }

  rowsPerClaim(): number {
    return 1;
  }

  /** Every statement this form runs, for the start-up prepare check. */
  get statements(): Statement[] {
    const { guard, takeSlots, keySlots, claim, settlements } = this.#statements;
    const finishMany = this.#statements.finishMany?.(1);
    const before = [...(guard ? [guard] : []), ...(takeSlots ? [takeSlots] : [])];
    const keyed =
      keySlots === undefined
        ? []
        : [
            keySlots.add,
            ...(keySlots.addBehind ? [keySlots.addBehind.guard] : []),
            ...(keySlots.take.kind === 'claimOrder' ? [keySlots.take.statement] : [keySlots.take.after, keySlots.take.upTo]),
            keySlots.claim,
          ];
    const service = this.#service?.statements ?? [];
    const claims = this.#service?.claim === undefined ? [claim] : [];
    return [...before, ...keyed, ...claims, ...Object.values(settlements).flat(), ...(finishMany ? [finishMany] : []), ...service];
  }

  /**
   * The claim's transaction stays open through the handlers: the connection goes on to the
   * `ClaimTransaction` that settles the rows and commits. Taking nothing ends it here.
   */
  claim(limit: number, now: Date): Promise<HeldRow[]> {
    const { driver, spec, group, transactional } = this.#context;
    const statements = this.#statements;
    return withConnection(driver, async (connection, keep) => {
      const run = (statement: Statement, values: ParamValues = {}) => connection.execute(bindStatement(statement, values));
      const service = this.#service;
      let rowLimit = transactional ? 1 : limit;
      let rows: Record<string, unknown>[];
      if (this.#isPlainClaim) {
        // BEGIN and the claim in one round trip where the driver pipelines: on PostgreSQL with 16
        // workers, a message's four statements became two round trips.
        const claim = bindStatement(statements.claim, { group, now, limit: rowLimit });
        rows = (await executeAll(connection, [...this.#begin, claim])).at(-1)!.rows;
      } else {
        if (statements.keySlots !== undefined && this.#isShortOfKeySlots) await this.#addKeySlots(run, statements.keySlots, now);
        // Another claim or delivery owning the group ends the transaction, dropping what the guard
        // took; the guard goes with the BEGIN, in one round trip where the client pipelines.
        if (statements.guard === undefined) await executeAll(connection, this.#begin);
        else if (!(await ownsGroup(connection, statements.guard, { group }, statements.addGuardRow, this.#begin))) {
          await run(statements.rollback);
          return [];
        }
        // Each row in work holds a slot until its transaction ends: no free slot, no claim.
        const global = this.#context.concurrency?.global;
        if (statements.takeSlots !== undefined) {
          rowLimit = (await run(statements.takeSlots, { group, global, limit: rowLimit })).rows.length;
          if (rowLimit === 0) {
            await run(statements.rollback);
            return [];
          }
        }
        rows =
          service?.claim !== undefined
            ? await this.#claimOwn(connection, service, now, rowLimit)
            : statements.keySlots === undefined
              ? (await run(statements.claim, { group, now, limit: rowLimit })).rows
              : await this.#claimUnderKeySlots(run, statements.keySlots, now, rowLimit);
      }
      if (rows.length === 0) {
        await run(statements.commit);
        return [];
      }
      // A fetch that fails ends the session with the claim's transaction: the rows return.
      let claimed = rows.map((row) => readClaimedRow(spec, row, false));
      if (service?.claim === undefined && service?.fetch !== undefined) {
        const fetched = await fetchRows(connection, this.#context, service.fetch, claimed.map((row) => row.idValue));
        claimed = claimed.map((row, index) => withFetchedRow(row, fetched[index]!, spec.attempt));
      }
      if (transactional) await run(statements.savepoint);
      keep();
      return this.#hold(connection, claimed);
    });
  }

  /**
   * A plain claim of one row per message, where nothing runs between BEGIN and the claim, can be
   * chained after a settlement's COMMIT (claim-transaction.ts). Measured on PostgreSQL with 16
   * workers: each of a message's two round trips is a write to the socket, and those writes were
   * 10.4 of the 17.8 seconds the benchmark process spent on the CPU draining 40,000 rows.
   */
  chainClaimsThrough(source: ChainedClaimSource): void {
    if (this.#isPlainClaim && !this.#context.transactional && this.#service?.fetch === undefined) this.#chains = source;
  }

  /** The rows of a claim on `connection`, held by one claim transaction that settles and commits them. */
  #hold(connection: Connection, claimed: ClaimedRow[]): HeldRow[] {
    const { subscription, transactional } = this.#context;
    const transaction = new ClaimTransaction({
      statements: this.#statements,
      connection,
      rowCount: claimed.length,
      subscription,
      transactional,
      chainClaim: this.#chains === undefined ? undefined : this.#chainedClaimRun,
    });
    return claimed.map((row) => transaction.hold(row));
  }

  readonly #chainedClaimRun = (): ChainedClaimRun | undefined => {
    const source = this.#chains!;
    const claim = source.chainClaim();
    if (claim === undefined) return undefined;
    const values = { group: this.#context.group, now: source.now(), limit: 1 };
    return {
      statements: [...this.#begin, bindStatement(this.#statements.claim, values)],
      claimed: (connection, rows) => this.#tookChained(connection, rows, claim),
      failed: (error) => claim.failed(error),
      abandoned: () => claim.abandoned(),
    };
  };

  /** A chained claim's answer: its row held as any claim's, or its empty transaction ended. */
  async #tookChained(connection: Connection, rows: Record<string, unknown>[], claim: ChainedClaim): Promise<void> {
    let held: HeldRow[];
    try {
      if (rows.length === 0) {
        await connection.execute(bindStatement(this.#statements.commit, {}));
        connection.release();
        claim.tookNothing();
        return;
      }
      held = this.#hold(connection, rows.map((row) => readClaimedRow(this.#context.spec, row, false)));
    } catch (error) {
      connection.destroy();
      claim.failed(error);
      return;
    }
    await claim.tookRows(held);
  }

  close(): void {}

  /**
   * A claim of the service's own: its ids, each locked while still claimable (a row another
   * claim holds is skipped), then the locked rows fetched, all in the claim's transaction.
   */
  async #claimOwn(connection: Connection, service: ServiceStatementSet, now: Date, limit: number): Promise<Record<string, unknown>[]> {
    const { group } = this.#context;
    const returned = (await connection.execute(bindStatement(service.claim!, { group, now, limit }))).rows;
    const locked: unknown[] = [];
    for (const id of claimedIds(returned, this.#context, service.claim!, limit)) {
      if ((await connection.execute(bindStatement(service.lock!, { id, group, now }))).rows.length > 0) locked.push(id);
    }
    return fetchRows(connection, this.#context, service.fetch!, locked);
  }

  /** Before the claim's transaction: a slot inserted inside it would hold other claims' adds until the handler ends. */
  async #addKeySlots(run: RunStatement, keySlots: KeySlotRun, now: Date): Promise<void> {
    const values = { group: this.#context.group, now, perKey: this.#context.concurrency?.perKey };
    if (keySlots.addBehind === undefined) {
      await run(keySlots.add, values);
      return;
    }
    for (const statement of keySlots.addBehind.begin) await run(statement);
    try {
      await run(keySlots.addBehind.guard, values);
      await run(keySlots.add, values);
      await run(this.#statements.commit);
    } catch (error) {
      await run(this.#statements.rollback);
      throw error;
    }
  }

  /**
   * Locks up to `limit` free key slots, then takes under each slot a row of its key or one
   * without a key, and fills what is left with rows without a key: a key never has more rows in
   * work than slots locked, and a row without a key needs none. Rows this transaction already
   * locked would come back from a later statement, so each id is kept once.
   */
  async #claimUnderKeySlots(run: RunStatement, keySlots: KeySlotRun, now: Date, limit: number): Promise<Record<string, unknown>[]> {
    const { group, spec } = this.#context;
    const perKey = this.#context.concurrency?.perKey;
    const values = { group, now, perKey, limit };
    let slots: Record<string, unknown>[];
    if (keySlots.take.kind === 'claimOrder') {
      slots = (await run(keySlots.take.statement, values)).rows;
    } else {
      slots = (await run(keySlots.take.after, { ...values, key: this.#lastKeyTaken })).rows;
      if (slots.length < limit) {
        slots.push(...(await run(keySlots.take.upTo, { ...values, key: this.#lastKeyTaken, limit: limit - slots.length })).rows);
      }
      const last = slots.at(-1);
      if (last !== undefined) this.#lastKeyTaken = String(last['key_value']);
    }
    this.#isShortOfKeySlots = slots.length < limit;
    const slotsOfKey = new Map<unknown, number>();
    for (const slot of slots) slotsOfKey.set(slot['key_value'], (slotsOfKey.get(slot['key_value']) ?? 0) + 1);
    const rows = new Map<unknown, Record<string, unknown>>();
    const take = async (key: unknown, most: number) => {
      for (const row of (await run(keySlots.claim, { group, now, key, limit: most })).rows) rows.set(row[spec.id.column], row);
    };
    for (const [key, count] of slotsOfKey) await take(key, count);
    if (rows.size < limit) await take(null, limit - rows.size);
    return [...rows.values()];
  }
}

type RunStatement = (statement: Statement, values?: ParamValues) => Promise<{ rows: Record<string, unknown>[] }>;

function renderRowLockStatements(context: FormContext, service: ServiceStatementSet | undefined): RowLockStatements {
  const { dialect, spec, columns, deadLetter, concurrency } = context;
  const retry = dialect.rowLock.retry(spec);
  const concurrencyStatements = createConcurrencyStatements(dialect.name);
  const slots = concurrency?.global === undefined ? undefined : concurrencyStatements.slots;
  const keySlots = concurrency?.perKey === undefined ? undefined : concurrencyStatements.keySlots;
  const guard = concurrencyStatements.guard(spec);
  const retryAfter = dialect.rowLock.retryAfter(spec) ?? retry;
  const finishMany = new Map<number, Statement>();
  // A finish of the service's own runs per row.
  const hasOwnFinish = service?.settlements.ack !== undefined || service?.settlements.drop !== undefined;
  const renderFinishMany = hasOwnFinish ? undefined : dialect.rowLock.finishMany;
  return {
    begin: dialect.session.begin({ isolation: spec.isolation }),
    guard: dialect.fifo.guard(spec),
    addGuardRow: guardRowAddition(dialect, spec, dialect.session.begin({ isolation: spec.isolation })),
    takeSlots: slots?.take(spec),
    keySlots:
      keySlots === undefined
        ? undefined
        : {
            add: keySlots.add(spec),
            addBehind:
              keySlots.addInTransaction && guard !== undefined ? { begin: dialect.session.begin({ isolation: 'read committed' }), guard } : undefined,
            take: keySlots.take(spec),
            claim: keySlots.claim(spec, columns),
          },
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
    serviceSettlements: service?.settlements,
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
