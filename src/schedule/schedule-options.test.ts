import { describe, expect, it } from 'vitest';
import { defineTable } from '../definition/define-table.js';
import { DeclarationError } from '../errors.js';
import { DEFAULT_MISSED_GRACE_MS, resolveScheduleDeclaration, SCHEDULED_AT_HEADER, type ScheduleOptions } from './schedule-options.js';

const withHeaders = defineTable({ table: 'jobs', id: 'id', group: 'queue', retryAfter: 'retry_after', headers: 'headers', payload: 'payload' });
const withoutHeaders = defineTable({ table: 'plain_jobs', id: 'id', group: 'queue', payload: 'payload' });
const queue = withHeaders.queue('reports');
const context = { maxPayloadBytes: 1024 };
const declare = (options: ScheduleOptions, name: unknown = 'nightly') =>
  resolveScheduleDeclaration(name, queue, options, context);

describe('schedule declarations', () => {
  it('take the defaults: UTC, payload null, missed skip, a minute of grace, no jitter', () => {
    const declaration = declare({ cron: '0 3 * * *' });
    expect(declaration).toMatchObject({
      name: 'nightly',
      payload: null,
      headers: {},
      missed: 'skip',
      missedGraceMs: DEFAULT_MISSED_GRACE_MS,
      backfillLimit: 100,
      jitterMs: 0,
    });
    expect(declaration.cron.timeZone).toBe('UTC');
    expect(declaration.cron.expression).toBe('0 3 * * *');
  });

  it('refuse names that are not plain, or longer than 200 characters', () => {
    expect(() => declare({ cron: '@daily' }, 'nightly report')).toThrow(/schedule: the name must be 1 to 200 letters, digits, .* got "nightly report"/);
    expect(() => declare({ cron: '@daily' }, '')).toThrow(DeclarationError);
    expect(() => declare({ cron: '@daily' }, 'n'.repeat(201))).toThrow(DeclarationError);
    expect(declare({ cron: '@daily' }, 'billing:invoices.daily-run_2').name).toBe('billing:invoices.daily-run_2');
  });

  it("point at the cron field with croner's reason, and at the timezone", () => {
    expect(() => declare({ cron: '0 25 * * *' })).toThrow(`schedule "nightly": cron '0 25 * * *' is not a valid cron expression: CronPattern: Invalid value for hour: 25`);
    expect(() => declare({ cron: '@daily', timezone: 'Europe/Atlantis' })).toThrow(`schedule "nightly": timezone 'Europe/Atlantis' is not an IANA time zone`);
  });

  it('refuse unknown options, policies and numbers out of range', () => {
    expect(() => declare({ cron: '@daily', every: 5 } as ScheduleOptions)).toThrow('unknown option "every"');
    expect(() => declare({ cron: '@daily', missed: 'later' as 'skip' })).toThrow(`missed must be 'skip', 'once' or 'all', got "later"`);
    expect(() => declare({ cron: '@daily', jitterMs: -1 })).toThrow('jitterMs must be a number of milliseconds from 0');
    expect(() => declare({ cron: '@daily', backfillLimit: 0 })).toThrow('backfillLimit must be a whole number from 1 to 10000');
    expect(() => declare({ cron: '@daily', jitterMs: 60_000 })).toThrow('missedGraceMs (60000) must be above jitterMs (60000)');
  });

  it('check the payload and headers as publish does, and keep the tick header for itself', () => {
    expect(() => declare({ cron: '@daily', payload: { ratio: Number.NaN } })).toThrow(/schedule "nightly": the payload would not come back as it was sent/);
    expect(() => declare({ cron: '@daily', payload: 'x'.repeat(2000) })).toThrow(/over the limit of 1024 \(broker option maxPayloadBytes\)$/);
    expect(() => declare({ cron: '@daily', headers: { tenant: 7 as unknown as string } })).toThrow('header "tenant" must be a string, got number');
    expect(() => declare({ cron: '@daily', headers: { [SCHEDULED_AT_HEADER]: 'x' } })).toThrow(`the ${SCHEDULED_AT_HEADER} header is each tick's own time`);
  });

  it("refuse a queue whose table has no headers column, saying why", () => {
    expect(() => resolveScheduleDeclaration('nightly', withoutHeaders.queue('reports'), { cron: '@daily' }, context)).toThrow(
      `schedule "nightly": table "plain_jobs" has no headers column, and each tick's message carries its time in the ${SCHEDULED_AT_HEADER} header; declare headers in defineTable`,
    );
  });
});
