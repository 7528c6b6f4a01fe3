import { describe, expect, expectTypeOf, it } from 'vitest';
import { Broker } from '../broker/broker.js';
import { defineTable } from '../definition/define-table.js';
import type { Message } from '../delivery/message.js';
import { AlreadySubscribedError, ClosedError, DeclarationError, NoRouteError } from '../errors.js';
import type { KeyedPublishResult } from '../publish/publish-options.js';
import { defineRoutes, type RoutedName, type RoutedPayload, type RouteOf } from './define-routes.js';
import type { Router } from './router.js';

interface OrderCreated {
  orderId: string;
  total: number;
}
interface Mail {
  to: string;
}
interface Page {
  severity: 'high' | 'low';
}

const jobs = defineTable({ table: 'jobs', id: 'id', group: 'queue', payload: 'payload', lockedUntil: 'locked_until' });
const mailTable = defineTable({ table: 'mail', id: 'id', group: 'queue', payload: 'payload', lockedUntil: 'locked_until' });
const orders = jobs.queue<OrderCreated>('orders');
const mail = mailTable.queue<Mail>('outgoing');
const pages = mailTable.queue<Page>('pages');

const routes = defineRoutes({ 'orders.created': orders, 'mail.*': mail, 'mail.urgent.*': pages });
type Routes = typeof routes;

