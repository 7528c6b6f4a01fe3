import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { pathToFileURL } from 'node:url';
import type { AsyncApiDocument } from '../asyncapi/asyncapi-document.js';
import type { AsyncApiOptions } from '../asyncapi/describe-broker.js';
import { writeLine, type CliIo } from './cli-io.js';
import { ASYNCAPI_FLAGS } from './command-flags.js';
import { UsageError } from './usage-error.js';

const USAGE = `usage: tablequeue asyncapi --module ./broker.js [--export NAME] [options]

Prints the AsyncAPI 3.0.0 document of a broker as JSON: a channel per queue it subscribes to,
schedules into, dead-letters into or relays, the operations on each, message headers and payload
schemas (from Standard Schema validators that give JSON Schema), and the database as the server,
without user or password. The module is imported, so it should declare the broker without
starting it; nothing connects to the database. Queues the service only publishes to are listed
by broker.asyncapi({ publishes }) in code, which this command cannot see.

  --module PATH             the module that exports the broker (a path from here, or a file: URL)
  --export NAME             the export that is the broker; default: the default export, or else
                            the module's only export that is a broker
  --title TEXT              info.title of the document (default "tablequeue queues")
  --api-version TEXT        info.version, the version of the service's interface (default 1.0.0)
  --description TEXT        info.description
  -h, --help                this help`;

/** What the command needs of a broker, by shape: the module may load another copy of tablequeue. */
interface DescribableBroker {
  asyncapi(options?: AsyncApiOptions): AsyncApiDocument;
}

export async function runAsyncApiCommand(args: string[], io: CliIo): Promise<number> {
  const { values } = parseArgs({ args, options: ASYNCAPI_FLAGS, strict: true });
  if (values.help) {
    writeLine(io.stdout, USAGE);
    return 0;
  }
  if (values.module === undefined) throw new UsageError(`asyncapi needs --module PATH, the module that exports the broker\n\n${USAGE}`);
  const specifier = values.module.startsWith('file:') ? values.module : pathToFileURL(resolve(values.module)).href;
  const exports = (await import(specifier)) as Record<string, unknown>;
  const broker = brokerOf(exports, values.export, values.module);
  const document = broker.asyncapi({
    ...(values.title === undefined ? {} : { title: values.title }),
    ...(values['api-version'] === undefined ? {} : { version: values['api-version'] }),
    ...(values.description === undefined ? {} : { description: values.description }),
  });
  writeLine(io.stdout, JSON.stringify(document, null, 2));
  return 0;
}

function brokerOf(exports: Record<string, unknown>, name: string | undefined, module: string): DescribableBroker {
  if (name !== undefined) {
    if (!(name in exports)) {
      throw new UsageError(`--export ${name}: ${module} has no such export; its exports are ${namesOf(exports)}`);
    }
    if (!isDescribable(exports[name])) throw new UsageError(`--export ${name}: that export of ${module} is not a tablequeue Broker`);
    return exports[name];
  }
  if (isDescribable(exports.default)) return exports.default;
  const brokers = Object.entries(exports).filter(([, value]) => isDescribable(value));
  if (brokers.length === 1) return brokers[0]![1] as DescribableBroker;
  throw new UsageError(
    brokers.length === 0
      ? `${module} exports no tablequeue Broker (its exports are ${namesOf(exports)}); export the broker it declares`
      : `${module} exports several brokers (${brokers.map(([key]) => key).join(', ')}); name one with --export`,
  );
}

function isDescribable(value: unknown): value is DescribableBroker {
  return typeof value === 'object' && value !== null && typeof (value as Partial<DescribableBroker>).asyncapi === 'function';
}

function namesOf(exports: Record<string, unknown>): string {
  const names = Object.keys(exports).sort();
  return names.length === 0 ? 'none' : names.join(', ');
}
