import { fifoGuardRowsFor } from '../dialect/fifo-guard-statements.js';
import { createConcurrencyStatements } from '../dialect/concurrency-statements.js';
import type { LeaseClaim } from '../dialect/dialect.js';
import { withConnection, withTransaction } from '../driver/connection-scope.js';
import type { Connection } from '../driver/driver.js';
import { LeaseLostError } from '../errors.js';
import { bindStatement, type ParamValues, type Statement } from '../statement.js';
import { isRolledBackByConflict, MAX_SETTLEMENT_CONFLICT_RETRIES } from './contention.js';
import { commitsHandlerWrites, settlementValues, type ClaimedRow, type ClaimForm, type HeldRow, type Settlement } from './claim-form.js';
import { claimsOneAtATime, type FormContext } from './form-context.js';
import { KeyWindow } from './key-window.js';
import { LEASE_COMMITS, LeaseBook, leaseExpiry, LeaseSlot } from './lease-book.js';
import { LeaseClaimGatherer } from './lease-claim-gatherer.js';
import { LeaseClaimer, type ConcurrencyClaim } from './lease-claimer.js';
import { LeaseCoalescedSettlements } from './lease-coalesced-settlements.js';
import { LeaseDeliveryTransaction } from './lease-delivery-transaction.js';
import { LeaseKeeper, type LeaseKeeperOptions } from './lease-keeper.js';
import { readClaimedRow } from './row-values.js';
import { claimedIds, fetchRows, serviceStatementsOf, settlementStatementNameOf, withFetchedRow, type ServiceStatementSet } from './service-statements.js';

export interface LeaseFormOptions {
  readonly leaseMs: number;
  /**
   * Settlements arriving within this many milliseconds go to the database together, one
   * statement per kind; undefined settles each on its own. Transactional mode never coalesces.
   */
  readonly settlementWindowMs: number | undefined;
  readonly onRenewed: () => void;
  /** A lease was found lost, once per row: by a renewal, or by the settlement. */
  readonly onLost: (id: string) => void;
  /** A settlement rolled back by a conflict (a deadlock, a Galera certification failure) runs again. */
  readonly onConflictRetried: () => void;
  readonly onError: (error: unknown) => void;
  /** The renewals' clock and test signals (see LeaseKeeperOptions); the host's clock and dormant signals without. */
  readonly keeper?: Pick<LeaseKeeperOptions, 'clock' | 'signals'>;
}

interface LeaseStatementSet {
  readonly claim: LeaseClaim;
  /** With concurrency limits: the guard and count the claim runs behind. */
  readonly concurrency: ConcurrencyClaim | undefined;
  /** With a rate limit: the transaction its claim opens when no concurrency limit opens one. */
  readonly rateBegin: readonly Statement[];
  readonly commit: Statement;
  readonly rollback: Statement;
  readonly extend: Statement;
  readonly release: Statement;
  readonly settlements: Readonly<Record<Settlement['kind'], Statement[]>>;
  readonly begin: Statement[];
  /** Transactional mode: a delivery's transaction, at the table's isolation level or begin mode. */
  readonly beginDelivery: Statement[];
  /** Transactional mode: the token checked, and the row locked, inside the delivery's transaction. */
  readonly confirm: Statement;
}

/**
 * Lease form: a claim stamps `locked_until` (the ownership token) and commits at once, so a
 * delivery in work holds no connection. Every settlement names the token; a settlement that
 * changes no row means the lease expired and another claim took the row (`LeaseLostError`).
 *
 * Transactional mode: the claim's connection stays with the delivery, which opens a transaction
 * of its own on it once the claim committed. An ack confirms the token inside that transaction
 * before it finishes the row and commits, so the handler's writes commit only while the lease
 * holds; every other settlement rolls them back and then settles as usual.
 */
