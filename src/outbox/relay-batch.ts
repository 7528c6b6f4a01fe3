import { fifoGuardRowsFor } from '../dialect/fifo-guard-statements.js';
import { leaseExpiry } from '../claim/lease-book.js';
import { LeaseClaimer } from '../claim/lease-claimer.js';
import { SharedLease } from '../claim/shared-lease.js';
import { decodeHeaders } from '../delivery/codec.js';
import type { Dialect } from '../dialect/dialect.js';
import type { OutboxStatements } from '../dialect/outbox-statements.js';
import type { Driver } from '../driver/driver.js';
import type { Statement } from '../statement.js';
import type { TableSpec } from '../table/table-spec.js';
import { OUTBOX_RECORD_ID_HEADER, type OutboxRecord } from './destination.js';
import type { RelayCounts } from './relay-runtime.js';

/** One claimed batch: a name's first records, all under one lease token. */
export interface RelayBatch {
  readonly name: string;
  /** In id order, each with its record id header. */
  readonly records: OutboxRecord[];
  readonly lease: SharedLease;
}

export interface RelayBatchClaimerOptions {
  readonly driver: Driver;
  readonly dialect: Dialect;
  readonly spec: TableSpec;
  readonly statements: OutboxStatements;
  readonly leaseMs: number;
  /** The most records one claim takes. */
  readonly batchSize: number;
  /** Counts claims and empty claims. */
  readonly counts: RelayCounts;
  /** A renewal found records of the batch taken by another claim. */
  readonly onLost: (batch: RelayBatch) => void;
  readonly onRenewalError: (error: unknown, name: string) => void;
}

/** Claims a name's first records under one lease, through the claim layer's claimer. */
export class RelayBatchClaimer {
  readonly #options: RelayBatchClaimerOptions;
  readonly #claimer: LeaseClaimer;

  constructor(options: RelayBatchClaimerOptions) {
    const { dialect, statements } = options;
    this.#options = options;
    this.#claimer = new LeaseClaimer({
      claim: statements.claim,
      commit: dialect.session.commit(),
      rollback: dialect.session.rollback(),
      idColumn: options.spec.id.column,
      // A record claimed inside a service's transaction could be sent and then rolled back.
      ownTransaction: dialect.capabilities.sharesSessionWithService ? statements.begin : undefined,
      // The batch is the name's first records, with no gap.
      stopsAtFirstTaken: true,
      // A name met for the first time has no guard row yet: the claim adds it.
      addGuardRow: fifoGuardRowsFor(dialect.name)?.addRow(options.spec),
    });
  }

  /** The claim's statements, for the start-up prepare check. */
  get statements(): Statement[] {
    return this.#claimer.statements;
  }

  /**
   * The batch of at most `limit` records (default the batch size); undefined when another claim
   * holds the name, or the claim could not begin.
   */
  async claim(name: string, limit = this.#options.batchSize): Promise<RelayBatch | undefined> {
    const { driver, spec, counts, leaseMs } = this.#options;
    const now = new Date();
    const token = leaseExpiry(now, leaseMs);
    const rows = await this.#claimer.claim(driver, { group: name, leaseNow: now, limit, lockedUntil: token });
    if (rows === undefined) return undefined;
    counts.claims += 1;
    if (rows.length === 0) {
      counts.emptyClaims += 1;
      return undefined;
    }
    const records = rows.map((row) => recordOf(spec, row)).sort(byRecordId);
    const lease = new SharedLease({
      driver,
      extend: this.#options.statements.extend,
      values: { group: name },
      rowCount: records.length,
      token,
      leaseMs,
      onLost: () => this.#options.onLost(batch),
      onError: (error) => this.#options.onRenewalError(error, name),
    });
    const batch: RelayBatch = { name, records, lease };
    return batch;
  }
}

function recordOf(spec: TableSpec, row: Record<string, unknown>): OutboxRecord {
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

/** Record order is id order; generated ids are integers, compared as such whatever their length. */
function byRecordId(left: OutboxRecord, right: OutboxRecord): number {
  const a = BigInt(left.id);
  const b = BigInt(right.id);
  return a < b ? -1 : a > b ? 1 : 0;
}
