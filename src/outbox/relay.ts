import { ownsGroup, runSingleClaim } from '../claim/claim-guard.js';
import { leaseExpiry, roundLeaseMs } from '../claim/lease-book.js';
import { decodeHeaders } from '../delivery/codec.js';
import { DeliveryTransaction } from '../delivery/delivery-transaction.js';
import type { Dialect, LeaseClaim } from '../dialect/dialect.js';
import { createOutboxStatements, type OutboxStatements } from '../dialect/outbox-statements.js';
import type { Connection, Driver } from '../driver/driver.js';
import { prepareStatements } from '../driver/prepare-statements.js';
import { WakeSignal } from '../internal/wake-signal.js';
import type { Queue } from '../definition/define-table.js';
import type { PublishItem } from '../publish/publish-options.js';
import { bindStatement, type ParamValues } from '../statement.js';
import type { OutboxTable } from './define-outbox.js';
import { OUTBOX_RECORD_ID_HEADER, type OutboxDestination, type OutboxRecord, type RelayTransaction } from './destination.js';
import type { ResolvedRelayOptions } from './relay-options.js';

/** A names query or claim that failed waits this long before the next, as a subscription's claim does. */
const FAILED_CLAIM_BACKOFF_MS = 1_000;

/**
 * A write on the service's own connection commits when the service says so, which the broker
 * never sees: after one, the relay looks again after 5 ms, then 10, 20… up to the poll interval,
 * so a commit that follows its write by a few milliseconds is relayed within about as long.
 */
const FIRST_UNSEEN_COMMIT_RECHECK_MS = 5;

/** Names whose failure count is kept; past this the oldest are forgotten (their next backoff starts over). */
const MAX_REMEMBERED_FAILING_NAMES = 10_000;

/** What a relay needs from its broker once it started. */
export interface RelayRuntime {
  readonly driver: Driver;
  readonly dialect: Dialect;
  /**
   * Writes rows on the relay's transaction through the broker's publish path, so they are
   * counted and traced as the broker's own publishes are.
   */
  readonly publishManyWithin: <Payload>(
    queue: Queue<Payload>,
    items: readonly PublishItem<Payload>[],
    transaction: DeliveryTransaction,
  ) => Promise<number>;
  /** The broker the relay runs on: a destination on its database writes inside the relay's transaction. */
  readonly broker: object;
  readonly onError: (error: unknown, detail: Record<string, unknown>) => void;
  readonly onWarning: (message: string) => void;
}

export interface RelayStats {
  /** The outbox table. */
  readonly outbox: string;
  /** The destination's description. */
  readonly destination: string;
  /** Sends write inside the relay's transaction (a queue on the outbox's database): exactly once. */
  readonly isTransactional: boolean;
  /** Records the destination confirmed and the relay marked processed (or deleted). */
  readonly relayed: number;
  /** Sends (batches of one name) confirmed. */
  readonly sends: number;
  /** Sends that failed; their records wait a backoff and go again. */
  readonly failedSends: number;
  /** Claims of a name's records, and those that found none (another replica took the name first). */
  readonly claims: number;
  readonly emptyClaims: number;
  /** Batches whose lease another claim took while they were out (a send past its renewals, a process paused). */
  readonly leasesLost: number;
  readonly namesInWork: number;
  /** Names that failed and wait their backoff before the next send. */
  readonly namesWaitingToRetry: number;
}

/** One claimed batch: a name's first records, all under one lease token. */
interface Batch {
  readonly name: string;
  readonly records: OutboxRecord[];
  /** The lease expiry every record of the batch carries. */
  token: Date;
  /** A renewal whose outcome is unknown may have written this token instead. */
  uncertainToken: Date | undefined;
}

/**
 * Relays an outbox table to a destination, continuously, beside any number of replicas.
 *
 * The loop asks which names have records and none in work, and hands up to `concurrency` names
 * to a worker each. A worker claims the name's first `batch` records under one lease (the FIFO
 * guard keeps two claims of one name apart), sends them, and marks them processed only after the
 * destination confirmed: in the relay's own transaction for a destination on the outbox's
 * database, otherwise after `send` resolved, renewing the lease every half lease meanwhile. A
 * failed send moves the lease to the end of a growing backoff, so nothing of that name goes out
 * of order, and no replica sends it before then. The loop wakes on writes in this process, on
 * LISTEN notifications, when a worker ends and when a backoff ends; the poll interval is the floor.
 */
