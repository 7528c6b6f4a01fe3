import { describe, expect, it } from 'vitest';
import { defineTable } from '../definition/define-table.js';
import { createPostgresDialect } from '../dialect/postgres/postgres-dialect.js';
import type { Connection, Driver, QueryResult } from '../driver/driver.js';
import { StatementError } from '../errors.js';
import type { BoundStatement } from '../statement.js';
import { MAX_QUEUE_NAME_CHARACTERS } from '../table/storable-values.js';
import { Publisher } from './publisher.js';

const dialect = createPostgresDialect();
const grouped = defineTable({ table: 'jobs', id: 'id', group: 'queue', payload: 'payload' });
const ungrouped = defineTable({ schema: 'app', table: 'mail', id: 'id', payload: 'payload' });

interface Executed {
  readonly connection: string;
  readonly name: string;
  readonly values: readonly unknown[];
}

/** A driver whose connections record what runs on them; `notify.notify` fails when asked. */
function createFakeDriver(options: { failNotify?: boolean } = {}) {
  const executed: Executed[] = [];
  const released: string[] = [];
  let acquired = 0;
  const connection = (label: string): Connection => ({
    async execute(statement: BoundStatement): Promise<QueryResult> {
      executed.push({ connection: label, name: statement.name, values: statement.values });
      if (options.failNotify && statement.name === 'notify.notify') {
        throw new StatementError({ statement: statement.name, database: 'postgres', sqlState: '08006', cause: new Error('gone') });
      }
      const isInsert = statement.name === 'insert.rows';
      return { rows: isInsert ? [{ id: 1 }] : [], affectedRows: isInsert ? 1 : 0, columns: ['id'] };
    },
    prepare: async () => undefined,
    release: () => released.push(label),
    destroy: () => released.push(`${label} destroyed`),
  });
  const driver = {
    kind: 'postgres',
    description: 'postgres at test:5432',
    ownsPool: true,
    acquire: async () => connection(`pool ${++acquired}`),
    adopt: () => connection('tx'),
    async executeWrite(statement: BoundStatement): Promise<QueryResult> {
      const borrowed = connection(`pool ${++acquired}`);
      try {
        return await borrowed.execute(statement);
      } finally {
        borrowed.release();
      }
    },
    execute: () => Promise.reject(new Error('a publish runs on one connection (or as a write of its own), never through Driver.execute')),
  } as unknown as Driver;
  return { driver, executed, released };
}

function createPublisher(driver: Driver, options: { listen: boolean }) {
  const wakes: (string | undefined)[] = [];
  const notifyErrors: Record<string, unknown>[] = [];
  const publisher = new Publisher({
    driver,
    dialect,
    wake: (_spec, group) => wakes.push(group),
    maxPayloadBytes: 1_024,
    notify: options.listen ? dialect.notify : undefined,
    onNotifyError: (_error, detail) => notifyErrors.push(detail),
  });
  return { publisher, wakes, notifyErrors };
}

