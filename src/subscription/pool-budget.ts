import type { PoolStats } from '../driver/driver.js';

/** A subscription's claim loop as the budget sees it. */
export interface BudgetMember {
  /** Connections it holds now: claims running plus deliveries that hold one (WP-5). */
  readonly connectionsHeld: number;
  /** Asked to start the claims it can, after connections came back. */
  pump(): void;
}

/**
 * The connections that claims and deliveries may hold on one pool, shared by every subscription
 * of every broker on it (WP-2, WP-4): together they hold at most the pool's size minus one, minus
 * the connection kept for lease renewals, so the last connection always serves handlers' own
 * queries, publishes and settlements. A budget per subscription let two subscriptions of 4 workers
 * on a pool of 4 hold all four connections between them, and every handler's own query then
 * waited forever.
 *
 * Members that found the budget used up wait in line, the one holding fewest connections first,
 * and a connection that comes back goes to the first of them before its own subscription may take
 * it again, so a subscription whose rows arrive after another filled the pool still gets its turn.
 */
export class PoolBudget {
  readonly #poolStats: () => PoolStats;
  readonly #members = new Set<BudgetMember>();
  readonly #waiting: BudgetMember[] = [];

  constructor(poolStats: () => PoolStats) {
    this.#poolStats = poolStats;
  }

  /** The most connections claims and deliveries may hold together; at least one. */
  get limit(): number {
    const stats = this.#poolStats();
    return Math.max(stats.size - 1 - stats.reservedForRenewals, 1);
  }

  /** Connections the members hold together. */
  get held(): number {
    let held = 0;
    for (const member of this.#members) held += member.connectionsHeld;
    return held;
  }

  join(member: BudgetMember): void {
    this.#members.add(member);
  }

  /** The member stops claiming: it no longer waits, and what it frees goes to the others. */
  leave(member: BudgetMember): void {
    this.#members.delete(member);
    this.withdraw(member);
    this.released();
  }

  /**
   * Whether `member` may take one more connection now. When it may not, it waits in line, and
   * `pump()` is called on it when connections come back.
   */
  mayTake(member: BudgetMember): boolean {
    const free = this.limit - this.held;
    // Nobody in line, as on every claim of a pool with room: no line to order.
    if (this.#waiting.length === 0) {
      if (free > 0) return true;
      this.#waiting.push(member);
      return false;
    }
    const place = this.#waiting.indexOf(member);
    const ahead = this.#waiting.filter((other, index) => other !== member && this.#isBefore(other, index, member, place)).length;
    if (free > ahead) {
      if (place !== -1) this.#waiting.splice(place, 1);
      return true;
    }
    if (place === -1) this.#waiting.push(member);
    return false;
  }

  /**
   * Whether another member waits in line: then a connection `member` would keep for a claim of
   * its own (a claim chained after a settlement) must come back to the pool for them instead.
   */
  hasOthersWaiting(member: BudgetMember): boolean {
    return this.#waiting.some((other) => other !== member);
  }

  /** The member wants no connection now (no idle worker, stopping): it leaves the line. */
  withdraw(member: BudgetMember): void {
    const place = this.#waiting.indexOf(member);
    if (place !== -1) this.#waiting.splice(place, 1);
  }

  /** A member's connections came back: the members in line take them, the one holding fewest first. */
  released(): void {
    // Called at the end of every delivery and claim: nothing to do unless someone waits.
    if (this.#waiting.length === 0) return;
    const line = this.#waiting
      .map((member, index) => ({ member, index, held: member.connectionsHeld }))
      .sort((a, b) => a.held - b.held || a.index - b.index);
    for (const { member } of line) {
      if (this.limit - this.held <= 0) return;
      member.pump();
    }
  }

  /**
   * The line's order: fewest connections held first, then arrival. A subscription that holds many
   * and wants more stands behind one that holds none, so it cannot take back every connection it
   * gives up while the other waits.
   */
  #isBefore(other: BudgetMember, otherPlace: number, member: BudgetMember, place: number): boolean {
    const otherHeld = other.connectionsHeld;
    const held = member.connectionsHeld;
    if (otherHeld !== held) return otherHeld < held;
    return place === -1 || otherPlace < place;
  }
}

const budgets = new WeakMap<object, PoolBudget>();

/** The budget of one pool, shared by every broker whose driver names the same pool identity. */
export function poolBudgetFor(poolIdentity: object, poolStats: () => PoolStats): PoolBudget {
  let budget = budgets.get(poolIdentity);
  if (budget === undefined) {
    budget = new PoolBudget(poolStats);
    budgets.set(poolIdentity, budget);
  }
  return budget;
}