export class LeaseForm implements ClaimForm {
  /** Transactional deliveries hold their connection through the handler (WP-5). */
  readonly holdsConnection: boolean;
  /** WP-7, and on MySQL/MariaDB, whose claim transaction locks the rows it reads until it commits. */
  readonly claimsOneAtATime: boolean;
  /**
   * A coalesced settlement is written with its window, after the delivery handed it over. Order
   * needs it written first: the next head of a FIFO group, and the next row of a key, must not
   * start before the row ahead of them is settled.
   */
  readonly isDoneAtHandover: boolean;
  readonly #context: FormContext;
  readonly #options: LeaseFormOptions;
  readonly #statements: LeaseStatementSet;
  readonly #book = new LeaseBook();
  readonly #claimer: LeaseClaimer;
  readonly #keeper: LeaseKeeper;
  readonly #coalesced: LeaseCoalescedSettlements | undefined;
  /** The table's statements of the service's own; undefined without. */
  readonly #service: ServiceStatementSet | undefined;
  /** Single-statement claims that run side by side (Postgres without FIFO groups), gathered per turn. */
  readonly #gatherer: LeaseClaimGatherer | undefined;
  /** Claims that rank rows by key (perKey, rate by key): the claimable rows they rank. */
  readonly #keyWindow: KeyWindow | undefined;
  /** Slots whose settlement began and has not ended. */
  #settlingCount = 0;

