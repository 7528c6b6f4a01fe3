import { describe, expect, it } from 'vitest';
import type { PoolStats } from '../driver/driver.js';
import { PoolBudget, type BudgetMember } from './pool-budget.js';

function poolOf(size: number, reservedForRenewals = 0): () => PoolStats {
  return () => ({ size, held: 0, idle: size, spare: size, maxHeld: 0, reservedForRenewals });
}

/** A member that takes a connection whenever the budget lets it and it still wants one. */
class Member implements BudgetMember {
  connectionsHeld = 0;
  wants: number;
  readonly #budget: PoolBudget;

  constructor(budget: PoolBudget, wants: number) {
    this.#budget = budget;
    this.wants = wants;
    budget.join(this);
  }

  pump(): void {
    while (this.connectionsHeld < this.wants && this.#budget.mayTake(this)) this.connectionsHeld += 1;
    if (this.connectionsHeld >= this.wants) this.#budget.withdraw(this);
  }

  giveBack(): void {
    this.connectionsHeld -= 1;
    this.#budget.released();
  }
}

describe('PoolBudget', () => {
  it('WP-4: two subscriptions of four workers on a pool of four hold three connections together', () => {
    const budget = new PoolBudget(poolOf(4));
    const first = new Member(budget, 4);
    const second = new Member(budget, 4);
    first.pump();
    second.pump();
    expect(first.connectionsHeld + second.connectionsHeld).toBe(3);
    expect(budget.limit).toBe(3);
  });

  it('WP-4: a connection that comes back goes to the subscription that waited, not to the one that gave it back', () => {
    const budget = new PoolBudget(poolOf(4));
    const first = new Member(budget, 4);
    first.pump();
    const second = new Member(budget, 4);
    second.pump();
    expect([first.connectionsHeld, second.connectionsHeld]).toEqual([3, 0]);
    first.giveBack();
    first.pump();
    expect([first.connectionsHeld, second.connectionsHeld]).toEqual([2, 1]);
  });

  it('WP-4: a subscription that holds the pool sees another waiting, so it keeps no connection for a claim of its own', () => {
    const budget = new PoolBudget(poolOf(4));
    const first = new Member(budget, 3);
    first.pump();
    expect(budget.hasOthersWaiting(first)).toBe(false);
    const second = new Member(budget, 2);
    second.pump();
    expect(second.connectionsHeld).toBe(0);
    expect(budget.hasOthersWaiting(first)).toBe(true);
    expect(budget.hasOthersWaiting(second)).toBe(false);
    second.wants = 0;
    second.pump();
    expect(budget.hasOthersWaiting(first)).toBe(false);
  });

  it('WP-2: the connection kept for lease renewals is not the claims\' to take', () => {
    expect(new PoolBudget(poolOf(4, 1)).limit).toBe(2);
    expect(new PoolBudget(poolOf(1)).limit).toBe(1);
  });

  it('a member that leaves hands its place in line to the next', () => {
    const budget = new PoolBudget(poolOf(3));
    const first = new Member(budget, 2);
    first.pump();
    const second = new Member(budget, 1);
    const third = new Member(budget, 1);
    second.pump();
    third.pump();
    budget.leave(second);
    first.giveBack();
    expect(third.connectionsHeld).toBe(1);
  });
});
