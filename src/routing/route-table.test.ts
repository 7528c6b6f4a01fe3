import { describe, expect, it } from 'vitest';
import { defineTable } from '../definition/define-table.js';
import { DeclarationError, NoRouteError, isQueueError } from '../errors.js';
import { closestRouteNames } from './closest-routes.js';
import { MAX_ROUTE_NAME_CHARACTERS, parseRouteName } from './route-name.js';
import { RouteTable } from './route-table.js';

const jobs = defineTable({ table: 'jobs', id: 'id', group: 'queue', payload: 'payload' });
const mail = defineTable({ table: 'mail', id: 'id', payload: 'payload' });

function tableOf(routes: Record<string, string>): RouteTable {
  const table = new RouteTable();
  for (const [name, queue] of Object.entries(routes)) table.declare(name, jobs.queue(queue));
  return table;
}

function refusal(run: () => unknown): DeclarationError {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(DeclarationError);
    return error as DeclarationError;
  }
  throw new Error('expected a DeclarationError');
}

function noRoute(table: RouteTable, name: string): NoRouteError {
  try {
    table.resolve(name, 'broker.publishTo');
  } catch (error) {
    expect(error).toBeInstanceOf(NoRouteError);
    return error as NoRouteError;
  }
  throw new Error(`expected no route for ${name}`);
}

describe('route resolution', () => {
  const table = tableOf({
    'orders.created': 'exact',
    'orders.*': 'orders',
    'orders.created.*': 'created-children',
    'orders.c*': 'orders-c',
    '*': 'everything',
  });
  const resolved = (name: string) => table.find(name)?.name;

  it('an exact route beats every prefix that also starts the name', () => {
    expect(resolved('orders.created')).toBe('exact');
  });

  it('a longer prefix beats a shorter one, whatever the declaration order', () => {
    expect(resolved('orders.created.eu')).toBe('created-children');
    expect(resolved('orders.cancelled')).toBe('orders-c');
    expect(resolved('orders.shipped')).toBe('orders');
  });

  it('a prefix matches the name equal to it, and `*` alone matches every name', () => {
    expect(resolved('orders.')).toBe('orders');
    expect(resolved('orders')).toBe('everything');
    expect(resolved('x')).toBe('everything');
  });

  it('a name is compared as written: case and a missing separator make another name', () => {
    const strict = tableOf({ 'orders.*': 'orders' });
    expect(strict.find('Orders.created')).toBeUndefined();
    expect(strict.find('orders')).toBeUndefined();
    expect(strict.find('ordersX')).toBeUndefined();
  });

  it('a prefix route declared by its pattern name resolves as that pattern (subscribeTo("mail.*"))', () => {
    expect(tableOf({ 'mail.*': 'mail' }).find('mail.*')?.name).toBe('mail');
  });

  it('routes to queues of different tables, a table without groups being one queue', () => {
    const routes = new RouteTable();
    routes.declare('orders.created', jobs.queue('orders'));
    routes.declare('mail.*', mail.queue('outgoing'));
    expect(routes.find('orders.created')?.table).toBe(jobs);
    expect(routes.find('mail.welcome')?.table).toBe(mail);
  });
});

describe('route declarations', () => {
  it('the same name to the same queue again changes nothing; to another queue it is refused, naming both', () => {
    const table = tableOf({ 'orders.created': 'orders' });
    table.declare('orders.created', jobs.queue('orders'));
    expect(table.names).toEqual(['orders.created']);
    const error = refusal(() => table.declare('orders.created', jobs.queue('audit')));
    expect(error.message).toBe(
      'broker.route: "orders.created" already routes to queue "jobs/orders"; it cannot route to "jobs/audit" too (one name, one queue: give the second one a name of its own)',
    );
    expect(table.find('orders.created')?.name).toBe('orders');
  });

  it('two queues of a table without groups are the same rows, so the same route', () => {
    const table = new RouteTable();
    table.declare('mail.*', mail.queue('a'));
    table.declare('mail.*', mail.queue('b'));
    expect(table.names).toEqual(['mail.*']);
  });

  it('an exact name and the prefix spelled the same but for `*` are two routes', () => {
    const table = tableOf({ orders: 'exact', 'orders*': 'prefix' });
    expect(table.find('orders')?.name).toBe('exact');
    expect(table.find('orders2')?.name).toBe('prefix');
  });

  it('declareAll declares none of the routes when one is refused', () => {
    const table = tableOf({ 'orders.created': 'orders' });
    refusal(() =>
      table.declareAll(
        [
          ['mail.*', jobs.queue('mail')],
          ['orders.created', jobs.queue('audit')],
        ],
        'broker.routes',
      ),
    );
    expect(table.names).toEqual(['orders.created']);
  });

  it.each([
    ['', /a route name must not be empty; give the message name, such as 'orders.created', or a prefix such as 'orders.\*'/],
    ['mail.*.sent', /the route name "mail.\*.sent" has a '\*' before its end; '\*' may only end a name, making it a prefix \("mail.\*" routes every name that starts with "mail."\)/],
    ['**', /has a '\*' before its end/],
    ['*.created', /has a '\*' before its end; '\*' may only end a name, making it a prefix \("\*" routes every name that starts with ""\)/],
    ['x'.repeat(MAX_ROUTE_NAME_CHARACTERS + 1), /is 256 characters long; use at most 255/],
    [42, /a route name is text, such as 'orders.created' or 'mail.\*', got number/],
    [null, /got null/],
  ])('refuses the route name %j, saying what to fix', (name, message) => {
    expect(refusal(() => new RouteTable().declare(name, jobs.queue('a'))).message).toMatch(message);
  });

  it('counts a name in characters: 255 emoji are a name of 255 characters', () => {
    expect(parseRouteName('🙂'.repeat(MAX_ROUTE_NAME_CHARACTERS), 'here').prefix).toBeUndefined();
  });

  it('refuses a route to anything but a queue', () => {
    expect(refusal(() => new RouteTable().declare('orders.created', jobs)).message).toBe(
      'broker.route("orders.created", …) needs a queue: table.queue("name") of a table from defineTable',
    );
  });
});

