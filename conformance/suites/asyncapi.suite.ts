import { DiagnosticSeverity, Parser } from '@asyncapi/parser';
import { describe, expect, it } from 'vitest';
import type { StandardSchemaV1 } from '../../src/index.js';
import { Collector, createBroker, createTable, jobsTable } from '../fixtures.js';
import type { SuiteContext } from '../run-conformance.js';
import { openServicePools } from './service-pools.js';

/** A validator with the Standard JSON Schema interface, and a validate that checks what it says. */
const emailValidator: StandardSchemaV1<unknown, { to: string }> = {
  '~standard': {
    version: 1,
    vendor: 'conformance',
    validate: (value) =>
      typeof (value as { to?: unknown } | null)?.to === 'string' ? { value: value as { to: string } } : { issues: [{ message: 'to must be text' }] },
    jsonSchema: {
      input: () => ({ type: 'object', properties: { to: { type: 'string' } }, required: ['to'] }),
      output: () => ({ type: 'object', properties: { to: { type: 'string' } }, required: ['to'] }),
    },
  } as StandardSchemaV1<unknown, { to: string }>['~standard'],
};

/** `broker.asyncapi()` of a started broker, from a URL and from each service pool of the stand. */
export function asyncapiSuite(context: SuiteContext): void {
  const { stand } = context;

  describe('asyncapi', () => {
    it('describes the queues a running broker reads, on its database from a URL or a service pool, as the AsyncAPI parser reads them', async () => {
      const table = jobsTable({ form: 'lease' });
      await createTable(stand, context.db, table);
      const pools = openServicePools(stand, context.db);
      const parser = new Parser();
      try {
        const targets = [
          { label: 'the database option', database: context.db.brokerDatabase as string | object },
          ...pools.map((pool) => ({ label: pool.label, database: pool.database })),
        ];
        for (const target of targets) {
          const handled = new Collector<string>();
          const broker = createBroker(context.db, context.brokers, { database: target.database });
          broker.subscribe(table.queue('emails'), (message) => void handled.push(message.payload.to), {
            decode: emailValidator,
            maxAttempts: 2,
            deadLetter: 'emails-dead',
          });
          await broker.start();
          // The channel the document names is the queue the broker reads.
          await broker.publish(table.queue('emails'), { to: 'ada@example.com' });
          expect(await handled.waitFor(1)).toEqual(['ada@example.com']);

          const document = broker.asyncapi({ publishes: [table.queue('emails')] });
          const text = JSON.stringify(document);
          expect(document.servers.database, target.label).toEqual(expectedServer(stand.kind, target.database));
          if (typeof target.database === 'string' && !target.database.startsWith('sqlite:')) {
            const url = new URL(target.database);
            if (url.password !== '') expect(text).not.toContain(url.password);
            if (url.username !== '') expect(text).not.toContain(`${url.username}@`);
          }
          expect(Object.values(document.channels).map((channel) => channel.address)).toEqual(['jobs/emails', 'jobs/emails-dead']);
          expect(document.channels['jobs_emails']!.messages['jobs_emails']!.payload).toEqual({
            type: 'object',
            properties: { to: { type: 'string' } },
            required: ['to'],
          });
          const parsed = await parser.parse(text);
          expect(parsed.diagnostics.filter((diagnostic) => diagnostic.severity === DiagnosticSeverity.Error)).toEqual([]);
          expect(parsed.document?.operations().all().map((operation) => `${operation.action()} ${operation.channels().all()[0]?.address()}`)).toEqual([
            'receive jobs/emails',
            'send jobs/emails-dead',
            'send jobs/emails',
          ]);
          await broker.stop();
        }
      } finally {
        for (const pool of pools) await pool.end();
      }
    });
  });
}

/** The server a broker over `database` describes: the URL's host, port and database name, or the protocol alone. */
function expectedServer(kind: string, database: string | object): Record<string, unknown> {
  if (typeof database !== 'string') {
    return expect.objectContaining({ host: '{host}', protocol: kind === 'postgres' ? 'postgresql' : kind }) as Record<string, unknown>;
  }
  if (database.startsWith('sqlite:')) {
    return expect.objectContaining({ host: 'localhost', pathname: database.slice('sqlite:'.length), protocol: 'sqlite' }) as Record<string, unknown>;
  }
  const url = new URL(database);
  const scheme = url.protocol.slice(0, -1);
  return expect.objectContaining({
    host: `${url.hostname}:${url.port || (kind === 'postgres' ? '5432' : '3306')}`,
    pathname: decodeURIComponent(url.pathname),
    protocol: scheme === 'postgres' ? 'postgresql' : scheme,
  }) as Record<string, unknown>;
}
