import type { Driver } from '../driver/driver.js';
import { bindStatement, type BoundStatement, type ParamValues, type Statement } from '../statement.js';
import { leaseExpiry, LeaseTokens } from './lease-book.js';

export interface SharedLeaseOptions {
  readonly driver: Driver;
  /** Moves the lease of every row that carries `held` to `lockedUntil`, and of those rows only. */
  readonly extend: Statement;
  /** What else names the rows in `extend` (the relay: the record name as `group`). */
  readonly values: ParamValues;
  /** The rows the claim took: a renewal that moves fewer lost the others. */
  readonly rowCount: number;
  /** The expiry the claim wrote on every row. */
  readonly token: Date;
  readonly leaseMs: number;
  /** A renewal moved fewer rows than the claim took: another claim has them. */
  readonly onLost: () => void;
  /** A renewal failed; its outcome is unknown, so both tokens are kept. */
  readonly onError: (error: unknown) => void;
}

/**
 * Rows one claim took under one lease token (the relay's batch of a name), whose lease moves as
 * one: renewed every half lease while work on them runs, or moved to the end of a backoff.
 */
export class SharedLease extends LeaseTokens {
  readonly #options: SharedLeaseOptions;

  constructor(options: SharedLeaseOptions) {
    super(options.token);
    this.#options = options;
  }

  /** Runs `work` with the lease renewed every half lease, and waits for a renewal in flight when it ends. */
  async renewWhile<T>(work: () => Promise<T>): Promise<T> {
    let inFlight: Promise<void> | undefined;
    const timer = setInterval(() => {
      inFlight ??= this.#renew().finally(() => (inFlight = undefined));
    }, this.#options.leaseMs / 2);
    try {
      return await work();
    } finally {
      clearInterval(timer);
      await inFlight;
    }
  }

  /** Moves the lease of the rows still under the token to `lockedUntil` (the end of a backoff). */
  async moveTo(lockedUntil: Date): Promise<void> {
    await this.#options.driver.execute(this.#extend(lockedUntil));
  }

  /**
   * Runs `statement` (params `held`, the lease's values and `values`) on the rows under the token,
   * then under the uncertain one while rows remain (the relay's marks): the rows it changed.
   */
  async runUnderTokens(statement: Statement, values: ParamValues): Promise<number> {
    let changed = 0;
    for (const held of this.candidateTokens()) {
      const bound = bindStatement(statement, { ...this.#options.values, ...values, held });
      changed += (await this.#options.driver.execute(bound)).affectedRows;
      if (changed >= this.#options.rowCount) break;
    }
    return changed;
  }

  async #renew(): Promise<void> {
    const next = leaseExpiry(new Date(), this.#options.leaseMs);
    try {
      const renewed = (await this.#options.driver.execute(this.#extend(next))).affectedRows;
      if (renewed > 0) this.token = next;
      if (renewed < this.#options.rowCount) this.#options.onLost();
    } catch (error) {
      this.uncertainToken = next;
      this.#options.onError(error);
    }
  }

  #extend(lockedUntil: Date): BoundStatement {
    return bindStatement(this.#options.extend, { ...this.#options.values, held: this.token, lockedUntil });
  }
}
