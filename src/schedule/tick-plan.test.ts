import { describe, expect, it } from 'vitest';
import { parseCron } from './cron.js';
import { MAX_COUNTED_TICKS, nextTickAfter, planTicks, type TickPolicy } from './tick-plan.js';

const everyMinute = parseCron('* * * * *', 'UTC', 'test');
const at = (iso: string) => new Date(iso);
const policy = (missed: TickPolicy['missed'], extra: Partial<TickPolicy> = {}): TickPolicy => ({
  missed,
  missedGraceMs: 60_000,
  backfillLimit: 100,
  ...extra,
});
const isoPlan = (plan: ReturnType<typeof planTicks>) =>
  plan && { fire: plan.fire.map((tick) => tick.toISOString()), missed: plan.missed, advanceTo: plan.advanceTo.toISOString() };

describe('planTicks', () => {
  it('finds nothing due before the next tick, and fires a tick on time', () => {
    const last = at('2026-01-01T10:00:00Z');
    expect(planTicks(everyMinute, last, at('2026-01-01T10:00:59.999Z'), policy('skip'))).toBeUndefined();
    expect(isoPlan(planTicks(everyMinute, last, at('2026-01-01T10:01:00.250Z'), policy('skip')))).toEqual({
      fire: ['2026-01-01T10:01:00.000Z'],
      missed: 0,
      advanceTo: '2026-01-01T10:01:00.000Z',
    });
  });

  it('starts a row without a tick at the latest one, firing nothing', () => {
    expect(isoPlan(planTicks(everyMinute, null, at('2026-01-01T10:05:30Z'), policy('all')))).toEqual({
      fire: [],
      missed: 0,
      advanceTo: '2026-01-01T10:05:00.000Z',
    });
  });

  it("'skip' fires the latest missed tick within the grace and counts the others missed", () => {
    const last = at('2026-01-01T10:00:00Z');
    expect(isoPlan(planTicks(everyMinute, last, at('2026-01-01T10:05:30Z'), policy('skip')))).toEqual({
      fire: ['2026-01-01T10:05:00.000Z'],
      missed: 4,
      advanceTo: '2026-01-01T10:05:00.000Z',
    });
  });

  it("'skip' passes over a latest tick older than the grace, counting every due tick missed", () => {
    const last = at('2026-01-01T10:00:00Z');
    expect(isoPlan(planTicks(everyMinute, last, at('2026-01-01T10:05:30Z'), policy('skip', { missedGraceMs: 20_000 })))).toEqual({
      fire: [],
      missed: 5,
      advanceTo: '2026-01-01T10:05:00.000Z',
    });
  });

  it("'once' fires the latest whatever its age", () => {
    const hourly = parseCron('@hourly', 'UTC', 'test');
    expect(isoPlan(planTicks(hourly, at('2026-01-01T00:00:00Z'), at('2026-01-01T05:59:00Z'), policy('once')))).toEqual({
      fire: ['2026-01-01T05:00:00.000Z'],
      missed: 4,
      advanceTo: '2026-01-01T05:00:00.000Z',
    });
  });

  it("'all' fires each missed tick oldest first, the newest backfillLimit of them", () => {
    const last = at('2026-01-01T10:00:00Z');
    const now = at('2026-01-01T10:05:30Z');
    expect(isoPlan(planTicks(everyMinute, last, now, policy('all')))?.fire).toEqual([
      '2026-01-01T10:01:00.000Z',
      '2026-01-01T10:02:00.000Z',
      '2026-01-01T10:03:00.000Z',
      '2026-01-01T10:04:00.000Z',
      '2026-01-01T10:05:00.000Z',
    ]);
    expect(isoPlan(planTicks(everyMinute, last, now, policy('all', { backfillLimit: 2 })))).toEqual({
      fire: ['2026-01-01T10:04:00.000Z', '2026-01-01T10:05:00.000Z'],
      missed: 3,
      advanceTo: '2026-01-01T10:05:00.000Z',
    });
  });

  it('counts a long gap up to MAX_COUNTED_TICKS', () => {
    const everySecond = parseCron('* * * * * *', 'UTC', 'test');
    const plan = planTicks(everySecond, at('2026-01-01T00:00:00Z'), at('2026-01-02T00:00:00Z'), policy('skip'));
    expect(plan?.missed).toBe(MAX_COUNTED_TICKS - 1);
    expect(plan?.advanceTo.toISOString()).toBe('2026-01-02T00:00:00.000Z');
  });
});

describe('nextTickAfter', () => {
  it('is the first tick after now, or after the last tick when a replica ahead fired it', () => {
    expect(nextTickAfter(everyMinute, at('2026-01-01T10:00:00Z'), at('2026-01-01T10:00:30Z'))?.toISOString()).toBe('2026-01-01T10:01:00.000Z');
    expect(nextTickAfter(everyMinute, at('2026-01-01T10:01:00Z'), at('2026-01-01T10:00:59Z'))?.toISOString()).toBe('2026-01-01T10:02:00.000Z');
    expect(nextTickAfter(everyMinute, null, at('2026-01-01T10:00:30Z'))?.toISOString()).toBe('2026-01-01T10:01:00.000Z');
  });
});
