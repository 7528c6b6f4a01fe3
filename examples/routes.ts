import { strict as assert } from 'node:assert';
import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { Broker, defineRoutes, defineTable, NoRouteError } from 'tablequeue';

// Two tables: orders, and mail with an urgent queue of its own.
const declaration = { id: 'id', group: 'queue', lockedUntil: 'locked_until', payload: 'payload' } as const;
const orders = defineTable({ table: 'orders', ...declaration });
const mail = defineTable({ table: 'mail', ...declaration });

const file = join(tmpdir(), `tablequeue-routes-${process.pid}.db`);
const db = new Database(file);
for (const table of [orders, mail]) for (const statement of table.createTableSql('sqlite')) db.exec(statement);
db.close();

// The route table, declared once: names to queues, a name ending in * being a prefix.
const routes = defineRoutes({
  'orders.created': orders.queue<{ orderId: string }>('created'),
  'mail.*': mail.queue<{ to: string }>('outgoing'),
  'mail.urgent.*': mail.queue<{ to: string; pager: string }>('urgent'),
});

const handled: string[] = [];
let allHandled = (): void => undefined;
const done = new Promise<void>((resolve) => (allHandled = resolve));
const note = (line: string): void => {
  handled.push(line);
  if (handled.length === 4) allHandled();
};

const broker = new Broker({ database: `sqlite:${file}` });
const router = broker.routes(routes);
// Each handler gets its queue's payload type; a by-name subscription reads every name routed there.
router.subscribeTo('orders.created', (message) => note(`order ${message.payload.orderId}`));
router.subscribeTo('mail.welcome', (message) => note(`mail to ${message.payload.to}`));
router.subscribeTo('mail.urgent.disk', (message) => note(`page ${message.payload.pager} for ${message.payload.to}`));
await broker.start();

await router.publishTo('orders.created', { orderId: 'o-1' });
await router.publishTo('mail.welcome', { to: 'ada@example.com' });
await router.publishTo('mail.reset', { to: 'alan@example.com' });
// The longer prefix wins: mail.urgent.* takes this one, not mail.*.
await router.publishTo('mail.urgent.disk', { to: 'ops@example.com', pager: 'p-7' });

await done;
assert.deepEqual(new Set(handled), new Set(['order o-1', 'mail to ada@example.com', 'mail to alan@example.com', 'page p-7 for ops@example.com']));
console.log(handled.join('\n'));

// A name no route takes fails, naming the closest routes.
const error = await broker.publishTo('order.created', { orderId: 'o-2' }).catch((thrown: unknown) => thrown);
assert.ok(error instanceof NoRouteError);
assert.deepEqual(error.closest, ['orders.created']);
console.log(error.message);

await broker.stop();
rmSync(file, { force: true });
for (const suffix of ['-wal', '-shm']) rmSync(`${file}${suffix}`, { force: true });
