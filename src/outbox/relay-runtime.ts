import type { Queue } from '../definition/define-table.js';
import type { DeliveryTransaction } from '../delivery/delivery-transaction.js';
import type { Dialect } from '../dialect/dialect.js';
import type { Driver } from '../driver/driver.js';
import { TestSignal } from '../internal/test-signal.js';
import type { PublishItem } from '../publish/publish-options.js';
import type { RelayWaitingName } from './name-backoffs.js';

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

/** What a relay counted since it started. */
export interface RelayCounts {
  /** Records the destination confirmed and the relay marked processed (or deleted). */
  relayed: number;
  /** Sends (batches of one name) confirmed. */
  sends: number;
  /** Sends that failed; their records wait a backoff and go again. */
  failedSends: number;
  /** Claims of a name's records, and those that found none (another replica took the name first). */
  claims: number;
  emptyClaims: number;
  /** Batches whose lease another claim took while they were out (a send past its renewals, a process paused). */
  leasesLost: number;
}

export interface RelayStats extends Readonly<RelayCounts> {
  /** The outbox table. */
  readonly outbox: string;
  /** The destination's description. */
  readonly destination: string;
  /** Sends write inside the relay's transaction (a queue on the outbox's database): exactly once. */
  readonly isTransactional: boolean;
  readonly namesInWork: number;
  /** Names that failed and wait their backoff before the next send. */
  readonly namesWaitingToRetry: number;
  /**
   * Up to 10 of those names, the soonest to go again first: how many sends of each failed in a
   * row, when it goes again and the last error. A name listed here again and again, its failed
   * sends growing, is stuck (a record the destination refuses, say).
   */
  readonly waitingNames: readonly RelayWaitingName[];
}

/** What a relay tells a test that turned a signal on (internal/test-signal.ts); nothing otherwise. */
export class RelaySignals {
  /** A batch's records were marked processed after the destination confirmed them (counted in `relayed`): how many. */
  readonly relayed = new TestSignal<number>();
  /** A claim of a name ended: how many records it took (0 when another claim held the name, or its first record was locked). */
  readonly claimed = new TestSignal<number>();
}