describe('Publisher with listen on', () => {
  it('writes the row and notifies its channel and group on one borrowed connection, then releases it', async () => {
    const { driver, executed, released } = createFakeDriver();
    const { publisher, wakes } = createPublisher(driver, { listen: true });
    await expect(publisher.publish(grouped.queue('emails'), { to: 'a' })).resolves.toBe('1');
    expect(executed.map(({ connection, name }) => [connection, name])).toEqual([
      ['pool 1', 'insert.rows'],
      ['pool 1', 'notify.notify'],
    ]);
    expect(executed[1]!.values).toEqual(['jobs', 'emails']);
    expect(released).toEqual(['pool 1']);
    expect(wakes).toEqual(['emails']);
  });

  it('notifies every queue of a table without groups with an empty payload', async () => {
    const { driver, executed } = createFakeDriver();
    const { publisher } = createPublisher(driver, { listen: true });
    await publisher.publish(ungrouped.queue('mail'), 'hello');
    expect(executed[1]!.values).toEqual(['app.mail', '']);
  });

  it('runs the chunks of publishMany in one transaction, then one notification, on the same connection', async () => {
    const { driver, executed, released } = createFakeDriver();
    const { publisher } = createPublisher(driver, { listen: true });
    const items = Array.from({ length: 501 }, (_, index) => ({ payload: index }));
    await expect(publisher.publishMany(grouped.queue('emails'), items)).resolves.toBe(501);
    expect(executed.map(({ connection, name }) => [connection, name])).toEqual([
      ['pool 1', 'session.begin'],
      ['pool 1', 'insert.rows'],
      ['pool 1', 'insert.rows'],
      ['pool 1', 'session.commit'],
      ['pool 1', 'notify.notify'],
    ]);
    expect(released).toEqual(['pool 1']);
  });

  it("notifies on the service's transaction, so the notification goes out when it commits", async () => {
    const { driver, executed } = createFakeDriver();
    const { publisher } = createPublisher(driver, { listen: true });
    await publisher.publish(grouped.queue('emails'), 1, { tx: {} });
    await publisher.publishMany(grouped.queue('emails'), [{ payload: 2 }], { tx: {} });
    expect(executed.map(({ connection }) => connection)).toEqual(['tx', 'tx', 'tx', 'tx']);
  });

  it('reports a failed notification and still returns the written id', async () => {
    const { driver, released } = createFakeDriver({ failNotify: true });
    const { publisher, notifyErrors } = createPublisher(driver, { listen: true });
    await expect(publisher.publish(grouped.queue('emails'), 1)).resolves.toBe('1');
    expect(notifyErrors).toEqual([{ queue: 'jobs/emails', phase: 'notify' }]);
    expect(released).toEqual(['pool 1']);
  });

  it('fits every queue name in a notification payload', () => {
    expect(4 * MAX_QUEUE_NAME_CHARACTERS).toBeLessThanOrEqual(dialect.notify!.maxPayloadBytes);
  });
});

describe('Publisher with listen off', () => {
  it('writes as a write of its own on one borrowed connection and notifies nothing', async () => {
    const { driver, executed, released } = createFakeDriver();
    const { publisher } = createPublisher(driver, { listen: false });
    await publisher.publish(grouped.queue('emails'), 1);
    expect(executed.map(({ name }) => name)).toEqual(['insert.rows']);
    expect(released).toEqual(['pool 1']);
  });
});

describe('Publisher with a message timeout', () => {
  const withHeaders = defineTable({ table: 'jobs', id: 'id', group: 'queue', payload: 'payload', headers: 'headers' });

  it("writes timeoutMs into the headers beside the caller's, as the header the subscription reads", async () => {
    const { driver, executed } = createFakeDriver();
    const { publisher } = createPublisher(driver, { listen: false });
    await publisher.publish(withHeaders.queue('emails'), {}, { timeoutMs: 2_500, headers: { tenant: 't1' } });
    expect(executed[0]!.values).toContain(JSON.stringify({ tenant: 't1', 'tablequeue-timeout-ms': '2500' }));
  });

  it('refuses timeoutMs on a table without a headers column, and timeouts no timer keeps', async () => {
    const { driver, executed } = createFakeDriver();
    const { publisher } = createPublisher(driver, { listen: false });
    await expect(publisher.publish(grouped.queue('emails'), {}, { timeoutMs: 100 })).rejects.toThrow(
      'publish to "jobs/emails": the timeoutMs option travels in the header "tablequeue-timeout-ms", and table "jobs" has no headers column; declare headers in defineTable, or set timeoutMs on the subscription instead',
    );
    await expect(publisher.publish(withHeaders.queue('emails'), {}, { timeoutMs: 0 })).rejects.toThrow(
      'timeoutMs must be a number of milliseconds above 0 and at most 2147483647, got 0',
    );
    expect(executed).toEqual([]);
  });
});
