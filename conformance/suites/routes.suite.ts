import { describe, expect, it } from 'vitest';
import { DeclarationError, defineRoutes, defineTable, NoRouteError, type Message } from '../../src/index.js';
import { Collector, countRows, createBroker, createTable, formsOf, jobsDeclaration, jobsTable, untilStats, type FormUnderTest } from '../fixtures.js';
import type { SuiteContext } from '../run-conformance.js';

interface OrderCreated {
  orderId: string;
}
interface Mail {
  to: string;
}
interface Page {
  severity: string;
}

/** Orders and mail in two tables; mail's urgent names in a queue of their own by a longer prefix. */
function routedTables(form: FormUnderTest, options: { keyed?: boolean } = {}) {
  const orders = defineTable({ ...jobsDeclaration({ form, name: 'orders' }), ...(options.keyed ? { dedupeKey: 'dedupe_key' } : {}) });
  const mail = jobsTable({ form, name: 'mail' });
  const queues = { created: orders.queue<OrderCreated>('created'), outgoing: mail.queue<Mail>('outgoing'), urgent: mail.queue<Page>('urgent') };
  const routes = defineRoutes({ 'orders.created': queues.created, 'mail.*': queues.outgoing, 'mail.urgent.*': queues.urgent });
  return { tables: [orders, mail], queues, routes };
}

/** Routes: publishTo and subscribeTo by name, into and out of queues of two tables, on every database. */
export function routesSuite(context: SuiteContext): void {
  const { stand } = context;
  for (const form of formsOf(stand)) {
    describe(`${form} routes`, () => {
      it('publishes by name into the routed table and queue, and subscribeTo reads each back by name', async () => {
        const { tables, queues, routes } = routedTables(form);
        for (const table of tables) await createTable(stand, context.db, table);

        const publisher = createBroker(context.db, context.brokers);
        const router = publisher.routes(routes);
        await publisher.start();
        const ids = [
          await router.publishTo('orders.created', { orderId: 'o-1' }),
          await router.publishTo('mail.welcome', { to: 'a@example.com' }, { priority: 1 }),
          await publisher.publishTo('mail.reset', { to: 'b@example.com' }),
          await router.publishTo('mail.urgent.disk', { severity: 'high' }),
        ];
        expect(ids.every((id) => typeof id === 'string' && id !== '')).toBe(true);
        // An exact route, a prefix, and the longer prefix that beats it: each row in its table and group.
        expect(await countRows(context.db, 'orders', "queue = 'created'")).toBe(1);
        expect(await countRows(context.db, 'mail', "queue = 'outgoing'")).toBe(2);
        expect(await countRows(context.db, 'mail', "queue = 'urgent'")).toBe(1);
        expect(await countRows(context.db, 'orders')).toBe(1);
        expect(await countRows(context.db, 'mail')).toBe(3);

        const consumer = createBroker(context.db, context.brokers);
        const consumerRouter = consumer.routes(routes);
        const created = new Collector<Message<OrderCreated>>();
        const outgoing = new Collector<Message<Mail>>();
        const urgent = new Collector<Message<Page>>();
        consumerRouter.subscribeTo('orders.created', (message) => created.push(message));
        // Any name of the prefix subscribes to its queue: it reads every name routed there.
        consumerRouter.subscribeTo('mail.anything', (message) => outgoing.push(message));
        consumer.subscribeTo<Page>('mail.urgent.*', (message) => urgent.push(message));
        await consumer.start();

        expect((await created.waitFor(1)).map((message) => [message.id, message.payload])).toEqual([[ids[0], { orderId: 'o-1' }]]);
        const mails = await outgoing.waitFor(2);
        expect(new Set(mails.map((message) => message.payload.to))).toEqual(new Set(['a@example.com', 'b@example.com']));
        expect((await urgent.waitFor(1))[0]!.payload).toEqual({ severity: 'high' });
        await untilStats(consumer, queues.outgoing, (stats) => stats.acked === 2, 'both mails acked');
        await untilStats(consumer, queues.created, (stats) => stats.acked === 1, 'the order acked');
        await untilStats(consumer, queues.urgent, (stats) => stats.acked === 1, 'the page acked');
        expect(await countRows(context.db, 'orders')).toBe(0);
        expect(await countRows(context.db, 'mail')).toBe(0);
        expect(consumer.metrics()).toContain('tablequeue_messages_published_total');
      });

      it("publishTo with a dedupe key answers as publish's keyed overload does", async () => {
        const { tables, routes } = routedTables(form, { keyed: true });
        for (const table of tables) await createTable(stand, context.db, table);
        const broker = createBroker(context.db, context.brokers);
        const router = broker.routes(routes);
        await broker.start();
        const first = await router.publishTo('orders.created', { orderId: 'o-1' }, { dedupeKey: 'o-1' });
        expect(first.status).toBe('published');
        expect(await broker.publishTo('orders.created', { orderId: 'o-1' }, { dedupeKey: 'o-1' })).toEqual({ status: 'duplicate', id: first.id });
        expect(await countRows(context.db, 'orders')).toBe(1);
      });

      it('an unrouted name is a NoRouteError naming the closest routes; nothing is written', async () => {
        const { tables, routes } = routedTables(form);
        for (const table of tables) await createTable(stand, context.db, table);
        const broker = createBroker(context.db, context.brokers);
        broker.routes(routes);
        await broker.start();
        const error = await broker.publishTo('order.created', { orderId: 'o-1' }).catch((thrown: unknown) => thrown);
        expect(error).toBeInstanceOf(NoRouteError);
        expect(error).toMatchObject({ code: 'NO_ROUTE', routeName: 'order.created', closest: ['orders.created'] });
        expect((error as Error).message).toBe(
          'broker.publishTo: no route for "order.created": the closest declared route is "orders.created"; fix the name or declare a route for it with broker.route(name, queue)',
        );
        expect(await countRows(context.db, 'orders')).toBe(0);
        expect(await countRows(context.db, 'mail')).toBe(0);
      });

      it('subscribeTo refuses an unrouted name, maxAttempts and deadLetter, and its own poll interval; the broker starts without them', async () => {
        const { tables, routes } = routedTables(form);
        for (const table of tables) await createTable(stand, context.db, table);
        const broker = createBroker(context.db, context.brokers);
        broker.routes(routes);
        expect(() => broker.subscribeTo('mails.welcome', () => undefined)).toThrow(NoRouteError);
        expect(() => broker.subscribeTo('mail.welcome', () => undefined, { maxAttempts: 2, deadLetter: 'failed' } as never)).toThrow(
          /a by-name subscription refuses maxAttempts and deadLetter\. The name resolves to queue "mail\/outgoing", which also holds the messages of every other name routed to it/,
        );
        expect(() => broker.subscribeTo('mail.welcome', () => undefined, { pollIntervalMs: 10 } as never)).toThrow(DeclarationError);
        await broker.start();
        expect(broker.stats().subscriptions).toEqual([]);
      });
    });
  }
}
