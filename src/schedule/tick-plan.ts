import type { CronSchedule } from './cron.js';

/** What happens to ticks that passed while no replica fired them (see `ScheduleOptions.missed`). */
export type MissedPolicy = 'skip' | 'once' | 'all';

export interface TickPolicy {
  readonly missed: MissedPolicy;
  /** `skip`: the latest due tick still fires when it is at most this old. */
  readonly missedGraceMs: number;
  /** `all`: the most ticks one firing writes; older due ticks are counted missed. */
  readonly backfillLimit: number;
}

/**
 * Due ticks are counted one by one through croner (about 0.1 ms each), so a long gap in a
 * schedule of seconds is counted up to here and no further: `missed` is then a lower bound.
 * It keeps one firing's arithmetic under about 100 ms of the event loop.
 */
export const MAX_COUNTED_TICKS = 1_000;

/**
 * One firing's decision, from the last tick the schedules table holds and the host's now:
 * advance `last_tick_at` to `advanceTo`, writing one message for each of `fire` (oldest first)
 * and counting `missed` ticks that get none. Undefined: nothing is due.
 */
export interface TickPlan {
  readonly fire: readonly Date[];
  readonly missed: number;
  readonly advanceTo: Date;
}

/**
 * The ticks due at `now` after `lastTick` (exclusive) and what the policy does with them. A
 * schedule whose row holds no tick yet (null) starts from the latest tick at or before now,
 * without firing it: that is what registering writes, so a new schedule never fires its past.
 */
export function planTicks(cron: CronSchedule, lastTick: Date | null, now: Date, policy: TickPolicy): TickPlan | undefined {
  const latest = cron.latestAtOrBefore(now);
  if (latest === null) return undefined;
  if (lastTick === null) return { fire: [], missed: 0, advanceTo: latest };
  if (latest.getTime() <= lastTick.getTime()) return undefined;
  const due = countDueTicks(cron, lastTick, latest);
  switch (policy.missed) {
    case 'skip':
      return now.getTime() - latest.getTime() <= policy.missedGraceMs
        ? { fire: [latest], missed: due - 1, advanceTo: latest }
        : { fire: [], missed: due, advanceTo: latest };
    case 'once':
      return { fire: [latest], missed: due - 1, advanceTo: latest };
    case 'all': {
      const newest = cron
        .latestAtOrBeforeMany(latest, Math.min(policy.backfillLimit, due))
        .filter((tick) => tick.getTime() > lastTick.getTime())
        .reverse();
      return { fire: newest, missed: due - newest.length, advanceTo: latest };
    }
  }
}

/** Ticks after `lastTick` up to and including `latest`, counted up to MAX_COUNTED_TICKS. */
function countDueTicks(cron: CronSchedule, lastTick: Date, latest: Date): number {
  let count = 0;
  let tick: Date | null = lastTick;
  while (count < MAX_COUNTED_TICKS) {
    tick = cron.nextAfter(tick);
    if (tick === null || tick.getTime() > latest.getTime()) break;
    count += 1;
  }
  return Math.max(count, 1);
}

/**
 * When this schedule next has a tick to fire: the first tick after both the table's last tick
 * and now (a replica whose clock runs ahead may have fired a tick this host still sees coming).
 */
export function nextTickAfter(cron: CronSchedule, lastTick: Date | null, now: Date): Date | null {
  const from = lastTick !== null && lastTick.getTime() > now.getTime() ? lastTick : now;
  return cron.nextAfter(from);
}
