import { Cron } from 'croner';
import { DeclarationError } from '../errors.js';

/**
 * A cron expression in a time zone, read by croner: five fields (minutes) or six (seconds
 * first), day and month names, and the `@yearly`, `@annually`, `@monthly`, `@weekly`, `@daily`,
 * `@midnight` and `@hourly` aliases. Instants are computed in the zone, daylight-saving changes
 * included: a time the spring change skips fires once at the first instant after the gap, and a
 * time the autumn change repeats fires once, at its first occurrence; a schedule of every second
 * or minute fires on both passes of the repeated hour, since each of its instants is a tick.
 */
export interface CronSchedule {
  readonly expression: string;
  readonly timeZone: string;
  /** The latest tick at or before `instant`; null when the expression has none (never before). */
  latestAtOrBefore(instant: Date): Date | null;
  /** The first tick after `instant`, strictly; null when there is none. */
  nextAfter(instant: Date): Date | null;
  /** Up to `count` ticks at or before `instant`, newest first. */
  latestAtOrBeforeMany(instant: Date, count: number): Date[];
}

/** The zone a schedule reads its cron in when it names none, so no tick depends on the host's zone. */
export const DEFAULT_TIME_ZONE = 'UTC';

/** What a cron may be: these parse as patterns, but none is a recurring schedule of instants. */
const NOT_A_SCHEDULE = /^@reboot$/i;

/**
 * Parses `expression` in `timeZone`; a refusal is a `DeclarationError` that says `where`, the
 * field (`cron` or `timezone`) and croner's own reason.
 */
export function parseCron(expression: unknown, timeZone: string, where: string): CronSchedule {
  if (typeof expression !== 'string' || expression.trim() === '') {
    throw new DeclarationError(`${where}: cron must be a cron expression such as '*/5 * * * *', got ${describe(expression)}`);
  }
  const trimmed = expression.trim();
  if (NOT_A_SCHEDULE.test(trimmed)) {
    throw new DeclarationError(`${where}: cron '${trimmed}' runs at start-up, not on a schedule; give a recurring expression such as '@hourly'`);
  }
  // croner also reads an ISO date as a one-off run; a schedule recurs, so a ':' is refused first.
  if (trimmed.includes(':')) {
    throw new DeclarationError(`${where}: cron '${trimmed}' is a date, not a cron expression; give five or six fields such as '0 9 * * MON-FRI'`);
  }
  let cron: Cron;
  try {
    cron = new Cron(trimmed, { timezone: timeZone, mode: '5-or-6-parts', paused: true });
  } catch (error) {
    throw new DeclarationError(`${where}: cron '${trimmed}' is not a valid cron expression: ${(error as Error).message}`, { cause: error });
  }
  if (cron.nextRun(new Date()) === null) {
    throw new DeclarationError(`${where}: cron '${trimmed}' never fires (no date matches it)`);
  }
  return Object.freeze({
    expression: trimmed,
    timeZone,
    latestAtOrBefore: (instant: Date) => cron.previousRuns(1, justAfter(instant))[0] ?? null,
    nextAfter: (instant: Date) => cron.nextRun(instant),
    latestAtOrBeforeMany: (instant: Date, count: number) => cron.previousRuns(count, justAfter(instant)),
  });
}

/** croner's previous runs are strictly before the instant it is given; a tick at `instant` counts. */
function justAfter(instant: Date): Date {
  return new Date(instant.getTime() + 1);
}

/**
 * The zone as IANA names it (`Europe/Berlin`, `UTC`), checked with Intl, which knows every zone
 * the host's ICU data has.
 */
export function checkTimeZone(timeZone: unknown, where: string): string {
  if (typeof timeZone !== 'string' || timeZone === '') {
    throw new DeclarationError(`${where}: timezone must be an IANA time zone name such as 'Europe/Berlin', got ${describe(timeZone)}`);
  }
  try {
    new Intl.DateTimeFormat('en-US', { timeZone });
  } catch (error) {
    throw new DeclarationError(`${where}: timezone '${timeZone}' is not an IANA time zone this host knows (such as 'America/New_York' or 'UTC')`, {
      cause: error,
    });
  }
  return timeZone;
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (typeof value === 'string') return JSON.stringify(value);
  return typeof value;
}