function refusal(run: () => unknown): Error {
  try {
    run();
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected a refusal');
}

describe('route types', () => {
  it('name each exact route, and every name a prefix route starts', () => {
    expectTypeOf<RoutedName<Routes>>().toEqualTypeOf<'orders.created' | `mail.${string}` | `mail.urgent.${string}`>();
    expectTypeOf<'mail.welcome'>().toMatchTypeOf<RoutedName<Routes>>();
    expectTypeOf<'orders.shipped'>().not.toMatchTypeOf<RoutedName<Routes>>();
  });

  it('resolve a literal name as the broker does: exact, else the longest prefix', () => {
    expectTypeOf<RouteOf<Routes, 'orders.created'>>().toEqualTypeOf<'orders.created'>();
    expectTypeOf<RouteOf<Routes, 'mail.welcome'>>().toEqualTypeOf<'mail.*'>();
    expectTypeOf<RouteOf<Routes, 'mail.urgent.disk'>>().toEqualTypeOf<'mail.urgent.*'>();
    expectTypeOf<RoutedPayload<Routes, 'mail.urgent.disk'>>().toEqualTypeOf<Page>();
    expectTypeOf<RoutedPayload<Routes, 'mail.welcome'>>().toEqualTypeOf<Mail>();
    expectTypeOf<RoutedPayload<Routes, 'orders.created'>>().toEqualTypeOf<OrderCreated>();
  });

  it('check publishTo payloads and give subscribeTo handlers typed messages', () => {
    // Checked by the typecheck, which covers this file; never called. Each line with a directive fails to compile without it.
    const typeChecks = (router: Router<Routes>) => {
      void router.publishTo('orders.created', { orderId: 'o-1', total: 12 });
      void router.publishTo('mail.welcome', { to: 'a@example.com' }, { delayMs: 1_000 });
      void router.publishTo('mail.urgent.disk', { severity: 'high' });
      // @ts-expect-error the payload of orders.created is an OrderCreated
      void router.publishTo('orders.created', { to: 'a@example.com' });
      // @ts-expect-error mail.urgent.* takes mail.urgent.disk, not mail.*: its payload is a Page
      void router.publishTo('mail.urgent.disk', { to: 'a@example.com' });
      // @ts-expect-error no route takes orders.shipped
      void router.publishTo('orders.shipped', { orderId: 'o-1', total: 12 });
      expectTypeOf(router.publishTo('orders.created', { orderId: 'o-1', total: 1 })).toEqualTypeOf<Promise<string>>();
      expectTypeOf(router.publishTo('orders.created', { orderId: 'o-1', total: 1 }, { dedupeKey: 'o-1' })).toEqualTypeOf<
        Promise<KeyedPublishResult>
      >();

      router.subscribeTo('mail.welcome', (message) => {
        expectTypeOf(message).toEqualTypeOf<Message<Mail>>();
      });
      router.subscribeTo(
        'orders.created',
        (messages) => {
          expectTypeOf(messages).toEqualTypeOf<Message<OrderCreated>[]>();
        },
        { batch: 10 },
      );
      // @ts-expect-error a by-name subscription refuses maxAttempts and deadLetter
      router.subscribeTo('mail.welcome', () => undefined, { maxAttempts: 3, deadLetter: 'failed' });
      // @ts-expect-error a by-name subscription runs with the broker's poll interval
      router.subscribeTo('mail.welcome', () => undefined, { pollIntervalMs: 10 });
      expectTypeOf(router.queueOf('mail.urgent.disk')).toEqualTypeOf<typeof pages>();
    };
    expect(typeChecks).toBeTypeOf('function');
  });
});

describe('broker routes', () => {
  it('publishTo rejects with a NoRouteError before the broker is asked to publish', async () => {
    const broker = new Broker({ database: 'sqlite::memory:' });
    broker.route('orders.created', orders);
    await expect(broker.publishTo('order.created', {})).rejects.toThrow(NoRouteError);
    await expect(broker.publishTo('order.created', {})).rejects.toMatchObject({ code: 'NO_ROUTE', closest: ['orders.created'] });
    // A routed name goes on to publish, which a broker not started refuses.
    await expect(broker.publishTo('orders.created', {})).rejects.toThrow(ClosedError);
  });

  it('subscribeTo refuses maxAttempts and deadLetter, saying why and where to declare them', () => {
    const broker = new Broker({ database: 'sqlite::memory:' });
    broker.route('mail.*', mail);
    const error = refusal(() =>
      broker.subscribeTo('mail.welcome', () => undefined, { maxAttempts: 3, deadLetter: 'failed' } as never),
    );
    expect(error).toBeInstanceOf(DeclarationError);
    expect(error.message).toBe(
      'broker.subscribeTo("mail.welcome"): a by-name subscription refuses maxAttempts and deadLetter. The name resolves to queue ' +
        '"mail/outgoing", which also holds the messages of every other name routed to it, and a retry cap with a dead-letter ' +
        "destination decides the fate of every row of the queue, not of one name's. Declare them where the queue itself is read: " +
        'broker.subscribe(queue, handler, { maxAttempts, deadLetter })',
    );
    expect(refusal(() => broker.subscribeTo('mail.welcome', () => undefined, { deadLetter: 'failed' } as never)).message).toMatch(
      /refuses maxAttempts and deadLetter/,
    );
  });

  it("subscribeTo runs with the broker's poll interval and lease, refusing its own", () => {
    const broker = new Broker({ database: 'sqlite::memory:' });
    broker.route('mail.*', mail);
    for (const options of [{ pollIntervalMs: 10 }, { leaseMs: 5_000 }]) {
      const error = refusal(() => broker.subscribeTo('mail.welcome', () => undefined, options as never));
      expect(error).toBeInstanceOf(DeclarationError);
      expect(error.message).toMatch(
        /^broker.subscribeTo\("mail.welcome"\): a by-name subscription runs with the broker's pollIntervalMs and leaseMs \(new Broker\(\{ pollIntervalMs, leaseMs \}\)\): the name only picks the queue, here "mail\/outgoing"/,
      );
    }
  });

  it('subscribeTo of an unrouted name is a NoRouteError; of a second name routed to a read queue, refused naming both', () => {
    const broker = new Broker({ database: 'sqlite::memory:' });
    broker.route('mail.*', mail);
    expect(refusal(() => broker.subscribeTo('mails.welcome', () => undefined))).toBeInstanceOf(NoRouteError);
    broker.subscribeTo('mail.welcome', () => undefined);
    const error = refusal(() => broker.subscribeTo('mail.reset', () => undefined));
    expect(error).toBeInstanceOf(AlreadySubscribedError);
    expect(error.message).toBe(
      'broker.subscribeTo("mail.reset"): the name routes to queue "mail/outgoing", which this broker already reads; that subscription ' +
        'gets every message routed there, whatever its name, so subscribe to the queue once (scale it with { workers: n })',
    );
  });

  it('routes declares every route or none: a name routed elsewhere already refuses the whole table', () => {
    const broker = new Broker({ database: 'sqlite::memory:' });
    broker.route('orders.created', jobs.queue('audit'));
    expect(refusal(() => broker.routes(routes))).toBeInstanceOf(DeclarationError);
    expect(refusal(() => broker.subscribeTo('mail.welcome', () => undefined))).toBeInstanceOf(NoRouteError);
  });

  it('defineRoutes checks every name at once', () => {
    expect(refusal(() => defineRoutes({ 'mail.*.sent': mail })).message).toMatch(/^defineRoutes: the route name "mail.\*.sent" has a '\*' before its end/);
    expect(refusal(() => defineRoutes({ 'orders.created': jobs as never })).message).toMatch(/needs a queue/);
  });
});
