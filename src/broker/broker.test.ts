import { describe, expect, it } from 'vitest';
import { DeclarationError } from '../errors.js';
import { Broker } from './broker.js';

describe('Broker lifecycle', () => {
  it('says to create a new Broker when start() follows stop()', async () => {
    const broker = new Broker({ database: 'sqlite::memory:' });
    await broker.stop();
    const failure = await broker.start().catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(DeclarationError);
    expect((failure as Error).message).toMatch(/this broker has stopped .* create a new Broker, with its subscriptions, to run again/);
    expect((failure as Error).message).not.toMatch(/already called/);
  });
});
