#!/usr/bin/env node
import { parseArgs } from 'node:util';
import { runDemo } from './demo.js';

const USAGE = `usage: tablequeue <command> [options]

commands:
  demo        publish 20,000 messages into an SQLite queue file and drain them with several workers

run "tablequeue <command> --help" for a command's options`;

const DEMO_USAGE = `usage: tablequeue demo [--file PATH] [--messages N] [--workers N]

  --file PATH      the SQLite queue file to create (default: a new file in the system's temp folder)
  --messages N     messages to publish (default 20000)
  --workers N      workers draining them (default 8)`;

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === undefined || command === '--help' || command === '-h' || command === 'help') {
    console.log(USAGE);
    return command === undefined ? 2 : 0;
  }
  if (command === 'demo') {
    const { values } = parseArgs({
      args: rest,
      options: {
        file: { type: 'string' },
        messages: { type: 'string' },
        workers: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
      strict: true,
    });
    if (values.help) {
      console.log(DEMO_USAGE);
      return 0;
    }
    await runDemo({
      file: values.file,
      messages: positiveInteger(values.messages ?? '20000', '--messages'),
      workers: positiveInteger(values.workers ?? '8', '--workers'),
      output: process.stdout,
    });
    return 0;
  }
  console.error(`tablequeue: unknown command "${command}"\n\n${USAGE}`);
  return 2;
}

function positiveInteger(text: string, flag: string): number {
  const value = Number(text);
  if (!Number.isInteger(value) || value < 1) throw new UsageError(`${flag} must be a whole number of at least 1`);
  return value;
}

class UsageError extends Error {}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    console.error(`tablequeue: ${error instanceof Error ? error.message : String(error)}`);
    process.exitCode = error instanceof UsageError || (error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS') ? 2 : 1;
  },
);