export class Relay {
  readonly outbox: OutboxTable;
  readonly destination: OutboxDestination;
  readonly #options: ResolvedRelayOptions;
  readonly #leaseMs: number;
  readonly #signal = new WakeSignal();
  readonly #inWork = new Map<string, Promise<void>>();
  readonly #failures = new Map<string, number>();
  readonly #retryTimers = new Map<string, NodeJS.Timeout>();
  #runtime: RelayRuntime | undefined;
  #statements: OutboxStatements | undefined;
  #isTransactional = false;
  #loop: Promise<void> | undefined;
  #isStopping = false;
  #unseenCommitRecheckMs: number | undefined;
  #needsOpen = true;
  #opening: Promise<void> | undefined;
  #relayed = 0;
  #sends = 0;
  #failedSends = 0;
  #claims = 0;
  #emptyClaims = 0;
  #leasesLost = 0;

  constructor(outbox: OutboxTable, destination: OutboxDestination, options: ResolvedRelayOptions) {
    this.outbox = outbox;
    this.destination = destination;
    this.#options = options;
    this.#leaseMs = roundLeaseMs(options.leaseMs);
  }

  get #label(): string {
    return `relay of outbox "${this.outbox.label}" to ${this.destination.description}`;
  }

  /** Renders and prepares every statement, so a missing table or column fails `start()` with a `SchemaError`. */
  async open(runtime: RelayRuntime): Promise<void> {
    const { dialect, driver } = runtime;
    const spec = this.outbox.spec;
    dialect.validateTable(spec);
    const columns = [spec.id.column, spec.group!.column, ...(spec.headers === undefined ? [] : [spec.headers]), spec.payload!];
    const statements = createOutboxStatements(dialect, spec, columns);
    const claim = statements.claim;
    const claimStatements =
      claim.kind === 'single'
        ? [...(claim.guarded ? [claim.guarded.guard] : []), claim.statement]
        : [...(claim.guard ? [claim.guard] : []), claim.select, claim.stamp];
    await prepareStatements(driver, [statements.names, ...claimStatements, statements.finish, statements.extend], {
      kind: 'outbox',
      table: this.outbox.label,
    });
    this.#runtime = runtime;
    this.#statements = statements;
    this.#isTransactional =
      this.destination.sendWithin !== undefined && this.destination.sharesDatabaseWith?.(runtime.broker) === true;
  }

  start(): void {
    this.#loop ??= this.#run();
  }

  /** A record was written (or a notification came): look at once. */
  wake(): void {
    this.#signal.wake();
  }

  /** A record was written on a connection whose commit nobody reports: look at once and again shortly after. */
  wakeAfterUnseenCommit(): void {
    this.#unseenCommitRecheckMs = FIRST_UNSEEN_COMMIT_RECHECK_MS;
    this.#signal.wake();
  }

  /**
   * Claims nothing more and lets sends in flight finish and be marked, up to `timeoutMs`; then
   * closes the destination. A send still running then is left to its lease: its records go again.
   */
  async stop(timeoutMs: number): Promise<void> {
    this.#isStopping = true;
    for (const timer of this.#retryTimers.values()) clearTimeout(timer);
    this.#retryTimers.clear();
    this.#signal.wake();
    await this.#loop;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.allSettled(this.#inWork.values()),
      new Promise((resolve) => (timer = setTimeout(resolve, timeoutMs))),
    ]);
    clearTimeout(timer);
    await this.destination.close().catch((error: unknown) => this.#runtime?.onError(error, this.#detail({ phase: 'close' })));
  }

  stats(): RelayStats {
    return {
      outbox: this.outbox.label,
      destination: this.destination.description,
      isTransactional: this.#isTransactional,
      relayed: this.#relayed,
      sends: this.#sends,
      failedSends: this.#failedSends,
      claims: this.#claims,
      emptyClaims: this.#emptyClaims,
      leasesLost: this.#leasesLost,
      namesInWork: this.#inWork.size,
      namesWaitingToRetry: this.#retryTimers.size,
    };
  }

  async #run(): Promise<void> {
    const { pollIntervalMs } = this.#options;
    while (!this.#isStopping) {
      const free = this.#maxNamesInWork() - this.#inWork.size;
      let started = 0;
      if (free > 0) {
        let names: string[];
        try {
          names = await this.#names(free + this.#inWork.size);
        } catch (error) {
          this.#runtime!.onError(error, this.#detail({ phase: 'names' }));
          await this.#signal.wait(FAILED_CLAIM_BACKOFF_MS);
          continue;
        }
        for (const name of names) {
          if (this.#isStopping || started >= free) break;
          if (this.#inWork.has(name)) continue;
          this.#startName(name);
          started += 1;
        }
      }
      if (this.#isStopping) break;
      if (started > 0 || this.#inWork.size > 0) {
        // A worker that ends wakes the loop; the poll interval only bounds the wait.
        this.#unseenCommitRecheckMs = undefined;
        await this.#signal.wait(pollIntervalMs);
      } else {
        await this.#signal.wait(this.#idleWaitMs());
      }
    }
  }

  /** WP-2 for the relay: at most the pool's size minus one connection in use, at least one. */
  #maxNamesInWork(): number {
    const poolSize = this.#runtime!.driver.stats().size;
    return Math.min(this.#options.concurrency, Math.max(poolSize - 1, 1));
  }

  #idleWaitMs(): number {
    const recheckMs = this.#unseenCommitRecheckMs;
    if (recheckMs === undefined) return this.#options.pollIntervalMs;
    const next = recheckMs * 2;
    this.#unseenCommitRecheckMs = next < this.#options.pollIntervalMs ? next : undefined;
    return recheckMs;
  }

  async #names(limit: number): Promise<string[]> {
    const { driver } = this.#runtime!;
    const statement = bindStatement(this.#statements!.names, { leaseNow: new Date(), limit });
    const nameColumn = this.outbox.spec.group!.column;
    return (await driver.execute(statement)).rows.map((row) => String(row[nameColumn]));
  }

  /**
   * A worker that took records wakes the loop when it ends, since more may wait. One that found
   * the name taken (another replica, a writer holding a record's row lock) does not: the loop
   * would only find the same name again at once.
   */
  #startName(name: string): void {
    const work = this.#relayName(name).then(
      (tookRecords) => {
        this.#inWork.delete(name);
        if (tookRecords) this.#signal.wake();
      },
      (error: unknown) => {
        this.#inWork.delete(name);
        this.#runtime!.onError(error, this.#detail({ name, phase: 'claim' }));
      },
    );
    this.#inWork.set(name, work);
  }

  /** One batch of one name: claim, send, mark; or after a failure, the backoff. Whether it took records. */
  async #relayName(name: string): Promise<boolean> {
    const batch = await this.#claim(name);
    if (batch === undefined) return false;
    try {
      if (this.#isTransactional) await this.#sendWithin(batch);
      else await this.#sendThenFinish(batch);
    } catch (error) {
      await this.#retryLater(batch, error);
      return true;
    }
    this.#failures.delete(name);
    return true;
  }

  async #claim(name: string): Promise<Batch | undefined> {
    const { driver, dialect } = this.#runtime!;
    const now = new Date();
    const lockedUntil = leaseExpiry(now, this.#leaseMs);
    const values: ParamValues = { group: name, leaseNow: now, limit: this.#options.batch, lockedUntil };
    const claim = this.#statements!.claim;
    const connection = await driver.acquire();
    if (!(await this.#beginOnSingleWriter(connection))) return undefined;
    let rows: Record<string, unknown>[];
    try {
      rows =
        claim.kind === 'single'
          ? await runSingleClaim(connection, claim, values, { commit: dialect.session.commit(), rollback: dialect.session.rollback() })
          : await this.#selectThenStamp(connection, claim, values);
      if (this.#runtime!.dialect.capabilities.hasSingleWriter) {
        await connection.execute(bindStatement(this.#runtime!.dialect.session.commit(), {}));
      }
    } catch (error) {
      connection.destroy();
      throw error;
    }
    connection.release();
    this.#claims += 1;
    if (rows.length === 0) {
      this.#emptyClaims += 1;
      return undefined;
    }
    const records = rows.map((row) => this.#record(row)).sort(byRecordId);
    return { name, records, token: lockedUntil, uncertainToken: undefined };
  }

  /**
   * MySQL/MariaDB: the guard locked every unfinished record of the name, the select reads the
   * first ones, a stamp leases each. Stamps stop at the first that finds its record taken, so
   * the batch stays the name's first records, with no gap.
   */
  async #selectThenStamp(
    connection: Connection,
    claim: Extract<LeaseClaim, { kind: 'selectThenStamp' }>,
    values: ParamValues,
  ): Promise<Record<string, unknown>[]> {
    const idColumn = this.outbox.spec.id.column;
    for (const statement of claim.begin) await connection.execute(bindStatement(statement, {}));
    const rollback = this.#runtime!.dialect.session.rollback();
    if (claim.guard !== undefined && !(await ownsGroup(connection, claim.guard, values, rollback))) return [];
    const selected = (await connection.execute(bindStatement(claim.select, values))).rows;
    const stamped: Record<string, unknown>[] = [];
    for (const row of selected) {
      const stamp = bindStatement(claim.stamp, { ...values, id: row[idColumn] });
      if ((await connection.execute(stamp)).affectedRows === 0) break;
      stamped.push(row);
    }
    await connection.execute(bindStatement(this.#runtime!.dialect.session.commit(), {}));
    return stamped;
  }

  /**
   * SQLite: the claim runs in a transaction of its own. A service that shares its handle with the
   * broker may hold a transaction open on it (between its BEGIN and COMMIT around a write); a
   * statement run then would belong to that transaction, and a record it claimed could be sent
   * and then rolled back. BEGIN fails there, the handle is left to the service as it was, and
   * the relay looks again later. Elsewhere every connection is the pool's own: nothing to do.
   */
  async #beginOnSingleWriter(connection: Connection): Promise<boolean> {
    if (!this.#runtime!.dialect.capabilities.hasSingleWriter) return true;
    try {
      for (const statement of this.#statements!.begin) await connection.execute(bindStatement(statement, {}));
      return true;
    } catch {
      connection.release();
      return false;
    }
  }

  #record(row: Record<string, unknown>): OutboxRecord {
    const spec = this.outbox.spec;
    const id = String(row[spec.id.column]);
    const payload = row[spec.payload!];
    const written = spec.headers === undefined ? {} : decodeHeaders(row[spec.headers]);
    return {
      id,
      name: String(row[spec.group!.column]),
      payload: Buffer.isBuffer(payload) ? payload : Buffer.from(payload as Uint8Array),
      headers: { ...written, [OUTBOX_RECORD_ID_HEADER]: id },
    };
  }

  /** A destination elsewhere: send with the lease renewed meanwhile, then mark what it confirmed. */
  async #sendThenFinish(batch: Batch): Promise<void> {
    await this.#openDestination();
    const renewal = this.#renewWhileSending(batch);
    try {
      await this.destination.send(batch.records);
    } finally {
      await renewal.stop();
    }
    const { driver } = this.#runtime!;
    const now = new Date();
    let finished = 0;
    for (const held of [batch.token, ...(batch.uncertainToken === undefined ? [] : [batch.uncertainToken])]) {
      finished += (await driver.execute(bindStatement(this.#statements!.finish, { group: batch.name, held, now }))).affectedRows;
      if (finished >= batch.records.length) break;
    }
    this.#confirmed(batch);
    if (finished < batch.records.length) this.#leaseLost(batch, 'marking the sent records processed');
  }

  /**
   * A destination on the outbox's database: the marks first (they lock the records and prove
   * the lease still holds), then the destination's writes, then one commit for both.
   */
  async #sendWithin(batch: Batch): Promise<void> {
    const { driver, dialect, publishManyWithin } = this.#runtime!;
    const statements = this.#statements!;
    await this.#openDestination();
    const connection = await driver.acquire();
    if (dialect.capabilities.hasSingleWriter && !(await this.#beginOnSingleWriter(connection))) {
      await this.#retryLater(batch, undefined);
      return;
    }
    const transaction = new DeliveryTransaction(connection, batch.records[0]!.id);
    let isOpen = dialect.capabilities.hasSingleWriter;
    try {
      if (!isOpen) for (const statement of statements.begin) await connection.execute(bindStatement(statement, {}));
      isOpen = true;
      const finish = bindStatement(statements.finish, { group: batch.name, held: batch.token, now: new Date() });
      if ((await connection.execute(finish)).affectedRows !== batch.records.length) {
        await connection.execute(bindStatement(dialect.session.rollback(), {}));
        isOpen = false;
        transaction.rolledBack();
        connection.release();
        this.#leaseLost(batch, 'opening the transaction that writes them');
        return;
      }
      const lent: RelayTransaction = {
        publishMany: (queue, items) => publishManyWithin(queue, items, transaction),
      };
      await this.destination.sendWithin!(batch.records, lent);
      transaction.endLoan();
      await connection.execute(bindStatement(dialect.session.commit(), {}));
      isOpen = false;
    } catch (error) {
      transaction.rolledBack();
      if (isOpen) {
        await connection.execute(bindStatement(dialect.session.rollback(), {})).then(
          () => connection.release(),
          () => connection.destroy(),
        );
      } else {
        connection.destroy();
      }
      throw error;
    }
    connection.release();
    transaction.committed();
    this.#confirmed(batch);
  }

  #confirmed(batch: Batch): void {
    this.#sends += 1;
    this.#relayed += batch.records.length;
  }

  #leaseLost(batch: Batch, when: string): void {
    this.#leasesLost += 1;
    this.#runtime!.onWarning(
      `${this.#label}: the lease on ${batch.records.length} records of "${batch.name}" was lost before ${when} (a send took longer than the lease, or the process paused); another claim has them and sends them again`,
    );
  }

  /** Connects before the first send and after a failed one; concurrent sends share one attempt. */
  async #openDestination(): Promise<void> {
    if (!this.#needsOpen) return;
    this.#opening ??= this.destination.open().then(
      () => {
        this.#needsOpen = false;
        this.#opening = undefined;
      },
      (error: unknown) => {
        this.#opening = undefined;
        throw error;
      },
    );
    await this.#opening;
  }

  /** Renews the batch's lease every half lease until stopped; `stop` waits for a renewal in flight. */
  #renewWhileSending(batch: Batch): { stop(): Promise<void> } {
    const { driver } = this.#runtime!;
    let inFlight: Promise<void> | undefined;
    const renew = async () => {
      const next = leaseExpiry(new Date(), this.#leaseMs);
      const extend = bindStatement(this.#statements!.extend, { group: batch.name, held: batch.token, lockedUntil: next });
      try {
        const renewed = (await driver.execute(extend)).affectedRows;
        if (renewed > 0) batch.token = next;
        if (renewed < batch.records.length) this.#leaseLost(batch, 'a renewal');
      } catch (error) {
        batch.uncertainToken = next;
        this.#runtime!.onError(error, this.#detail({ name: batch.name, phase: 'lease renewal' }));
      }
    };
    const timer = setInterval(() => {
      inFlight ??= renew().finally(() => (inFlight = undefined));
    }, this.#leaseMs / 2);
    return {
      stop: async () => {
        clearInterval(timer);
        await inFlight;
      },
    };
  }

  /**
   * The send failed (`error`), or could not begin (undefined: a service transaction held the
   * shared SQLite handle): the records keep their lease until the backoff ends (none of the name
   * goes before them, no replica takes them sooner), the destination is opened again before the
   * next send, and the loop wakes when the backoff ends.
   */
  async #retryLater(batch: Batch, error: unknown): Promise<void> {
    const { name } = batch;
    if (error !== undefined) {
      this.#failedSends += 1;
      this.#needsOpen = true;
    }
    const failures = (this.#failures.get(name) ?? 0) + (error === undefined ? 0 : 1);
    this.#failures.delete(name);
    this.#failures.set(name, failures);
    if (this.#failures.size > MAX_REMEMBERED_FAILING_NAMES) this.#failures.delete(this.#failures.keys().next().value!);
    const { initialMs, maxMs } = this.#options.retryBackoff;
    const backoffMs = Math.min(maxMs, initialMs * 2 ** Math.max(0, Math.min(failures - 1, 30)));
    const now = new Date();
    const retryAt = leaseExpiry(now, backoffMs);
    const extend = bindStatement(this.#statements!.extend, { group: name, held: batch.token, lockedUntil: retryAt });
    await this.#runtime!.driver.execute(extend).catch((extendError: unknown) =>
      this.#runtime!.onError(extendError, this.#detail({ name, phase: 'backoff' })),
    );
    if (error !== undefined) {
      const retryInMs = retryAt.getTime() - now.getTime();
      this.#runtime!.onError(error, this.#detail({ name, records: batch.records.length, phase: 'send', retryInMs }));
    }
    if (this.#isStopping) return;
    clearTimeout(this.#retryTimers.get(name));
    this.#retryTimers.set(
      name,
      setTimeout(() => {
        this.#retryTimers.delete(name);
        this.#signal.wake();
      }, retryAt.getTime() - Date.now()),
    );
  }

  #detail(extra: Record<string, unknown>): Record<string, unknown> {
    return { outbox: this.outbox.label, destination: this.destination.description, ...extra };
  }
}

/** Record order is id order; generated ids are integers, compared as such whatever their length. */
function byRecordId(left: OutboxRecord, right: OutboxRecord): number {
  const a = BigInt(left.id);
  const b = BigInt(right.id);
  return a < b ? -1 : a > b ? 1 : 0;
}
