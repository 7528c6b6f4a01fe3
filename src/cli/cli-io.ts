import type { OutputStream } from './terminal-output.js';

/**
 * Where a command writes and the environment it reads the database URL and NO_COLOR from: the
 * process's own when run as `tablequeue`, a test's when `runCli` runs in the test's process.
 */
export interface CliIo {
  readonly stdout: OutputStream;
  readonly stderr: OutputStream;
  readonly env: Readonly<Record<string, string | undefined>>;
}

export function processIo(): CliIo {
  return { stdout: process.stdout, stderr: process.stderr, env: process.env };
}

/** `text` and a newline, as `console.log` would write it. */
export function writeLine(stream: OutputStream, text: string): void {
  stream.write(`${text}\n`);
}