  constructor(context: FormContext, options: LeaseFormOptions) {
    this.#context = context;
    this.#options = options;
    this.#keyWindow = context.concurrency?.perKey !== undefined || context.rate?.byKeyTable !== undefined ? new KeyWindow() : undefined;
    this.holdsConnection = context.transactional;
    this.#service = serviceStatementsOf(context);
    // Claims under concurrency or rate limits wait on one guard per queue anyway: one claim fills every idle worker.
    this.claimsOneAtATime =
      claimsOneAtATime(context) ||
      context.dialect.capabilities.leaseClaimLocksRows ||
      context.concurrency !== undefined ||
      context.rate !== undefined;
    this.#statements = renderLeaseStatements(context, this.#service);
    const { claim, commit, rollback, concurrency, rateBegin } = this.#statements;
    const service = this.#service;
    this.#claimer = new LeaseClaimer({
      claim,
      commit,
      rollback,
      idColumn: context.spec.id.column,
      stopsAtFirstTaken: false,
      addGuardRow: context.spec.group?.fifo === true ? fifoGuardRowsFor(context.dialect.name)?.addRow(context.spec) : undefined,
      concurrency,
      rate: context.rate && { begin: rateBegin, claim: context.rate },
      selectRows:
        service?.claim === undefined
          ? undefined
          : async (connection, values) => {
              const rows = (await connection.execute(bindStatement(service.claim!, values))).rows;
              return fetchRows(connection, context, service.fetch!, claimedIds(rows, context, service.claim!, Number(values.limit)));
            },
    });
    this.#keeper = new LeaseKeeper({
      driver: context.driver,
      book: this.#book,
      extend: this.#statements.extend,
      leaseMs: options.leaseMs,
      onRenewed: options.onRenewed,
      onLost: (slot) => options.onLost(slot.id),
      onError: options.onError,
      ...options.keeper,
    });
    this.#keeper.start();
    const windowMs = options.settlementWindowMs;
    this.#coalesced =
      windowMs === undefined || context.transactional
        ? undefined
        : new LeaseCoalescedSettlements({ ...context, windowMs });
    // Concurrency limits count leases: a worker that claims again before its row's settlement is
    // written finds its own row still in work and the limit reached.
    this.isDoneAtHandover =
      this.#coalesced !== undefined && context.spec.group?.fifo !== true && !context.keyed && context.concurrency === undefined;
    const isParallelSingleStatement =
      claim.kind === 'single' &&
      claim.guarded === undefined &&
      concurrency === undefined &&
      context.rate === undefined &&
      !context.dialect.capabilities.hasSingleWriter;
    this.#gatherer =
      isParallelSingleStatement && !context.transactional
        ? new LeaseClaimGatherer((limit, now) => this.#claimNow(limit, now))
        : undefined;
  }

  /** Every statement this form runs, for the start-up prepare check. */
  get statements(): Statement[] {
    const { extend, release, confirm, settlements } = this.#statements;
    const claims = this.#claimer.statements;
    const confirms = this.#context.transactional || Object.keys(this.#service?.settlements ?? {}).length > 0 ? [confirm] : [];
    const coalesced = this.#coalesced?.statements ?? [];
    const service = this.#service?.statements ?? [];
    return [...new Set([...claims, extend, release, ...confirms, ...Object.values(settlements).flat(), ...coalesced, ...service])];
  }

  /**
   * WP-8: on SQLite one lease claim takes a row for every worker, so claims do not meet the
   * workers' settlements at the write lock on every delivery. Other lease tables that claim one
   * at a time (MySQL/MariaDB, partition keys) do the same: with one claim in flight and one row
   * per claim, MariaDB drained 187 msg/s at 16 workers against 622 for a raw loop of concurrent
   * claims. Rows beyond the idle workers wait leased (WP-9). A transactional delivery holds its
   * connection, so its claim takes one row, not one per worker.
   */
  rowsPerClaim(workers: number): number {
    return this.claimsOneAtATime && !this.#context.transactional ? workers : 1;
  }

  /** Rows held right now (claimed, not yet settled or handed back). */
  get heldCount(): number {
    return this.#book.size;
  }

  claim(limit: number, now: Date): Promise<HeldRow[]> {
    return this.#gatherer === undefined ? this.#claimNow(limit, now) : this.#gatherer.claim(limit, now);
  }

  #claimNow(limit: number, now: Date): Promise<HeldRow[]> {
    const { driver, dialect, spec, group, transactional } = this.#context;
    const lockedUntil = leaseExpiry(now, this.#options.leaseMs);
    // Transactional mode is for single deliveries: each holds the connection its claim ran on.
    const claimLimit = transactional ? 1 : limit;
    const values: ParamValues = { group, now, leaseNow: now, limit: claimLimit, lockedUntil };
    if (this.#context.concurrency?.perKey !== undefined) values.perKey = this.#context.concurrency.perKey;
    const keyWindow = this.#keyWindow;
    const window = keyWindow?.open();
    if (window !== undefined) values.window = window;
    // A transactional delivery's transaction runs on this loan too: its handler's writes commit
    // with the ack, so a power loss that takes the ack back takes them too, and the row comes back.
    return withConnection(driver, async (connection, keep) => {
      let rows: Record<string, unknown>[] | undefined;
      try {
        rows = (await this.#claimer.claimOn(connection, values)) ?? [];
      } finally {
        if (window !== undefined) keyWindow?.close(window, rows === undefined || rows.length < claimLimit);
      }
      // A claim of the service's own fetches its rows before stamping them, as they stood.
      const isOwnClaim = this.#service?.claim !== undefined;
      const attemptIsCounted = !isOwnClaim && dialect.capabilities.leaseClaimReturnsCountedAttempt;
      let claimed = rows.map((row) => readClaimedRow(spec, row, attemptIsCounted));
      if (!isOwnClaim && this.#service?.fetch !== undefined) claimed = await this.#fetchClaimed(connection, this.#service.fetch, claimed, lockedUntil);
      const first = claimed[0];
      if (!transactional || first === undefined) return claimed.map((row) => this.#hold(row, lockedUntil, undefined));
      keep();
      return [await this.#holdInTransaction(first, lockedUntil, connection)];
    }, LEASE_COMMITS);
  }

  /**
   * The service's fetch of the rows tablequeue's claim leased. A fetch that fails, or returns
   * no row for one of them, hands every row back (the lease released, the attempt spent) and
   * fails the claim.
   */
  async #fetchClaimed(connection: Connection, fetch: Statement, claimed: ClaimedRow[], lockedUntil: Date): Promise<ClaimedRow[]> {
    if (claimed.length === 0) return claimed;
    let fetched: Record<string, unknown>[];
    try {
      fetched = await fetchRows(connection, this.#context, fetch, claimed.map((row) => row.idValue));
    } catch (error) {
      await Promise.allSettled(claimed.map((row) => this.#hold(row, lockedUntil, undefined).handBack()));
      throw error;
    }
    return claimed.map((row, index) => withFetchedRow(row, fetched[index]!, this.#context.spec.attempt));
  }

  /** Stop began: settlements waiting for company go now, and later ones do not wait a window. */
  beginStop(): void {
    void this.#coalesced?.flushNow();
  }

  close(): void {
    this.#keeper.close();
    void this.#coalesced?.flushNow();
  }

  #hold(claimed: ClaimedRow, lockedUntil: Date, delivery: LeaseDeliveryTransaction | undefined): HeldRow {
    const slot = new LeaseSlot(claimed.id, claimed.idValue, lockedUntil);
    this.#book.add(slot);
    return new LeaseHeldRow(claimed, slot, delivery, this.#settleSlot);
  }

  readonly #settleSlot: SettleSlot = (slot, settlement, delivery, isHandBack) => this.#settle(slot, settlement, delivery, isHandBack);

  /**
   * Opens the delivery's transaction on the connection the claim committed on. When it cannot
   * be opened, the lease is released at once rather than left to expire, and the claim fails.
   */
  async #holdInTransaction(claimed: ClaimedRow, lockedUntil: Date, connection: Connection): Promise<HeldRow> {
    try {
      for (const statement of this.#statements.beginDelivery) await connection.execute(bindStatement(statement, {}));
    } catch (error) {
      // Ended before the hand back, which takes a connection of its own.
      connection.destroy();
      await this.#hold(claimed, lockedUntil, undefined)
        .handBack()
        .catch(() => undefined);
      throw error;
    }
    const delivery = new LeaseDeliveryTransaction(connection, claimed.id, this.#statements.rollback);
    return this.#hold(claimed, lockedUntil, delivery);
  }

  /**
   * The common case, a settlement that joins a window (no delivery transaction, no statement of
   * the service's, no renewal in flight), settles with the window's answer and has no async frame
   * of its own: that frame was the largest allocation of a delivery in a prefetch drain (about
   * 1.1 KB a message, sampled heap profile). Every other case, and a window that did not settle
   * the row, goes through `#settleAlone`.
   */
  #settle(slot: LeaseSlot, settlement: Settlement, delivery: LeaseDeliveryTransaction | undefined, isHandBack: boolean): Promise<void> {
    // A row handed back unhandled only has its lease released: the service's retry is for retries.
    const own = isHandBack ? undefined : this.#service?.settlements[settlementStatementNameOf(settlement)];
    const coalesced = this.#coalesced;
    if (delivery !== undefined || own !== undefined || slot.extension !== undefined || slot.isLost || coalesced?.accepts(settlement) !== true) {
      return this.#settleAlone(slot, settlement, delivery, own, false);
    }
    slot.isSettling = true;
    this.#settlingCount += 1;
    const answering = coalesced.settle(slot, settlement);
    // Every lease held is settling: no other settlement can join the window, so it goes now.
    // On SQLite (4 workers, one claim for all) waiting out the window halved the drain.
    if (this.#settlingCount >= this.#book.size) coalesced.flushWaiting();
    return answering.then((answer) => {
      this.#settlingCount -= 1;
      if (answer === 'settled') {
        this.#book.remove(slot);
        return undefined;
      }
      // A renewal whose outcome is unknown may have written the other token: that one is left.
      // After `failed` every token is tried alone, so an error reaches only its own row.
      return this.#settleAlone(slot, settlement, undefined, undefined, answer === 'notCarried');
    });
  }

  /**
   * Settles the row statement by statement, trying each token it may carry (the current one
   * skipped when a window already tried it). Transactional mode: a settlement other than an ack
   * rolls the handler's writes back first and then settles as without it; an ack settles inside
   * the delivery's transaction.
   */
  async #settleAlone(
    slot: LeaseSlot,
    settlement: Settlement,
    delivery: LeaseDeliveryTransaction | undefined,
    own: readonly Statement[] | undefined,
    isCurrentTokenTried: boolean,
  ): Promise<void> {
    let isCounted = false;
    try {
      delivery?.lent.endLoan();
      if (delivery !== undefined && !commitsHandlerWrites(settlement)) await delivery.rollBack();
      while (slot.extension) await slot.extension;
      if (slot.isLost) throw this.#lost(slot);
      slot.isSettling = true;
      this.#settlingCount += 1;
      isCounted = true;
      const statements = own ?? this.#statements.settlements[settlement.kind];
      const candidates = slot.candidateTokens();
      for (const held of isCurrentTokenTried ? candidates.slice(1) : candidates) {
        const values = settlementValues(slot.idValue, settlement, held);
        const isSettled = delivery?.isOpen
          ? await this.#runInDeliveryTransaction(delivery, statements, values)
          : own !== undefined
            ? await this.#runConfirmed(own, values)
            : await this.#runFenced(this.#statements.settlements[settlement.kind], values);
        if (isSettled) return;
      }
      throw this.#lost(slot);
    } finally {
      // A lost lease or a failed statement: nothing the handler wrote may commit.
      await delivery?.rollBack();
      if (isCounted) this.#settlingCount -= 1;
      this.#book.remove(slot);
    }
  }

  /**
   * Confirms the token inside the delivery's transaction, which also locks the row against
   * renewals and claims, then settles and commits there; false when no row carried the token.
   */
  async #runInDeliveryTransaction(
    delivery: LeaseDeliveryTransaction,
    statements: readonly Statement[],
    values: ParamValues,
  ): Promise<boolean> {
    const { connection } = delivery;
    try {
      if ((await connection.execute(bindStatement(this.#statements.confirm, values))).affectedRows === 0) return false;
      for (const statement of statements) await connection.execute(bindStatement(statement, values));
      await connection.execute(bindStatement(this.#statements.commit, {}));
    } catch (error) {
      delivery.destroy();
      throw error;
    }
    delivery.committed();
    return true;
  }

  /**
   * The service's own settlement statements, which name no token: in a transaction of their own
   * after the token is confirmed (which locks the row), so they run only while the lease holds;
   * false when no row carried the token.
   */
  #runConfirmed(statements: readonly Statement[], values: ParamValues): Promise<boolean> {
    return withTransaction(this.#context.driver, this.#statements, async (transaction, connection) => {
      if ((await connection.execute(bindStatement(this.#statements.confirm, values))).affectedRows === 0) {
        await transaction.rollBack();
        return false;
      }
      for (const statement of statements) await connection.execute(bindStatement(statement, values));
      return true;
    }, { acquire: LEASE_COMMITS });
  }

  /**
   * Runs a settlement under one token on a connection of its own; false when no row carried that
   * token. A conflict rolled the settlement back whole, so it runs again: on a Galera cluster a
   * claim or settlement of the same row committed through another node first fails this one's
   * certification. If that other write took the row, the token no longer matches and the retry
   * changes nothing, so a row is never settled twice.
   */
  async #runFenced(statements: readonly Statement[], values: ParamValues): Promise<boolean> {
    for (let retries = 0; ; retries += 1) {
      try {
        return await this.#runFencedOnce(statements, values);
      } catch (error) {
        if (!isRolledBackByConflict(error) || retries >= MAX_SETTLEMENT_CONFLICT_RETRIES) throw error;
        this.#options.onConflictRetried();
      }
    }
  }

  async #runFencedOnce(statements: readonly Statement[], values: ParamValues): Promise<boolean> {
    const { driver } = this.#context;
    if (statements.length === 1) {
      const statement = bindStatement(statements[0]!, values);
      return (await driver.executeWrite(statement, LEASE_COMMITS)).affectedRows > 0;
    }
    // A dead letter into a table is a copy then a delete: both in one transaction, both fenced.
    return withTransaction(driver, this.#statements, async (transaction, connection) => {
      for (const statement of statements) {
        if ((await connection.execute(bindStatement(statement, values))).affectedRows === 0) {
          await transaction.rollBack();
          return false;
        }
      }
      return true;
    }, { acquire: LEASE_COMMITS });
  }

  #lost(slot: LeaseSlot): LeaseLostError {
    // A renewal that found the row gone already counted this loss.
    if (!slot.isLost) {
      slot.isLost = true;
      this.#options.onLost(slot.id);
    }
    return new LeaseLostError({ id: slot.id, subscription: this.#context.subscription });
  }
}

type SettleSlot = (
  slot: LeaseSlot,
  settlement: Settlement,
  delivery: LeaseDeliveryTransaction | undefined,
  isHandBack: boolean,
) => Promise<void>;

/**
 * A row the lease form holds, settled or handed back once. A class rather than an object of
 * closures: a drain makes one per message, and its methods are shared.
 */
class LeaseHeldRow implements HeldRow {
  readonly row: Record<string, unknown>;
  readonly id: string;
  readonly idValue: unknown;
  readonly attempt: number;
  readonly transaction: HeldRow['transaction'];
  readonly #slot: LeaseSlot;
  readonly #delivery: LeaseDeliveryTransaction | undefined;
  readonly #settleSlot: SettleSlot;
  #isDone = false;

  constructor(claimed: ClaimedRow, slot: LeaseSlot, delivery: LeaseDeliveryTransaction | undefined, settleSlot: SettleSlot) {
    this.row = claimed.row;
    this.id = claimed.id;
    this.idValue = claimed.idValue;
    this.attempt = claimed.attempt;
    this.transaction = delivery?.lent;
    this.#slot = slot;
    this.#delivery = delivery;
    this.#settleSlot = settleSlot;
  }

  settle(settlement: Settlement): Promise<void> {
    return this.#once(settlement, false);
  }

  handBack(): Promise<void> {
    return this.#once({ kind: 'retry' }, true);
  }

  stopRenewing(): void {
    this.#slot.isRenewalStopped = true;
  }

  #once(settlement: Settlement, isHandBack: boolean): Promise<void> {
    if (this.#isDone) return Promise.reject(new TypeError(`row ${this.id} was already settled`));
    this.#isDone = true;
    return this.#settleSlot(this.#slot, settlement, this.#delivery, isHandBack);
  }
}

function renderLeaseStatements(context: FormContext, service: ServiceStatementSet | undefined): LeaseStatementSet {
  const { dialect, spec, columns, deadLetter, concurrency } = context;
  const release = dialect.lease.release(spec);
  const begin = dialect.session.begin({ sqliteBegin: 'immediate' });
  const limits = concurrency === undefined ? undefined : createConcurrencyStatements(dialect.name);
  // Postgres and MySQL at read committed, so each statement reads what committed before the
  // guards were taken; SQLite's IMMEDIATE is itself the guard.
  const limitsBegin = dialect.capabilities.isolationLevels.includes('read committed')
    ? dialect.session.begin({ isolation: 'read committed' })
    : begin;
  // The service's claim returns ids; each is stamped in its transaction while still claimable.
  const ownClaim: LeaseClaim | undefined =
    service?.claim === undefined ? undefined : { kind: 'selectThenStamp', begin: limitsBegin, select: service.claim, stamp: service.stamp! };
  return {
    claim: ownClaim ?? dialect.lease.claim(spec, columns, { perKey: concurrency?.perKey !== undefined, rateByKey: context.rate?.byKeyTable }),
    concurrency: limits && {
      begin: limitsBegin,
      guard: limits.guard(spec),
      inWork: limits.inWork(spec),
      global: concurrency?.global,
    },
    rateBegin: limitsBegin,
    begin,
    beginDelivery: dialect.session.begin({ isolation: spec.isolation, sqliteBegin: spec.sqliteBegin }),
    confirm: dialect.lease.confirm(spec),
    commit: dialect.session.commit(),
    rollback: dialect.session.rollback(),
    extend: service?.extend ?? dialect.lease.extend(spec),
    release,
    settlements: {
      finish: [dialect.settle.finish(spec, { fenced: true })],
      retry: [release],
      retryAfter: [dialect.lease.retryAfter(spec) ?? release],
      deadLetter: deadLetter ? dialect.settle.deadLetter(spec, columns, deadLetter, { fenced: true }) : [release],
    },
  };
}
