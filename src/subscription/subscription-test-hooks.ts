import { LeaseKeeperSignals } from '../claim/lease-keeper.js';
import { systemClock, type Clock } from '../internal/clock.js';
import type { ObservableSignal } from '../internal/test-signal.js';
import { ClaimLoopSignals } from './claim-loop.js';
import { DeliveryRunnerSignals } from './delivery-runner.js';

/**
 * What a test reaches inside one subscription (through `testHooksOf` in broker/broker.ts, which
 * the package does not export): the signals its claim loop, delivery runner and lease keeper
 * emit, each off until the test turns it on, and the clock its leases read. A test sets the
 * clock before `start()`.
 */
export class SubscriptionTestHooks {
  readonly loop = new ClaimLoopSignals();
  readonly runner = new DeliveryRunnerSignals();
  /** Emitted by the lease form's keeper only. */
  readonly keeper = new LeaseKeeperSignals();
  /**
   * The claims' "now" (which rows are due, which leases ran out, the tokens a lease claim writes)
   * and the lease renewals' timer and tokens. The times settlements and publishes write (a
   * retry's due time, a delayed publish's) stay the host's.
   */
  clock: Clock = systemClock;

  /** Every signal, for a wait on state that changes only where one of them is emitted (`untilSignalled`). */
  all(): readonly ObservableSignal[] {
    return [...Object.values(this.loop), ...Object.values(this.runner), ...Object.values(this.keeper)];
  }
}
