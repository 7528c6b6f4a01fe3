import { ensureFifoGuardTable } from '../claim/fifo-guard-rows.js';
import { leaseExpiry, roundLeaseMs } from '../claim/lease-book.js';
import { DeliveryTransaction } from '../delivery/delivery-transaction.js';
import { createOutboxStatements, type OutboxStatements } from '../dialect/outbox-statements.js';
import { withTransaction } from '../driver/connection-scope.js';
import { EncodeError } from '../errors.js';
import { prepareStatements } from '../driver/prepare-statements.js';
import { bindStatement } from '../statement.js';
import type { OutboxTable } from './define-outbox.js';
import type { OutboxDestination, RelayTransaction } from './destination.js';
import { DestinationLink } from './destination-link.js';
import { NameBackoffs } from './name-backoffs.js';
import type { ResolvedRelayOptions } from './relay-options.js';
import { RelayBatchClaimer, type RelayBatch as Batch } from './relay-batch.js';
import { RelayLoop } from './relay-loop.js';
import { RelaySignals, type RelayCounts, type RelayRuntime, type RelayStats } from './relay-runtime.js';

/**
 * How a send into the outbox's database ended: its transaction committed, the lease was found
 * lost, or the transaction could not begin (the service held the shared session in one of its own).
 */
type SentWithin = DeliveryTransaction | 'leaseLost' | 'notBegun';

/** The first record of a batch its destination could never take: its place in the batch, and the error that names it. */
interface RefusedRecord {
  readonly index: number;
  readonly error: EncodeError;
}

/** The names waiting to retry that `stats()` lists (every one is counted): enough to show which are stuck. */
const MAX_WAITING_NAMES_REPORTED = 10;

