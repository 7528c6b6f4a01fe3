import { describe, expect, it } from 'vitest';
import { TIMEOUT_HEADER, timeoutOfHeaders } from './message-timeout.js';

describe('timeoutOfHeaders', () => {
  it('reads the milliseconds a publish wrote', () => {
    expect(TIMEOUT_HEADER).toBe('tablequeue-timeout-ms');
    expect(timeoutOfHeaders({ [TIMEOUT_HEADER]: '1500' })).toBe(1500);
    expect(timeoutOfHeaders({ [TIMEOUT_HEADER]: '0.5' })).toBe(0.5);
    expect(timeoutOfHeaders({ [TIMEOUT_HEADER]: '2147483647' })).toBe(2 ** 31 - 1);
  });

  it.each([[{}], [{ [TIMEOUT_HEADER]: '' }], [{ [TIMEOUT_HEADER]: ' ' }], [{ [TIMEOUT_HEADER]: '0' }], [{ [TIMEOUT_HEADER]: '-5' }], [{ [TIMEOUT_HEADER]: 'soon' }], [{ [TIMEOUT_HEADER]: '2147483648' }], [{ [TIMEOUT_HEADER]: 'Infinity' }]])(
    'leaves the timeout to the subscription when the header names none a timer keeps: %j',
    (headers) => {
      expect(timeoutOfHeaders(headers)).toBeUndefined();
    },
  );
});