describe('NoRouteError', () => {
  it('names the closest routes, nearest first, and carries them', () => {
    const table = tableOf({ 'orders.created': 'a', 'orders.*': 'b', 'mail.*': 'c', 'payments.captured': 'd' });
    const error = noRoute(table, 'order.created');
    expect(isQueueError(error, 'NO_ROUTE')).toBe(true);
    expect(error.routeName).toBe('order.created');
    expect(error.closest).toEqual(['orders.created', 'orders.*']);
    expect(error.message).toBe(
      'broker.publishTo: no route for "order.created": the closest declared routes are "orders.created", "orders.*"; fix the name or declare a route for it with broker.route(name, queue)',
    );
  });

  it('lists every route when none is close and there are few', () => {
    const error = noRoute(tableOf({ 'orders.created': 'a', 'mail.*': 'b' }), 'zzz');
    expect(error.closest).toEqual([]);
    expect(error.message).toMatch(/no route for "zzz": the declared routes are "orders.created", "mail.\*"; declare a route/);
  });

  it('says that no route is declared at all', () => {
    expect(noRoute(new RouteTable(), 'orders.created').message).toMatch(/no route for "orders.created": no route is declared; declare one with broker.route/);
  });

  it('counts the routes when none is close and there are many, and shortens a long name', () => {
    const table = tableOf(Object.fromEntries(Array.from({ length: 8 }, (_, index) => [`route.${index}`, 'a'])));
    const error = noRoute(table, 'z'.repeat(10_000));
    expect(error.message).toMatch(/^broker.publishTo: no route for "z{80}…": none of its 8 declared routes is close/);
  });

  it('refuses a name that is not text as a DeclarationError', () => {
    expect(refusal(() => tableOf({ a: 'a' }).resolve(undefined, 'broker.publishTo')).message).toBe(
      "broker.publishTo needs the message's name as non-empty text, such as 'orders.created', got undefined",
    );
    expect(refusal(() => tableOf({ a: 'a' }).resolve('', 'broker.subscribeTo')).message).toMatch(/got an empty one/);
  });
});

describe('closestRouteNames', () => {
  const routes = (...names: string[]) => names.map((name) => parseRouteName(name, 'here'));

  it('finds typos by edit distance: a missing, an extra, a swapped character', () => {
    const declared = routes('orders.created', 'orders.shipped', 'invoices.paid');
    expect(closestRouteNames('orders.craeted', declared)).toEqual(['orders.created', 'orders.shipped']);
    expect(closestRouteNames('invoice.paid', declared)).toEqual(['invoices.paid']);
  });

  it('measures a prefix route against the beginning of the name', () => {
    expect(closestRouteNames('payments.refunded', routes('payment.*', 'mail.*'))).toEqual(['payment.*']);
  });

  it('counts a shared leading part at least half as long as the shorter name as close', () => {
    expect(closestRouteNames('orders.refunded', routes('orders.created', 'mail.sent'))).toEqual(['orders.created']);
  });

  it('gives a few at most, nearest first, ties by the longer shared beginning, then by name', () => {
    const declared = routes('job.b', 'job.a', 'jobs.a', 'job.c', 'job.d');
    expect(closestRouteNames('job.x', declared)).toEqual(['job.a', 'job.b', 'job.c']);
    expect(closestRouteNames('jobs.x', declared)).toEqual(['jobs.a', 'job.a', 'job.b']);
  });

  it('suggests nothing for a name unlike every route', () => {
    expect(closestRouteNames('zzzzzzzz', routes('orders.created', 'mail.*'))).toEqual([]);
  });
});