/** Set by Relay's static block, which alone may read a relay's signals; for `testSignalsOfRelay`. */
let signalsOfRelay: (relay: Relay) => RelaySignals;

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
  readonly #loop: RelayLoop;
  readonly #backoffs: NameBackoffs;
  readonly #link: DestinationLink;
  readonly #counts: RelayCounts = { relayed: 0, sends: 0, failedSends: 0, claims: 0, emptyClaims: 0, leasesLost: 0 };
  #runtime: RelayRuntime | undefined;
  #statements: OutboxStatements | undefined;
  #batches: RelayBatchClaimer | undefined;
  #isTransactional = false;
  readonly #signals = new RelaySignals();

  static {
    signalsOfRelay = (relay) => relay.#signals;
  }

  constructor(outbox: OutboxTable, destination: OutboxDestination, options: ResolvedRelayOptions) {
    this.outbox = outbox;
    this.destination = destination;
    this.#options = options;
    this.#leaseMs = roundLeaseMs(options.leaseMs);
    this.#loop = new RelayLoop({
      concurrency: options.concurrency,
      pollIntervalMs: options.pollIntervalMs,
      poolSize: () => this.#runtime!.driver.stats().size,
      names: (limit) => this.#names(limit),
      relayName: (name) => this.#relayName(name),
      onError: (error, detail) => this.#runtime!.onError(error, this.#detail(detail)),
    });
    this.#backoffs = new NameBackoffs(options.retryBackoff, () => this.#loop.wake());
    this.#link = new DestinationLink(destination);
  }

  /** Renders and prepares every statement, so a missing table or column fails `start()` with a `SchemaError`. */
  async open(runtime: RelayRuntime): Promise<void> {
    const { dialect, driver } = runtime;
    const spec = this.outbox.spec;
    dialect.validateTable(spec);
    const columns = [spec.id.column, spec.group!.column, ...(spec.headers === undefined ? [] : [spec.headers]), spec.payload!];
    const statements = createOutboxStatements(dialect, spec, columns);
    // Before the prepare: the claim's guard reads the guard rows' table (MySQL, MariaDB).
    await ensureFifoGuardTable(driver, dialect.name, spec);
    const batches = new RelayBatchClaimer({
      driver,
      dialect,
      spec,
      statements,
      leaseMs: this.#leaseMs,
      batchSize: this.#options.batch,
      counts: this.#counts,
      onLost: (batch) => this.#leaseLost(batch, 'a renewal'),
      onRenewalError: (error, name) => runtime.onError(error, this.#detail({ name, phase: 'lease renewal' })),
    });
    const prepared = [statements.names, ...batches.statements, statements.finish, statements.extend];
    await prepareStatements(driver, prepared, { kind: 'outbox', table: this.outbox.label });
    this.#runtime = runtime;
    this.#statements = statements;
    this.#batches = batches;
    this.#isTransactional =
      this.destination.sendWithin !== undefined && this.destination.sharesDatabaseWith?.(runtime.broker) === true;
  }

  start(): void {
    this.#loop.start();
  }

  /** A record was written (or a notification came): look at once. */
  wake(): void {
    this.#loop.wake();
  }

  /** A record was written on a connection whose commit nobody reports: look at once and again shortly after. */
  wakeAfterUnseenCommit(): void {
    this.#loop.wakeAfterUnseenCommit();
  }

  /**
   * Claims nothing more and lets sends in flight finish and be marked, up to `timeoutMs`; then
   * closes the destination. A send still running then is left to its lease: its records go again.
   */
  async stop(timeoutMs: number): Promise<void> {
    this.#backoffs.clear();
    await this.#loop.stop(timeoutMs);
    await this.destination.close().catch((error: unknown) => this.#runtime?.onError(error, this.#detail({ phase: 'close' })));
  }

  stats(): RelayStats {
    return {
      outbox: this.outbox.label,
      destination: this.destination.description,
      isTransactional: this.#isTransactional,
      ...this.#counts,
      namesInWork: this.#loop.namesInWork,
      namesWaitingToRetry: this.#backoffs.waitingCount,
      waitingNames: this.#backoffs.waiting(MAX_WAITING_NAMES_REPORTED),
    };
  }

  async #names(limit: number): Promise<string[]> {
    const statement = bindStatement(this.#statements!.names, { leaseNow: new Date(), limit });
    const nameColumn = this.outbox.spec.group!.column;
    return (await this.#runtime!.driver.execute(statement)).rows.map((row) => String(row[nameColumn]));
  }

  /** One batch of one name: claim, send, mark; or after a failure, the backoff. Whether it took records. */
  async #relayName(name: string): Promise<boolean> {
    let batch = await this.#batches!.claim(name);
    this.#signals.claimed.emit(batch?.records.length ?? 0);
    if (batch === undefined) return false;
    let refused: RefusedRecord | undefined;
    try {
      // Opened first: a destination may know what it refuses only once connected (a server's size limit).
      await this.#link.open();
      refused = this.#refusedRecordOf(batch);
    } catch (error) {
      await this.#retryLater(batch, error);
      return true;
    }
    if (refused !== undefined && refused.index > 0) {
      // The records before it go now: the batch is handed back (due at once) and they are
      // claimed alone. The refused record then heads the name's next batch.
      await batch.lease.moveTo(new Date(Math.floor(Date.now() / 1000) * 1000));
      batch = await this.#batches!.claim(name, refused.index);
      if (batch === undefined) return true;
      refused = this.#refusedRecordOf(batch);
    }
    if (refused !== undefined) {
      await this.#retryLater(batch, refused.error);
      return true;
    }
    try {
      if (this.#isTransactional) await this.#sendWithin(batch);
      else await this.#sendThenFinish(batch);
    } catch (error) {
      await this.#retryLater(batch, error);
      return true;
    }
    this.#backoffs.succeeded(name);
    return true;
  }

  /** A destination elsewhere: send with the lease renewed meanwhile, then mark what it confirmed. */
  async #sendThenFinish(batch: Batch): Promise<void> {
    await this.#link.open();
    await batch.lease.renewWhile(() => this.destination.send(batch.records));
    const finished = await batch.lease.runUnderTokens(this.#statements!.finish, { now: new Date() });
    this.#confirmed(batch);
    if (finished < batch.records.length) this.#leaseLost(batch, 'marking the sent records processed');
  }

  /**
   * A destination on the outbox's database: the marks first (they lock the records and prove
   * the lease still holds), then the destination's writes, then one commit for both.
   */
  async #sendWithin(batch: Batch): Promise<void> {
    const { driver, dialect, publishManyWithin } = this.#runtime!;
    const session = { begin: this.#statements!.begin, commit: dialect.session.commit(), rollback: dialect.session.rollback() };
    await this.#link.open();
    const sent = await withTransaction<SentWithin>(
      driver,
      session,
      async ({ rollBack }, connection) => {
        const finish = bindStatement(this.#statements!.finish, { group: batch.name, held: batch.lease.token, now: new Date() });
        if ((await connection.execute(finish)).affectedRows !== batch.records.length) {
          await rollBack();
          this.#leaseLost(batch, 'opening the transaction that writes them');
          return 'leaseLost';
        }
        const transaction = new DeliveryTransaction(connection, batch.records[0]!.id);
        const lent: RelayTransaction = { publishMany: (queue, items) => publishManyWithin(queue, items, transaction) };
        try {
          await this.destination.sendWithin!(batch.records, lent);
        } catch (error) {
          transaction.rolledBack();
          throw error;
        }
        transaction.endLoan();
        return transaction;
      },
      // A service's transaction holds the shared session: look again after the backoff.
      dialect.capabilities.sharesSessionWithService ? { whenBeginRefused: () => 'notBegun' } : undefined,
    );
    if (sent === 'notBegun') return this.#retryLater(batch, undefined);
    if (sent === 'leaseLost') return;
    sent.committed();
    this.#confirmed(batch);
  }

  /**
   * The first record of the batch the destination could never take (one another process wrote,
   * or one written before this relay was declared): its place in the batch and the error that
   * names it.
   */
  #refusedRecordOf(batch: Batch): RefusedRecord | undefined {
    const { destination } = this;
    if (destination.refusalOf === undefined) return undefined;
    for (const [index, record] of batch.records.entries()) {
      const reason = destination.refusalOf(record);
      if (reason === undefined) continue;
      const error = new EncodeError(
        `relay of outbox "${this.outbox.label}" to ${destination.description}: record ${record.id} of "${batch.name}" can never be sent there: ${reason}. ` +
          `It holds back the later records of "${batch.name}" until it is deleted from the outbox table or its payload rewritten`,
      );
      return { index, error };
    }
    return undefined;
  }

  #confirmed(batch: Batch): void {
    this.#counts.sends += 1;
    this.#counts.relayed += batch.records.length;
    this.#signals.relayed.emit(batch.records.length);
  }

  #leaseLost(batch: Batch, when: string): void {
    this.#counts.leasesLost += 1;
    this.#runtime!.onWarning(
      `relay of outbox "${this.outbox.label}" to ${this.destination.description}: the lease on ${batch.records.length} records of "${batch.name}" was lost before ${when} (a send took longer than the lease, or the process paused); another claim has them and sends them again`,
    );
  }

  /**
   * The send failed (`error`), or could not begin (undefined: a service transaction held the
   * shared SQLite handle): the records keep their lease until the backoff ends (none of the name
   * goes before them, no replica takes them sooner), the destination is opened again before the
   * next send, and the loop wakes when the backoff ends.
   */
  async #retryLater(batch: Batch, error: unknown): Promise<void> {
    const { name } = batch;
    const { onError } = this.#runtime!;
    if (error !== undefined) {
      this.#counts.failedSends += 1;
      this.#link.failed();
    }
    const now = new Date();
    const retryAt = leaseExpiry(now, this.#backoffs.delayMs(name, error !== undefined));
    await batch.lease.moveTo(retryAt).catch((moveError: unknown) => onError(moveError, this.#detail({ name, phase: 'backoff' })));
    if (error !== undefined) {
      const retryInMs = retryAt.getTime() - now.getTime();
      onError(error, this.#detail({ name, records: batch.records.length, phase: 'send', retryInMs }));
    }
    if (!this.#loop.isStopping) this.#backoffs.wakeAt(name, retryAt, error);
  }

  #detail(extra: Record<string, unknown>): Record<string, unknown> {
    return { outbox: this.outbox.label, destination: this.destination.description, ...extra };
  }
}

/** For tests, and not exported from the package: the test signals of `relay`. */
export function testSignalsOfRelay(relay: Relay): RelaySignals {
  return signalsOfRelay(relay);
}
