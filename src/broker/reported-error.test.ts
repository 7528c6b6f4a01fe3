import { describe, expect, expectTypeOf, it } from 'vitest';
import { DecodeError, DestinationError, HandlerError, InternalError, LeaseLostError, type QueueError } from '../errors.js';
import type { BrokerEvents } from './broker.js';
import { reportedError } from './reported-error.js';

describe('reportedError', () => {
  it("passes tablequeue's own errors through as they are", () => {
    const lost = new LeaseLostError({ id: '7', subscription: 'jobs/emails' });
    expect(reportedError(lost, { phase: 'settle' })).toBe(lost);
  });

  it("wraps a handler's throw, whatever it threw, keeping it as the cause and its message", () => {
    const thrown = new TypeError('cannot read "to"');
    const wrapped = reportedError(thrown, { subscription: 'jobs/emails', messageId: '41,42', phase: 'handler' });
    expect(wrapped).toBeInstanceOf(HandlerError);
    expect(wrapped).toMatchObject({ code: 'HANDLER', name: 'HandlerError', message: 'cannot read "to"', subscription: 'jobs/emails', messageIds: ['41', '42'] });
    expect(wrapped.cause).toBe(thrown);
    expect(reportedError('smtp refused', { subscription: 'jobs/emails', messageId: '1', phase: 'handler' })).toMatchObject({
      message: 'smtp refused',
      cause: 'smtp refused',
    });
    expect(reportedError({ status: 503 }, { subscription: 'jobs/emails', messageId: '1', phase: 'handler' }).message).toBe('{"status":503}');
  });

  it("wraps a decoder's throw as a DecodeError and a destination's as a DestinationError", () => {
    const decodeFailure = reportedError(new Error('not a number'), { subscription: 'jobs/emails', messageId: '1', phase: 'decode' });
    expect(decodeFailure).toBeInstanceOf(DecodeError);
    expect(decodeFailure.message).toBe('not a number');
    const sendFailure = reportedError(new Error('socket hang up'), { outbox: 'outbox', destination: 'webhook at example.com', phase: 'send' });
    expect(sendFailure).toBeInstanceOf(DestinationError);
    expect(sendFailure).toMatchObject({ destination: 'webhook at example.com', message: 'socket hang up' });
  });

  it('wraps anything else as an InternalError', () => {
    const bug = new RangeError('index out of range');
    const wrapped = reportedError(bug, { subscription: 'jobs/emails', phase: 'claim' });
    expect(wrapped).toBeInstanceOf(InternalError);
    expect(wrapped).toMatchObject({ code: 'INTERNAL', message: 'index out of range', cause: bug });
  });

  it("types the broker's error event as a QueueError", () => {
    expectTypeOf<BrokerEvents['error'][0]>().toEqualTypeOf<QueueError>();
    expectTypeOf<HandlerError>().toMatchTypeOf<QueueError>();
  });
});
