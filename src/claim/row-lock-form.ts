import { createConcurrencyStatements, KEY_SLOTS_PER_DELETE, type KeySlotClaim, type KeySlotPrune, type KeySlotStatements, type KeySlotTake } from '../dialect/concurrency-statements.js';
import { executeAll, withConnection } from '../driver/connection-scope.js';
import type { Connection } from '../driver/driver.js';
import { bindRepeated, bindStatement, type BoundStatement, type ParamValues, type Statement } from '../statement.js';
import type { ChainedClaim, ChainedClaimSource, ClaimedRow, ClaimForm, HeldRow } from './claim-form.js';
import { guardRowAddition, ownsGroup, type GuardRowAddition } from './claim-guard.js';
import { ClaimTransaction, type ChainedClaimRun, type ClaimTransactionStatements } from './claim-transaction.js';
import { claimsOneAtATime, type FormContext } from './form-context.js';
import { KeyWindow } from './key-window.js';
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
  /** MySQL, MariaDB: `add` runs in the `behindGuard` transaction (see `KeySlotStatements.addInTransaction`). */
  readonly addInTransaction: boolean;
  readonly take: KeySlotTake;
  readonly prune: KeySlotPrune;
  /** A READ COMMITTED transaction behind the queue's guard where it has one: `add` (see above) and `lockThenDelete` prunes run in it. */
  readonly behindGuard: { readonly begin: Statement[]; readonly guard: Statement | undefined };
  readonly claimOfKey: KeySlotClaim;
  readonly claimWithoutKey: KeySlotClaim;
}

/**
 * perKey: how many times one claim tries when its slots found only keys whose rows are all in
 * work, each try past the keys the last one found so. Past three such keys the claim takes
 * nothing and the loop polls again.
 */
const KEY_SLOT_ATTEMPTS = 3;

/**
 * perKey, in claim order (Postgres): how long this form's claims pass over a key whose claimable
 * rows a take found all in work (held by another replica or subscription). Those rows are the
 * oldest, so they head the claim order and each claim met them again: behind three such keys a
 * claim spent its three tries on them, took nothing and waited for the poll. A key passed over
 * this way gets a new row only by a publish, which waits at most this long here (other replicas
 * take it meanwhile).
 */
const BUSY_KEY_PASSED_MS = 1_000;

/**
 * perKey: how often a claim adds the slots of keys that have none, even when it found every slot
 * it wanted. A key's slots are added by a claim that found fewer than it wanted; while every
 * claim finds enough free slots of other keys, a key first published since has none, takes no
 * claim and would wait until those keys' rows ran short. The add reads the keys of the claim's
 * window (`KEY_WINDOW_ROWS`).
 */
const KEY_SLOT_ADD_INTERVAL_MS = 1_000;

/**
 * perKey: how often a claim deletes the slots of keys that have no claimable row left (their
 * first claim, then once a minute), and, on MySQL and MariaDB, how many slots one transaction
 * deletes. Each prune, and each of its pages there, reads the keys of every claimable row once.
 */
const KEY_SLOT_PRUNE_INTERVAL_MS = 60_000;
const KEY_SLOTS_PRUNED_PER_PAGE = 1_000;

/**
 * perKey on MySQL and MariaDB: candidates read beyond the rows or slots wanted, for the ones in
 * work elsewhere that the claim passes over (see `KeySlotClaim`, `KeySlotTake`).
 */
const CANDIDATES_PAST_ROWS_IN_WORK = 8;

/**
 * MySQL, MariaDB, on a table whose claim reads candidates before it locks (see
 * `candidatesThenLockSelect`): the claimable ids read past the rows wanted, for the rows in work
 * ahead of the free ones, one per busy worker of every replica. A claim that finds none free
 * among them looks once more, this many times as deep, before it takes nothing.
 */
