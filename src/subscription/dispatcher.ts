import type { HeldRow } from '../claim/claim-form.js';

/** What one worker takes at a time: one row, or the rows of one batch claim. */
export type DeliveryUnit = readonly HeldRow[];

/** Runs a unit on a worker; `slot` names the worker (or lane, or thread) that runs it. */
export type RunUnit = (unit: DeliveryUnit, slot: number) => Promise<void>;

/**
 * Hands claimed units to workers. A unit starts at once when its worker is free and waits
 * otherwise; `capacity` minus the units in work and waiting is how many more the claim loop may
 * take (WP-1).
 */
export interface Dispatcher {
  readonly capacity: number;
  readonly inWork: number;
  readonly waiting: number;
  /** Starts the unit or queues it; `onIdle` is called whenever a worker frees up. */
  offer(unit: DeliveryUnit): void;
  /** Removes and returns every unit still waiting (on stop, to hand their rows back). */
  takeWaiting(): DeliveryUnit[];
  /** Resolves when no unit is in work. */
  drain(): Promise<void>;
}
