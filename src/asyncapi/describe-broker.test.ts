import { DiagnosticSeverity, Parser, type AsyncAPIDocumentInterface } from '@asyncapi/parser';
import { describe, expect, it } from 'vitest';
import { Broker } from '../broker/broker.js';
import { defineTable, type QueueTable } from '../definition/define-table.js';
import type { StandardSchemaV1 } from '../delivery/standard-schema.js';
import { DeclarationError } from '../errors.js';
import { defineOutbox } from '../outbox/define-outbox.js';
import { queueDestination } from '../outbox/queue-destination.js';
import type { AsyncApiDocument } from './asyncapi-document.js';

const parser = new Parser();

/** The document as the AsyncAPI parser reads it: any error-level diagnostic fails the test. */
async function parsed(document: AsyncApiDocument): Promise<AsyncAPIDocumentInterface> {
  const result = await parser.parse(JSON.stringify(document));
  const errors = result.diagnostics
    .filter((diagnostic) => diagnostic.severity === DiagnosticSeverity.Error)
    .map((diagnostic) => `${diagnostic.path.join('.')}: ${diagnostic.message}`);
  expect(errors).toEqual([]);
  expect(result.document).toBeDefined();
  return result.document!;
}

const leaseJobs = defineTable({
  table: 'jobs',
  schema: 'app',
  id: 'id',
  group: 'queue',
  payload: 'payload',
  headers: 'headers',
  retryAfter: 'retry_after',
  attempt: 'attempt',
  lockedUntil: 'locked_until',
});
const fifoOrders = defineTable({ table: 'orders', id: 'id', group: { column: 'customer', fifo: true }, payload: 'body', lockedUntil: 'locked_until' });
const plainTasks = defineTable({ table: 'tasks', id: 'id', payload: 'payload', attempt: 'attempt', retryAfter: 'retry_after' });
const outbox = defineOutbox({ table: 'outbox', id: 'id', name: 'name', payload: 'payload', headers: 'headers', lockedUntil: 'locked_until' });

/** A validator with the Standard JSON Schema interface, as zod 4.2+ and others carry it. */
function standardJsonSchemaValidator(schema: Record<string, unknown>): StandardSchemaV1 {
  const asked: unknown[] = [];
  const validator = {
    asked,
    '~standard': {
      version: 1 as const,
      vendor: 'handmade',
      validate: (value: unknown) => ({ value }),
      jsonSchema: {
        input: (options: unknown) => {
          asked.push(options);
          return { $schema: 'http://json-schema.org/draft-07/schema#', ...schema };
        },
        output: () => ({}),
      },
    },
  };
  return validator;
}

/** A validator with only Standard Schema's validate: no JSON Schema of its own. */
const opaqueValidator: StandardSchemaV1 = { '~standard': { version: 1, vendor: 'opaque', validate: (value) => ({ value }) } };

/** Subscriptions on every table form, a dead-letter group and table, a schedule, a relay, a publish. */
function declareEverything(broker: Broker, tables: { jobs: QueueTable } = { jobs: leaseJobs }): void {
  broker.subscribe(tables.jobs.queue('emails'), () => undefined, { maxAttempts: 5, deadLetter: 'emails-dead' });
  broker.subscribe(fifoOrders.queue('any'), () => undefined);
  broker.subscribe(plainTasks.queue('tasks'), () => undefined, { maxAttempts: 3, deadLetter: 'archive.tasks_dead' });
  broker.schedule('nightly:report', tables.jobs.queue('reports'), { cron: '0 3 * * *', timezone: 'Europe/Paris' });
  broker.relay(outbox, queueDestination(tables.jobs.queue('events')));
}