const CANDIDATES_PAST_ROWS_WANTED = 64;
const DEEPER_CANDIDATES_FACTOR = 16;

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
  /** perKey: when this form last added missing key slots (`Date.now()`). */
  #keySlotsAddedAt = Number.NEGATIVE_INFINITY;
  /** perKey: when this form last deleted unused key slots (`Date.now()`). */
  #keySlotsPrunedAt = Number.NEGATIVE_INFINITY;
  /** perKey: the claimable rows whose keys each claim adds and takes slots for. */
  readonly #keyWindow = new KeyWindow();
  /** The statements that open the claim's transaction, bound once. */
  readonly #begin: readonly BoundStatement[];
  /** No guard, no slots, no claim of the service's own: the transaction opens with the claim itself. */
  readonly #isPlainClaim: boolean;
  /** perKey, taken in turn (MySQL, MariaDB): the last key whose slot this form took. */
  #lastKeyTaken = '';
  /**
   * perKey, in claim order (Postgres): the ids of the rows this form's claims hold. A key's first
   * claimable row was often one in work here, so a take found that key's free slot first, then
   * no free row under it, and tried again: with 520 keys of one row each and four workers, 3.8
   * takes a claim. The take ranks keys past these rows (`KeySlotTake`).
   */
  readonly #idsInWork = new Set<unknown>();
  /** perKey, in claim order: keys a take found with every claimable row in work, each with when it is tried again (`Date.now()`). */
  readonly #busyKeys = new Map<string, number>();
  /** Where settlements ask for a claim to chain after their commit; undefined when this form chains none. */
  #chains: ChainedClaimSource | undefined;
  /** The claim reads `:candidates` ids before it locks any (MySQL, MariaDB; see `candidatesThenLockSelect`). */
  readonly #readsCandidates: boolean;

  constructor(context: FormContext) {
    this.#context = context;
    this.#service = serviceStatementsOf(context);
    const statements = renderRowLockStatements(context, this.#service);
    this.#statements = statements;
    this.#begin = statements.begin.map((statement) => bindStatement(statement, {}));
    this.#isPlainClaim =
      statements.guard === undefined && statements.takeSlots === undefined && statements.keySlots === undefined && this.#service?.claim === undefined;
    this.claimsOneAtATime = claimsOneAtATime(context);
    this.#readsCandidates = statements.claim.params.includes('candidates');
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
            ...(keySlots.behindGuard.guard !== undefined && runsBehindGuard(keySlots) ? [keySlots.behindGuard.guard] : []),
            ...(keySlots.take.kind === 'claimOrder' ? [keySlots.take.heads, keySlots.take.lock] : [keySlots.take.after, keySlots.take.upTo, keySlots.take.lock]),
            ...(keySlots.prune.kind === 'oneStatement' ? [keySlots.prune.statement] : [keySlots.prune.unused, keySlots.prune.lock, keySlots.prune.delete]),
            ...[keySlots.claimOfKey, keySlots.claimWithoutKey].flatMap((claim) => (claim.kind === 'locking' ? [claim.statement] : [claim.candidates, claim.lock])),
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
    const { driver, spec, transactional } = this.#context;
    const statements = this.#statements;
    return withConnection(driver, async (connection, keep) => {
      const run = (statement: Statement, values: ParamValues = {}) => connection.execute(bindStatement(statement, values));
      const service = this.#service;
      const rowLimit = transactional ? 1 : limit;
      let rows: Record<string, unknown>[];
      if (this.#isPlainClaim) {
        // BEGIN and the claim in one round trip where the driver pipelines: on PostgreSQL with 16
        // workers, a message's four statements became two round trips.
        const claim = bindStatement(statements.claim, this.#claimValues(now, rowLimit));
        rows = (await executeAll(connection, [...this.#begin, claim])).at(-1)!.rows;
        if (rows.length === 0) rows = await this.#claimDeeper(run, now, rowLimit);
      } else {
        const guarded = await this.#claimGuarded(connection, run, now, rowLimit);
        if (guarded === undefined) return [];
        rows = guarded;
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
    if (this.#statements.keySlots?.take.kind === 'claimOrder') {
      const ids = claimed.map((row) => row.idValue);
      for (const id of ids) this.#idsInWork.add(id);
      void transaction.ended.then(() => {
        for (const id of ids) this.#idsInWork.delete(id);
      });
    }
    return claimed.map((row) => transaction.hold(row));
  }

  readonly #chainedClaimRun = (): ChainedClaimRun | undefined => {
    const source = this.#chains!;
    const claim = source.chainClaim();
    if (claim === undefined) return undefined;
    return {
      statements: [...this.#begin, bindStatement(this.#statements.claim, this.#claimValues(source.now(), 1))],
      claimed: (connection, rows) => this.#tookChained(connection, rows, claim),
      failed: (error) => claim.failed(error),
      abandoned: () => claim.abandoned(),
    };
  };

  /** A chained claim's answer: its row held as any claim's, or its empty transaction ended. */
  async #tookChained(connection: Connection, chainedRows: Record<string, unknown>[], claim: ChainedClaim): Promise<void> {
    let held: HeldRow[];
    try {
      let rows = chainedRows;
      if (rows.length === 0) {
        const run = (statement: Statement, values: ParamValues = {}) => connection.execute(bindStatement(statement, values));
        rows = await this.#claimDeeper(run, new Date(), 1);
      }
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

  /** What the claim statement binds: its group, now and rows wanted, and the candidates it reads where it reads them first. */
  #claimValues(now: Date, limit: number, candidatesPast = CANDIDATES_PAST_ROWS_WANTED): ParamValues {
    const values: ParamValues = { group: this.#context.group, now, limit };
    if (this.#readsCandidates) values.candidates = limit + candidatesPast;
    return values;
  }

  /**
   * A claim that read candidates and took none of them: all were in work elsewhere, or there were
   * none. Once more in the same transaction, reading further past the rows in work; nothing to
   * do where the claim reads no candidates.
   */
  async #claimDeeper(run: RunStatement, now: Date, limit: number): Promise<Record<string, unknown>[]> {
    if (!this.#readsCandidates) return [];
    return (await run(this.#statements.claim, this.#claimValues(now, limit, CANDIDATES_PAST_ROWS_WANTED * DEEPER_CANDIDATES_FACTOR))).rows;
  }

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

  /**
   * A claim behind a guard, slots or a claim of the service's own, in its transaction; undefined
   * when the guard or the global slots let it take nothing and the transaction has ended. Under
   * perKey, a claim whose slots all belonged to keys with no free row (their rows in work under
   * the key's other slots) took nothing but still holds those slots: it ends its transaction and
   * tries again past those keys, up to `KEY_SLOT_ATTEMPTS` times. Otherwise the next claim would
   * take the same key's slot first again, and no other key would run until its rows settled.
   * Key slots are added and taken for the keys of the claim's window (`KeyWindow`).
   */
  async #claimGuarded(connection: Connection, run: RunStatement, now: Date, limit: number): Promise<Record<string, unknown>[] | undefined> {
    if (this.#statements.keySlots === undefined) return this.#claimGuardedIn(connection, run, now, limit, undefined);
    const window = this.#keyWindow.open();
    try {
      return await this.#claimGuardedIn(connection, run, now, limit, window);
    } finally {
      this.#keyWindow.close(window, this.#isShortOfKeySlots);
    }
  }

  /** `#claimGuarded` under the window it chose. */
  async #claimGuardedIn(
    connection: Connection,
    run: RunStatement,
    now: Date,
    limit: number,
    window: number | undefined,
  ): Promise<Record<string, unknown>[] | undefined> {
    const { group } = this.#context;
    const statements = this.#statements;
    const service = this.#service;
    const passedKeys = this.#keysStillBusy();
    for (let attempt = 1; ; attempt += 1) {
      if (statements.keySlots !== undefined && Date.now() - this.#keySlotsPrunedAt >= KEY_SLOT_PRUNE_INTERVAL_MS) {
        await this.#pruneKeySlots(connection, run, statements.keySlots, now);
      }
      if (statements.keySlots !== undefined && (this.#isShortOfKeySlots || Date.now() - this.#keySlotsAddedAt >= KEY_SLOT_ADD_INTERVAL_MS)) {
        await this.#addKeySlots(run, statements.keySlots, now, window);
      }
      // Another claim or delivery owning the group ends the transaction, dropping what the guard
      // took; the guard goes with the BEGIN, in one round trip where the client pipelines.
      if (statements.guard === undefined) await executeAll(connection, this.#begin);
      else if (!(await ownsGroup(connection, statements.guard, { group }, statements.addGuardRow, this.#begin))) {
        await run(statements.rollback);
        return undefined;
      }
      // Each row in work holds a slot until its transaction ends: no free slot, no claim.
      let rowLimit = limit;
      if (statements.takeSlots !== undefined) {
        rowLimit = (await run(statements.takeSlots, { group, global: this.#context.concurrency?.global, limit: rowLimit })).rows.length;
        if (rowLimit === 0) {
          await run(statements.rollback);
          return undefined;
        }
      }
      if (service?.claim !== undefined) return this.#claimOwn(connection, service, now, rowLimit);
      if (statements.keySlots === undefined) {
        const rows = (await run(statements.claim, this.#claimValues(now, rowLimit))).rows;
        return rows.length > 0 ? rows : this.#claimDeeper(run, now, rowLimit);
      }
      const taken = await this.#claimUnderKeySlots(run, statements.keySlots, { now, window, limit: rowLimit }, passedKeys);
      if (statements.keySlots.take.kind === 'claimOrder') {
        const until = Date.now() + BUSY_KEY_PASSED_MS;
        for (const key of taken.keysWithoutRows) this.#busyKeys.set(key, until);
      }
      if (taken.rows.length > 0 || taken.keysWithoutRows.length === 0 || attempt === KEY_SLOT_ATTEMPTS) return taken.rows;
      passedKeys.push(...taken.keysWithoutRows);
      await run(statements.rollback);
    }
  }

  /** The keys of `#busyKeys` not yet due to be tried again; the others are forgotten. */
  #keysStillBusy(): string[] {
    const now = Date.now();
    const keys: string[] = [];
    for (const [key, until] of this.#busyKeys) {
      if (until > now) keys.push(key);
      else this.#busyKeys.delete(key);
    }
    return keys;
  }

  /** Before the claim's transaction: a slot inserted inside it would hold other claims' adds until the handler ends. */
  async #addKeySlots(run: RunStatement, keySlots: KeySlotRun, now: Date, window: number | undefined): Promise<void> {
    this.#keySlotsAddedAt = Date.now();
    const values = { group: this.#context.group, now, perKey: this.#context.concurrency?.perKey, window };
    if (!keySlots.addInTransaction) {
      await run(keySlots.add, values);
      return;
    }
    await this.#behindGuard(run, keySlots, values, () => run(keySlots.add, values));
  }

  /** `work` in a READ COMMITTED transaction of its own, after the queue's guard where it has one. */
  async #behindGuard<T>(run: RunStatement, keySlots: KeySlotRun, values: ParamValues, work: () => Promise<T>): Promise<T> {
    const { begin, guard } = keySlots.behindGuard;
    for (const statement of begin) await run(statement);
    try {
      if (guard !== undefined) await run(guard, values);
      const result = await work();
      await run(this.#statements.commit);
      return result;
    } catch (error) {
      await run(this.#statements.rollback);
      throw error;
    }
  }

  /**
   * Deletes the slots of keys with no claimable row that no delivery holds: in one statement, or
   * (MySQL, MariaDB) a page at a time in key order until a page finds fewer than it may read. A
   * slot deleted just as its key's next row is published is added again by the next add, as a
   * new key's are.
   */
  async #pruneKeySlots(connection: Connection, run: RunStatement, keySlots: KeySlotRun, now: Date): Promise<void> {
    this.#keySlotsPrunedAt = Date.now();
    const { group } = this.#context;
    const prune = keySlots.prune;
    if (prune.kind === 'oneStatement') {
      await run(prune.statement, { group, now });
      return;
    }
    let past: { key: unknown; slot: unknown } = { key: '', slot: 0 };
    for (;;) {
      const values = { group, now, ...past, limit: KEY_SLOTS_PRUNED_PER_PAGE };
      const unused = await this.#behindGuard(run, keySlots, values, async () => {
        const found = (await run(prune.unused, values)).rows;
        for (let first = 0; first < found.length; first += KEY_SLOTS_PER_DELETE) {
          const named = found.slice(first, first + KEY_SLOTS_PER_DELETE).map(slotParams);
          const locked = (await connection.execute(bindRepeated(prune.lock, named, { group }, 'slot'))).rows;
          if (locked.length > 0) await connection.execute(bindRepeated(prune.delete, locked.map(slotParams), { group }, 'slot'));
        }
        return found;
      });
      const last = unused.at(-1);
      if (unused.length < KEY_SLOTS_PRUNED_PER_PAGE || last === undefined) return;
      past = slotParams(last);
    }
  }

  /**
   * Locks up to `limit` free key slots (past `passedKeys` where slots are taken in claim order),
   * takes under each slot a row of its key, and fills what is left with rows without a key: a key
   * never has more rows in work than slots locked, and a row without a key needs none. A key
   * whose slot found no free row (its rows in work under its other slots) is reported, and makes
   * the next claim add missing slots first: a key that has none yet is met the same way.
   */
  async #claimUnderKeySlots(
    run: RunStatement,
    keySlots: KeySlotRun,
    claim: { readonly now: Date; readonly window: number | undefined; readonly limit: number },
    passedKeys: readonly string[],
  ): Promise<{ rows: Record<string, unknown>[]; keysWithoutRows: string[] }> {
    const { group, spec } = this.#context;
    const { now, window, limit } = claim;
    const perKey = this.#context.concurrency?.perKey;
    const values = { group, now, perKey, window, limit };
    let slots: Record<string, unknown>[];
    if (keySlots.take.kind === 'claimOrder') {
      slots = await takeSlotsInClaimOrder(run, keySlots.take, { ...values, passedKeys, ids: [...this.#idsInWork] }, limit);
    } else {
      slots = await takeSlotsInTurn(run, keySlots.take, { ...values, key: this.#lastKeyTaken }, limit);
      const last = slots.at(-1);
      if (last !== undefined) this.#lastKeyTaken = String(last['key_value']);
    }
    const slotsOfKey = new Map<string, number>();
    for (const slot of slots) slotsOfKey.set(String(slot['key_value']), (slotsOfKey.get(String(slot['key_value'])) ?? 0) + 1);
    const rows = new Map<unknown, Record<string, unknown>>();
    const keysWithoutRows: string[] = [];
    const take = async (claim: KeySlotClaim, key: string | undefined, most: number) => {
      const taken = await takeRows(run, claim, spec.id.column, { group, now, key }, most);
      for (const row of taken) rows.set(row[spec.id.column], row);
      return taken.length;
    };
    for (const [key, count] of slotsOfKey) {
      if ((await take(keySlots.claimOfKey, key, count)) === 0) keysWithoutRows.push(key);
    }
    this.#isShortOfKeySlots = slots.length < limit || keysWithoutRows.length > 0;
    if (rows.size < limit) await take(keySlots.claimWithoutKey, undefined, limit - rows.size);
    return { rows: [...rows.values()], keysWithoutRows };
  }
}

/**
 * Up to `most` claimable rows, locked without waiting: by one locking read, or (`readThenLock`)
 * by candidates read a page at a time in claim order and locked one by one by primary key. A
 * candidate already locked is in work elsewhere; the rows in work bound how many are passed over.
 */
async function takeRows(
  run: RunStatement,
  claim: KeySlotClaim,
  idColumn: string,
  values: { group: string | undefined; now: Date; key: string | undefined },
  most: number,
): Promise<Record<string, unknown>[]> {
  if (claim.kind === 'locking') return (await run(claim.statement, { ...values, limit: most })).rows;
  const taken: Record<string, unknown>[] = [];
  const pageSize = most + CANDIDATES_PAST_ROWS_IN_WORK;
  for (let offset = 0; ; offset += pageSize) {
    const candidates = (await run(claim.candidates, { ...values, limit: pageSize, offset })).rows;
    for (const candidate of candidates) {
      const row = (await run(claim.lock, { id: candidate[idColumn], group: values.group, now: values.now })).rows[0];
      if (row === undefined) continue;
      taken.push(row);
      if (taken.length === most) return taken;
    }
    if (candidates.length < pageSize) return taken;
  }
}

/**
 * Up to `most` free key slots in claim order (`claimOrder`): the keys read a page at a time, the
 * free slots of each page's keys locked in their order. A key whose slots are all locked is at
 * its limit elsewhere; each page is twice the one before, so keys at their limit cost a few
 * pages, not one per handful of keys. The pages are read while rows settle and arrive, so a key
 * can come again in a later page: its slots are not locked twice, since a lock this transaction
 * holds does not skip its own rows and the key would get rows for a slot counted twice.
 */
async function takeSlotsInClaimOrder(
  run: RunStatement,
  take: Extract<KeySlotTake, { kind: 'claimOrder' }>,
  values: ParamValues & { readonly group: string | undefined },
  most: number,
): Promise<Record<string, unknown>[]> {
  const taken: Record<string, unknown>[] = [];
  const keysRead = new Set<unknown>();
  for (let offset = 0, pageSize = most + CANDIDATES_PAST_ROWS_IN_WORK; ; offset += pageSize, pageSize *= 2) {
    const heads = (await run(take.heads, { ...values, limit: pageSize, offset })).rows;
    const keys = heads.map((head) => head['tablequeue_key']).filter((key) => !keysRead.has(key));
    for (const key of keys) keysRead.add(key);
    if (keys.length > 0) taken.push(...(await run(take.lock, { group: values.group, keys, perKey: values.perKey, limit: most - taken.length })).rows);
    if (taken.length >= most || heads.length < pageSize) return taken;
  }
}

/**
 * Up to `most` free key slots in turn (`roundRobin`): candidates read a page at a time past the
 * last key taken, then from the first key on, each locked by primary key without waiting. A
 * candidate already locked is held by a claim elsewhere; the slots in work bound how many are
 * passed over. A slot read again in a later page (the pages shift as rows arrive) is not locked
 * again: the lock would return it, held by this transaction, and the key would count it twice.
 */
async function takeSlotsInTurn(
  run: RunStatement,
  take: Extract<KeySlotTake, { kind: 'roundRobin' }>,
  values: ParamValues & { readonly group: string | undefined },
  most: number,
): Promise<Record<string, unknown>[]> {
  const taken: Record<string, unknown>[] = [];
  const slotsRead = new Set<string>();
  const pageSize = most + CANDIDATES_PAST_ROWS_IN_WORK;
  for (const candidatesInTurn of [take.after, take.upTo]) {
    for (let offset = 0; ; offset += pageSize) {
      const candidates = (await run(candidatesInTurn, { ...values, limit: pageSize, offset })).rows;
      for (const candidate of candidates) {
        const slotName = JSON.stringify([candidate['key_value'], candidate['slot']]);
        if (slotsRead.has(slotName)) continue;
        slotsRead.add(slotName);
        const slot = (await run(take.lock, { group: values.group, ...slotParams(candidate) })).rows[0];
        if (slot === undefined) continue;
        taken.push(slot);
        if (taken.length === most) return taken;
      }
      if (candidates.length < pageSize) break;
    }
  }
  return taken;
}

/** A key slot row (`key_value`, `slot`) as the `key` and `slot` a statement binds. */
function slotParams(slot: Record<string, unknown>): { key: unknown; slot: unknown } {
  return { key: slot['key_value'], slot: slot['slot'] };
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
    keySlots: keySlots === undefined ? undefined : renderKeySlotRun(context, keySlots, guard),
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

/** Whether anything of `keySlots` runs in its `behindGuard` transaction (MySQL, MariaDB). */
function runsBehindGuard(keySlots: KeySlotRun): boolean {
  return keySlots.addInTransaction || keySlots.prune.kind === 'lockThenDelete';
}

function renderKeySlotRun(context: FormContext, keySlots: KeySlotStatements, guard: Statement | undefined): KeySlotRun {
  const { dialect, spec, columns } = context;
  return {
    add: keySlots.add(spec),
    addInTransaction: keySlots.addInTransaction,
    take: keySlots.take(spec),
    prune: keySlots.prune(spec),
    behindGuard: { begin: dialect.session.begin({ isolation: 'read committed' }), guard },
    claimOfKey: keySlots.claimOfKey(spec, columns),
    claimWithoutKey: keySlots.claimWithoutKey(spec, columns),
  };
}
