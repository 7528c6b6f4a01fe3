import { describe, expect, it } from 'vitest';
import { StatementError } from '../errors.js';
import { errorLogLine, formatDelay } from './error-log-line.js';

const at = new Date('2026-03-01T12:00:01.250Z');

describe('errorLogLine', () => {
  it('names the error, the message, the attempt and when the next attempt comes', () => {
    const detail = { subscription: 'jobs/emails', messageId: '42', phase: 'handler', attempt: 1, maxAttempts: 5, nextAttemptAt: at, retryDelayMs: 1_250 };
    expect(errorLogLine(new TypeError('boom'), detail)).toBe(
      'subscription "jobs/emails": the handler threw on message 42 at attempt 1 of 5: TypeError: boom; next attempt at 2026-03-01T12:00:01.250Z, in 1.3 s',
    );
    expect(errorLogLine(new Error('boom'), { ...detail, maxAttempts: undefined })).toBe(
      'subscription "jobs/emails": the handler threw on message 42 at attempt 1: Error: boom; next attempt at 2026-03-01T12:00:01.250Z, in 1.3 s',
    );
  });

  it('says "at once" when the row returns without a delay', () => {
    const detail = { subscription: 'jobs', messageId: '7', phase: 'handler', attempt: 3, nextAttemptAt: at, retryDelayMs: 0 };
    expect(errorLogLine(new Error('boom'), detail)).toBe('subscription "jobs": the handler threw on message 7 at attempt 3: Error: boom; next attempt at once');
  });

  it('says where a message without attempts left went: a group or a table', () => {
    const base = { subscription: 'jobs/emails', messageId: '42', phase: 'handler', attempt: 5, maxAttempts: 5 };
    expect(errorLogLine(new Error('boom'), { ...base, deadLetter: { group: 'dead' } })).toBe(
      'subscription "jobs/emails": the handler threw on message 42 at attempt 5 of 5: Error: boom; no attempt left: moved to dead-letter group "dead"',
    );
    expect(errorLogLine(new Error('boom'), { ...base, deadLetter: { table: 'app.jobs_dead' } })).toBe(
      'subscription "jobs/emails": the handler threw on message 42 at attempt 5 of 5: Error: boom; no attempt left: moved to dead-letter table "app.jobs_dead"',
    );
  });

  it('tells a batch apart: the first retry, and which messages moved', () => {
    const detail = {
      subscription: 'jobs/emails',
      messageId: '1,2,3',
      phase: 'handler',
      maxAttempts: 2,
      nextAttemptAt: at,
      retryDelayMs: 250,
      deadLetter: { group: 'dead' },
      deadLetteredIds: '3',
    };
    expect(errorLogLine(new Error('boom'), detail)).toBe(
      'subscription "jobs/emails": the batch handler threw on messages 1,2,3: Error: boom; next attempt (the first retried) at 2026-03-01T12:00:01.250Z, in 250 ms; message 3 had no attempt left: moved to dead-letter group "dead"',
    );
  });

  it('says a row that did not decode was dropped', () => {
    const detail = { subscription: 'jobs/emails', messageId: '9', phase: 'decode', attempt: 1, dropped: true };
    expect(errorLogLine(new Error('payload is not UTF-8 JSON'), detail)).toBe(
      'subscription "jobs/emails": message 9 did not decode at attempt 1: Error: payload is not UTF-8 JSON; dropped (onDecodeFailure)',
    );
  });

  it('leaves other phases as the error with its name, and shows values that are not errors', () => {
    const error = new StatementError({ statement: 'claim', database: 'postgres', cause: new Error('relation "jobs" does not exist') });
    expect(errorLogLine(error, { subscription: 'jobs', phase: 'claim' })).toMatch(/^StatementError: /);
    expect(errorLogLine('plain text', { phase: 'handler', subscription: 'jobs', messageId: '1' })).toBe(
      'subscription "jobs": the handler threw on message 1: plain text',
    );
    expect(errorLogLine({ code: 7 }, {})).toBe('{"code":7}');
  });
});

describe('formatDelay', () => {
  it('picks a unit a person reads at a glance', () => {
    expect([formatDelay(0), formatDelay(999), formatDelay(1_000), formatDelay(90_000), formatDelay(3_600_000)]).toEqual([
      '0 ms',
      '999 ms',
      '1.0 s',
      '1.5 min',
      '1.0 h',
    ]);
  });
});