// The parser runs its Spectral rules over each document: 1 to 4 s apiece measured on two busy cores.
describe('broker.asyncapi', { timeout: 30_000 }, () => {
  const databases: Array<[string, () => string, { host: string; pathname?: string; protocol: string }]> = [
    ['a postgres URL', () => 'postgres://app_user:pg-secret@db.example.com:6543/shop?sslmode=require&password=query-secret', { host: 'db.example.com:6543', pathname: '/shop', protocol: 'postgresql' }],
    ['a mysql URL', () => 'mysql://root:my-secret@10.0.0.7/shop', { host: '10.0.0.7:3306', pathname: '/shop', protocol: 'mysql' }],
    ['a mariadb URL', () => 'mariadb://maria:maria-secret@maria.local:3307/queues', { host: 'maria.local:3307', pathname: '/queues', protocol: 'mariadb' }],
    ['an sqlite file URL', () => 'sqlite:./data/queue.db', { host: 'localhost', pathname: './data/queue.db', protocol: 'sqlite' }],
    ['an sqlite memory URL', () => 'sqlite::memory:', { host: 'localhost', pathname: ':memory:', protocol: 'sqlite' }],
  ];

  it.each(databases)('describes every declared queue of a broker on %s, and the parser accepts it', async (_, database, server) => {
    const broker = new Broker({ database: database() });
    declareEverything(broker);
    const document = broker.asyncapi({ title: 'Shop', version: '2.1.0', description: 'The shop service', publishes: [leaseJobs.queue('emails')] });

    expect(document.info).toEqual({ title: 'Shop', version: '2.1.0', description: 'The shop service' });
    expect(document.servers.database).toMatchObject(server);
    expect(Object.values(document.channels).map((channel) => channel.address)).toEqual([
      'app.jobs/emails',
      'app.jobs/emails-dead',
      'orders/any',
      'tasks',
      'archive.tasks_dead',
      'app.jobs/reports',
      'outbox',
    ]);
    expect(
      Object.fromEntries(Object.entries(document.operations).map(([id, operation]) => [id, `${operation.action} ${operation.channel.$ref}`])),
    ).toEqual({
      'receive_app.jobs_emails': 'receive #/channels/app.jobs_emails',
      'deadLetter_app.jobs_emails': 'send #/channels/app.jobs_emails-dead',
      receive_orders_any: 'receive #/channels/orders_any',
      receive_tasks: 'receive #/channels/tasks',
      deadLetter_tasks: 'send #/channels/archive.tasks_dead',
      schedule_nightly_report: 'send #/channels/app.jobs_reports',
      relay_outbox: 'receive #/channels/outbox',
      'send_app.jobs_emails': 'send #/channels/app.jobs_emails',
    });
    expect(document.channels['orders_any']!['x-tablequeue']).toEqual({
      table: 'orders',
      groupColumn: 'customer',
      fifo: true,
      group: 'any',
      claimForm: 'lease',
    });

    const model = await parsed(document);
    expect(model.channels().all().map((channel) => channel.address())).toContain('app.jobs/emails');
    expect(model.operations().filterByReceive().map((operation) => operation.id())).toEqual([
      'receive_app.jobs_emails',
      'receive_orders_any',
      'receive_tasks',
      'relay_outbox',
    ]);
  });

  // A service's own pools, which need their client libraries, are described in the conformance
  // suite (conformance/suites/asyncapi.suite.ts) on every stand.
  it('never writes a user or a password, nor any query parameter, of a URL', () => {
    for (const [, database] of databases) {
      const text = JSON.stringify(new Broker({ database: database() }).asyncapi());
      expect(text).not.toMatch(/secret|app_user|root|maria:|sslmode/);
    }
  });

  it('gives messages headers only where the table has a headers column, with the headers tablequeue writes', () => {
    const broker = new Broker({ database: 'sqlite::memory:' });
    declareEverything(broker);
    const { channels } = broker.asyncapi();
    const headersOf = (id: string): unknown => channels[id]!.messages[id]!.headers;
    expect(headersOf('orders_any')).toBeUndefined();
    expect(headersOf('tasks')).toBeUndefined();
    expect(headersOf('app.jobs_emails')).toMatchObject({ type: 'object', additionalProperties: { type: 'string' } });
    const names = (id: string): string[] => Object.keys((headersOf(id) as { properties: object }).properties);
    expect(names('app.jobs_emails')).toEqual(['traceparent', 'tracestate', 'tablequeue-timeout-ms']);
    expect(names('app.jobs_emails-dead')).toContain('tablequeue-last-error');
    expect(names('app.jobs_reports')).toContain('tablequeue-scheduled-at');
  });

  it("takes a subscription's payload schema from the Standard JSON Schema of its validator, as draft-07", async () => {
    const validator = standardJsonSchemaValidator({
      type: 'object',
      properties: { to: { type: 'string', format: 'email' }, subject: { type: 'string' } },
      required: ['to'],
    });
    const broker = new Broker({ database: 'sqlite::memory:' });
    broker.subscribe(leaseJobs.queue('emails'), () => undefined, { decode: validator, maxAttempts: 2, deadLetter: 'emails-dead' });
    const document = broker.asyncapi();

    const payload = document.channels['app.jobs_emails']!.messages['app.jobs_emails']!.payload;
    expect(payload).toEqual({
      type: 'object',
      properties: { to: { type: 'string', format: 'email' }, subject: { type: 'string' } },
      required: ['to'],
    });
    expect((validator as unknown as { asked: unknown[] }).asked[0]).toEqual({ target: 'draft-07' });
    // The dead letters carry the same payload bytes.
    expect(document.channels['app.jobs_emails-dead']!.messages['app.jobs_emails-dead']!.payload).toEqual(payload);
    const model = await parsed(document);
    const message = model.messages().all().find((candidate) => candidate.name() === 'app.jobs_emails');
    expect(message?.payload()?.required()).toEqual(['to']);
  });

  it('rebases the local references of a recursive schema to where the payload sits in the document', async () => {
    const tree = standardJsonSchemaValidator({
      $ref: '#/definitions/Node',
      definitions: { Node: { type: 'object', properties: { children: { type: 'array', items: { $ref: '#/definitions/Node' } } } } },
    });
    const broker = new Broker({ database: 'sqlite::memory:' });
    broker.subscribe(plainTasks.queue('tasks'), () => undefined, { decode: tree });
    const document = broker.asyncapi();
    expect(document.channels.tasks!.messages.tasks!.payload).toMatchObject({ $ref: '#/channels/tasks/messages/tasks/payload/definitions/Node' });
    await parsed(document);
  });

  it("uses a validator's toJSONSchema() and the toJsonSchema option, and says why a payload has no schema", async () => {
    const withMethod = Object.assign(Object.create(null) as object, {
      '~standard': { version: 1, vendor: 'method', validate: (value: unknown) => ({ value }) },
      toJSONSchema: () => ({ type: 'integer' }),
    }) as StandardSchemaV1;
    const broker = new Broker({ database: 'sqlite::memory:' });
    broker.subscribe(leaseJobs.queue('counts'), () => undefined, { decode: withMethod });
    broker.subscribe(leaseJobs.queue('opaque'), () => undefined, { decode: opaqueValidator });
    broker.subscribe(leaseJobs.queue('bytes'), () => undefined, { decode: (raw: Buffer) => raw.toString('hex') });
    broker.subscribe(leaseJobs.queue('failing'), () => undefined, {
      decode: { '~standard': { ...opaqueValidator['~standard'], jsonSchema: { input: () => { throw new Error('dates have no JSON Schema'); } } } } as StandardSchemaV1,
    });

    const messageOf = (document: AsyncApiDocument, id: string) => document.channels[id]!.messages[id]!;
    const plain = broker.asyncapi();
    expect(messageOf(plain, 'app.jobs_counts').payload).toEqual({ type: 'integer' });
    expect(messageOf(plain, 'app.jobs_opaque').payload).toBeUndefined();
    expect(messageOf(plain, 'app.jobs_opaque').summary).toMatch(/opaque validator offers no JSON Schema/);
    expect(messageOf(plain, 'app.jobs_bytes')).toMatchObject({ contentType: 'application/octet-stream' });
    expect(messageOf(plain, 'app.jobs_failing').summary).toMatch(/failed: dates have no JSON Schema/);
    await parsed(plain);

    const converted = broker.asyncapi({ toJsonSchema: (validator) => (validator['~standard'].vendor === 'opaque' ? { type: 'string' } : undefined) });
    expect(messageOf(converted, 'app.jobs_opaque').payload).toEqual({ type: 'string' });
    expect(messageOf(converted, 'app.jobs_counts').payload).toEqual({ type: 'integer' });
  });

  it('lists the queues given as publishes, with their validators', async () => {
    const broker = new Broker({ database: 'sqlite::memory:' });
    const document = broker.asyncapi({
      publishes: [plainTasks.queue('tasks'), { queue: leaseJobs.queue('emails'), payload: standardJsonSchemaValidator({ type: 'string' }), description: 'Welcome emails' }],
    });
    expect(document.operations).toMatchObject({
      send_tasks: { action: 'send' },
      'send_app.jobs_emails': { action: 'send', description: 'Welcome emails' },
    });
    expect(document.channels['app.jobs_emails']!.messages['app.jobs_emails']!.payload).toEqual({ type: 'string' });
    await parsed(document);
  });

  it('keeps channel ids apart when two addresses read alike', () => {
    const dotted = defineTable({ table: 'a', schema: 'x', id: 'id', group: 'g' });
    const plain = defineTable({ table: 'x', id: 'id', group: 'g' });
    const broker = new Broker({ database: 'sqlite::memory:' });
    broker.subscribe(dotted.queue('b'), () => undefined);
    broker.subscribe(plain.queue('a.b'), () => undefined);
    expect(Object.keys(broker.asyncapi().channels)).toEqual(['x.a_b', 'x_a.b']);
    const colliding = new Broker({ database: 'sqlite::memory:' });
    colliding.subscribe(plain.queue('a b'), () => undefined);
    colliding.subscribe(plain.queue('a/b'), () => undefined);
    expect(Object.keys(colliding.asyncapi().channels)).toEqual(['x_a_b', 'x_a_b-2']);
  });

  it('refuses options it does not know, with what it takes', () => {
    const broker = new Broker({ database: 'sqlite::memory:' });
    expect(() => broker.asyncapi({ titel: 'x' } as never)).toThrow(DeclarationError);
    expect(() => broker.asyncapi({ publishes: ['jobs'] } as never)).toThrow(/each of publishes is a queue/);
    expect(() => broker.asyncapi({ publishes: [{ queue: plainTasks.queue('tasks'), payload: {} }] } as never)).toThrow(/Standard Schema/);
  });
});
