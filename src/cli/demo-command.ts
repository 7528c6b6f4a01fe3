import { parseArgs } from 'node:util';
import { DEMO_FLAGS } from './command-flags.js';
import { runDemo } from './demo.js';
import { positiveInteger } from './usage-error.js';
import { writeLine, type CliIo } from './cli-io.js';

const DEMO_USAGE = `usage: tablequeue demo [--file PATH] [--messages N] [--workers N]

  --file PATH      the SQLite queue file to create (default: a new file in the system's temp folder)
  --messages N     messages to publish (default 20000)
  --workers N      workers draining them (default 8)`;

export async function runDemoCommand(args: string[], io: CliIo): Promise<number> {
  const { values } = parseArgs({
    args,
    options: DEMO_FLAGS,
    strict: true,
  });
  if (values.help) {
    writeLine(io.stdout, DEMO_USAGE);
    return 0;
  }
  await runDemo({
    file: values.file,
    messages: positiveInteger(values.messages ?? '20000', '--messages'),
    workers: positiveInteger(values.workers ?? '8', '--workers'),
    output: io.stdout,
  });
  return 0;
}
