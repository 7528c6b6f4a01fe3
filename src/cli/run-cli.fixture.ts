import { runCli } from './run-cli.js';

export interface CliResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * Runs the command line in this process, as `tablequeue` would run it, with `environment` as its
 * whole environment (none of the machine's DATABASE_URL); what it writes is collected, as a pipe
 * would get it (no terminal, so no colours).
 */
export async function runCliHere(args: readonly string[], environment: Record<string, string> = {}): Promise<CliResult> {
  let stdout = '';
  let stderr = '';
  const code = await runCli(args, {
    stdout: { write: (text: string) => (stdout += text) },
    stderr: { write: (text: string) => (stderr += text) },
    env: environment,
  });
  return { code, stdout, stderr };
}
