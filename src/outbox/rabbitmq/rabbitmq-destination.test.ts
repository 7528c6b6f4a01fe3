import type * as amqplib from 'amqplib';
import { describe, expect, it } from 'vitest';
import { ConnectionError, DeclarationError } from '../../errors.js';
import type { AmqplibModuleLike } from './amqplib-like.js';
import { loadAmqplib, RabbitMqDestination } from './rabbitmq-destination.js';

// The structural types must keep describing the package the destination loads.
type AmqplibFitsItsStructuralType = typeof amqplib extends AmqplibModuleLike ? true : false;
const amqplibFitsItsStructuralType: AmqplibFitsItsStructuralType = true;

describe('RabbitMqDestination options', () => {
  it('describes itself without credentials', () => {
    const destination = new RabbitMqDestination({ url: 'amqp://guest:secret@mq.internal:5673/vhost', exchange: 'events' });
    expect(destination.description).toBe('rabbitmq exchange "events" at mq.internal:5673');
  });

  it.each([
    [{ url: 'not a url', exchange: 'events' }, /needs a url like/],
    [{ url: 'http://h:5672', exchange: 'events' }, /must start with amqp:\/\/ or amqps:\/\//],
    [{ url: 'amqp://h', exchange: '', assertExchange: { type: 'topic' as const } }, /default exchange \(""\) cannot be declared/],
    [{ url: 'amqp://h', exchange: 'events', confirmTimeoutMs: 1.5 }, /confirmTimeoutMs must be a whole number of milliseconds/],
    [{ url: 'amqp://h', exchange: 'events', connectTimeoutMs: 2 ** 31 }, /connectTimeoutMs must be a whole number of milliseconds from 1 to 2147483647/],
  ])('refuses %j', (options, message) => {
    expect(() => new RabbitMqDestination(options)).toThrowError(DeclarationError);
    expect(() => new RabbitMqDestination(options)).toThrowError(message);
  });

  it('refuses to send before it is opened', async () => {
    const destination = new RabbitMqDestination({ url: 'amqp://h', exchange: 'events' });
    const send = destination.send([{ id: '1', name: 'a', payload: Buffer.from('x'), headers: {} }]);
    await expect(send).rejects.toThrowError(ConnectionError);
    await destination.close();
  });

  it('refuses a record whose name maps to a routing key AMQP cannot carry (over 255 bytes)', () => {
    const destination = new RabbitMqDestination({ url: 'amqp://h', exchange: 'events', routingKeyOf: (name) => `orders.${name}` });
    const payload = Buffer.from('x');
    expect(destination.refusalOf({ name: 'é'.repeat(124), payload })).toBeUndefined();
    expect(destination.refusalOf({ name: 'é'.repeat(125), payload })).toMatch(
      /^the name "é+" maps to a routing key that is not a string of at most 255 bytes; shorten the name or change routingKeyOf$/,
    );
  });
});

describe('loadAmqplib', () => {
  it('says how to install amqplib when it is missing', async () => {
    const failure = loadAmqplib(() => import('tq-no-such-package' as string));
    await expect(failure).rejects.toThrowError(DeclarationError);
    await expect(failure).rejects.toThrowError(
      'the rabbitmq destination needs the "amqplib" package, but it is not installed: npm install amqplib',
    );
  });

  it('loads the installed package', async () => {
    expect(typeof (await loadAmqplib()).connect).toBe('function');
    expect(amqplibFitsItsStructuralType).toBe(true);
  });
});
