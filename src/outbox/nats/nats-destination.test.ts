import * as nats from 'nats';
import { describe, expect, it } from 'vitest';
import { ConnectionError, DeclarationError } from '../../errors.js';
import { loadNats, NatsDestination } from './nats-destination.js';
import type { NatsModuleLike } from './nats-like.js';

// The structural types must keep describing the package the destination loads.
const natsFitsItsStructuralType: NatsModuleLike<nats.MsgHdrs, nats.StorageType> = nats;

describe('NatsDestination options', () => {
  it('describes itself without credentials', () => {
    const destination = new NatsDestination({ servers: ['nats://user:secret@h1:4222', 'h2:4223'] });
    expect(destination.description).toBe('nats jetstream at h1:4222, h2:4223');
  });

  it.each([
    [{ servers: [] }, /needs servers/],
    [{ servers: '127.0.0.1:4222', subjectPrefix: 'a.', subjectOf: (name: string) => name }, /subjectPrefix or subjectOf, not both/],
    [{ servers: '127.0.0.1:4222', subjectPrefix: 'a.>' }, /wildcard/],
    [{ servers: '127.0.0.1:4222', ackTimeoutMs: 0 }, /ackTimeoutMs must be a whole number of milliseconds from 1 to 2147483647/],
    [{ servers: '127.0.0.1:4222', connectTimeoutMs: 2 ** 31 }, /connectTimeoutMs must be a whole number of milliseconds from 1 to 2147483647, got 2147483648/],
    [{ servers: '127.0.0.1:4222', ensureStream: { name: 'orders' } }, /needs subjects, or a subjectPrefix ending in "\."/],
    [{ servers: '127.0.0.1:4222', subjectPrefix: 'a.', ensureStream: { name: 'a.b' } }, /not a JetStream stream name/],
    [
      { servers: '127.0.0.1:4222', subjectPrefix: 'a.', ensureStream: { name: 'a', duplicateWindowMs: -1 } },
      /duplicateWindowMs must be a whole number of milliseconds/,
    ],
  ])('refuses %j', (options, message) => {
    expect(() => new NatsDestination(options)).toThrowError(DeclarationError);
    expect(() => new NatsDestination(options)).toThrowError(message);
  });

  it('refuses to send before it is opened', async () => {
    const destination = new NatsDestination({ servers: '127.0.0.1:4222' });
    const send = destination.send([{ id: '1', name: 'a', payload: Buffer.from('x'), headers: {} }]);
    await expect(send).rejects.toThrowError(ConnectionError);
    await expect(send).rejects.toThrowError(/is not connected; open\(\) it first/);
    await destination.close();
  });

  it('refuses a record whose name maps to no subject one can publish to; its size only once connected', () => {
    const destination = new NatsDestination({ servers: '127.0.0.1:4222', subjectOf: (name) => `orders.${name}` });
    const payload = Buffer.alloc(4 * 1024 * 1024);
    expect(destination.refusalOf({ name: 'paid', payload })).toBeUndefined();
    expect(destination.refusalOf({ name: 'paid now', payload })).toBe(
      'the name "paid now" maps to subject "orders.paid now", which is not a subject one can publish to (no whitespace, empty tokens or wildcards); rename the records or change subjectPrefix/subjectOf',
    );
    expect(destination.refusalOf({ name: '>', payload })).toMatch(/not a subject one can publish to/);
  });
});

describe('loadNats', () => {
  it('says how to install nats when it is missing', async () => {
    const failure = loadNats(() => import('tq-no-such-package' as string));
    await expect(failure).rejects.toThrowError(DeclarationError);
    await expect(failure).rejects.toThrowError('the nats destination needs the "nats" package, but it is not installed: npm install nats');
  });

  it('loads the installed package', async () => {
    expect(typeof (await loadNats()).connect).toBe('function');
    expect(natsFitsItsStructuralType.headers).toBe(nats.headers);
  });
});
