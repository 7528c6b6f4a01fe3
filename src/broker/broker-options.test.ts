import { describe, expect, it } from 'vitest';
import { DeclarationError } from '../errors.js';
import { resolveBrokerOptions } from './broker-options.js';

describe('the listen option', () => {
  it('is left to start() when not given, and kept when true or false', () => {
    expect(resolveBrokerOptions({ database: 'postgres://db/app' }).listen).toBeUndefined();
    expect(resolveBrokerOptions({ database: {}, listen: true }).listen).toBe(true);
    expect(resolveBrokerOptions({ database: 'postgres://db/app', listen: false }).listen).toBe(false);
  });

  it('refuses anything but a boolean', () => {
    expect(() => resolveBrokerOptions({ database: 'postgres://db/app', listen: 'yes' as unknown as boolean })).toThrow(
      new DeclarationError('new Broker: listen must be true or false, got yes'),
    );
  });
});
