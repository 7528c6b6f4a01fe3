import { afterEach, describe, expect, it } from 'vitest';
import { DeclarationError } from '../errors.js';
import { checkTimeZone, parseCron } from './cron.js';

const where = 'schedule "test"';
const at = (iso: string) => new Date(iso);
const iso = (date: Date | null) => date?.toISOString() ?? null;

/** Ticks after `from` up to `to`, through nextAfter, as ISO text. */
function ticksBetween(expression: string, timeZone: string, from: string, to: string): string[] {
  const cron = parseCron(expression, timeZone, where);
  const ticks: string[] = [];
  for (let tick = cron.nextAfter(at(from)); tick !== null && tick < at(to); tick = cron.nextAfter(tick)) ticks.push(tick.toISOString());
  return ticks;
}

describe('cron expressions', () => {
  it('read five fields, six with seconds, names and aliases', () => {
    const from = at('2026-01-01T00:00:00.000Z');
    expect(iso(parseCron('*/15 * * * *', 'UTC', where).nextAfter(from))).toBe('2026-01-01T00:15:00.000Z');
    expect(iso(parseCron('30 * * * * *', 'UTC', where).nextAfter(from))).toBe('2026-01-01T00:00:30.000Z');
    expect(iso(parseCron('0 9 * * MON-FRI', 'UTC', where).nextAfter(from))).toBe('2026-01-01T09:00:00.000Z');
    expect(iso(parseCron('0 0 1 JAN *', 'UTC', where).nextAfter(from))).toBe('2027-01-01T00:00:00.000Z');
    expect(iso(parseCron('@hourly', 'UTC', where).nextAfter(from))).toBe('2026-01-01T01:00:00.000Z');
    expect(iso(parseCron('@daily', 'UTC', where).nextAfter(from))).toBe('2026-01-02T00:00:00.000Z');
    expect(iso(parseCron('@weekly', 'UTC', where).nextAfter(from))).toBe('2026-01-04T00:00:00.000Z');
  });

  it('count a tick at the instant itself as at or before it, and the next strictly after', () => {
    const cron = parseCron('*/15 * * * *', 'UTC', where);
    expect(iso(cron.latestAtOrBefore(at('2026-01-01T00:15:00.000Z')))).toBe('2026-01-01T00:15:00.000Z');
    expect(iso(cron.latestAtOrBefore(at('2026-01-01T00:14:59.999Z')))).toBe('2026-01-01T00:00:00.000Z');
    expect(iso(cron.nextAfter(at('2026-01-01T00:15:00.000Z')))).toBe('2026-01-01T00:30:00.000Z');
    expect(cron.latestAtOrBeforeMany(at('2026-01-01T00:30:00.000Z'), 3).map(iso)).toEqual([
      '2026-01-01T00:30:00.000Z',
      '2026-01-01T00:15:00.000Z',
      '2026-01-01T00:00:00.000Z',
    ]);
  });

  it('refuse what is not a recurring schedule, with croner\'s reason and the cron field named', () => {
    expect(() => parseCron('@reboot', 'UTC', where)).toThrow(`${where}: cron '@reboot' runs at start-up, not on a schedule`);
    expect(() => parseCron('2030-01-01T00:00:00', 'UTC', where)).toThrow('is a date, not a cron expression');
    expect(() => parseCron('0 0 0 * * * 2030', 'UTC', where)).toThrow(/cron '0 0 0 \* \* \* 2030' is not a valid cron expression: .*5 or 6 parts/);
    expect(() => parseCron('61 * * * *', 'UTC', where)).toThrow(`${where}: cron '61 * * * *' is not a valid cron expression: CronPattern: Invalid value for minute: 61`);
    expect(() => parseCron('* * * *', 'UTC', where)).toThrow(DeclarationError);
    expect(() => parseCron('', 'UTC', where)).toThrow("cron must be a cron expression such as '*/5 * * * *', got \"\"");
    expect(() => parseCron(5, 'UTC', where)).toThrow('got number');
    expect(() => parseCron('0 0 30 2 *', 'UTC', where)).toThrow('never fires');
  });

  it('check time zones with Intl', () => {
    expect(checkTimeZone('Europe/Berlin', where)).toBe('Europe/Berlin');
    expect(() => checkTimeZone('Mars/Olympus', where)).toThrow(`${where}: timezone 'Mars/Olympus' is not an IANA time zone this host knows`);
    expect(() => checkTimeZone('', where)).toThrow(DeclarationError);
  });
});

describe('daylight-saving days in America/New_York, whatever the host zone', () => {
  const hostZone = process.env['TZ'];
  afterEach(() => {
    if (hostZone === undefined) delete process.env['TZ'];
    else process.env['TZ'] = hostZone;
  });

  for (const host of ['UTC', 'Asia/Kolkata', 'America/New_York']) {
    it(`a daily 02:30 fires once on the spring-forward day, at the first instant after the gap (host ${host})`, () => {
      process.env['TZ'] = host;
      // 2026-03-08: 02:00 EST becomes 03:00 EDT, so 02:30 does not exist that day.
      expect(ticksBetween('30 2 * * *', 'America/New_York', '2026-03-07T00:00:00Z', '2026-03-10T00:00:00Z')).toEqual([
        '2026-03-07T07:30:00.000Z',
        '2026-03-08T07:00:00.000Z',
        '2026-03-09T06:30:00.000Z',
      ]);
    });

    it(`a daily 01:30 fires once on the fall-back day, at its first occurrence (host ${host})`, () => {
      process.env['TZ'] = host;
      // 2026-11-01: 02:00 EDT becomes 01:00 EST, so 01:30 happens twice: 05:30Z and 06:30Z.
      expect(ticksBetween('30 1 * * *', 'America/New_York', '2026-10-31T00:00:00Z', '2026-11-03T00:00:00Z')).toEqual([
        '2026-10-31T05:30:00.000Z',
        '2026-11-01T05:30:00.000Z',
        '2026-11-02T06:30:00.000Z',
      ]);
      expect(ticksBetween('30 2 * * *', 'America/New_York', '2026-10-31T12:00:00Z', '2026-11-02T12:00:00Z')).toEqual([
        '2026-11-01T07:30:00.000Z',
        '2026-11-02T07:30:00.000Z',
      ]);
    });
  }

  it('an every-30-minutes schedule ticks at each instant of the repeated hour and none of the skipped one', () => {
    expect(ticksBetween('*/30 * * * *', 'America/New_York', '2026-11-01T04:59:00Z', '2026-11-01T07:01:00Z')).toEqual([
      '2026-11-01T05:00:00.000Z',
      '2026-11-01T05:30:00.000Z',
      '2026-11-01T06:00:00.000Z',
      '2026-11-01T06:30:00.000Z',
      '2026-11-01T07:00:00.000Z',
    ]);
    expect(ticksBetween('*/30 * * * *', 'America/New_York', '2026-03-08T06:59:00Z', '2026-03-08T08:01:00Z')).toEqual([
      '2026-03-08T07:00:00.000Z',
      '2026-03-08T07:30:00.000Z',
      '2026-03-08T08:00:00.000Z',
    ]);
  });
});
