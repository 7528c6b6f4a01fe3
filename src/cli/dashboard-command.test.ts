import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const CLI = fileURLToPath(new URL('./cli.ts', import.meta.url));

/** Runs the command with `environment` added to this process's, less any DATABASE_URL of the machine's own. */
function runCli(args: string[], environment: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  const { DATABASE_URL: _ignored, ...inherited } = process.env;
  return new Promise((resolve) => {
    execFile(process.execPath, ['--import', 'tsx', CLI, ...args], { env: { ...inherited, ...environment } }, (error, stdout, stderr) => {
      resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr });
    });
  });
}

// Each case starts Node with the TypeScript loader: about a second apiece on 2 cores.
describe('tablequeue dashboard command line', { timeout: 60_000 }, () => {
  it('answers --help with exit code 0 and names the security choices', async () => {
    const help = await runCli(['dashboard', '--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/usage: tablequeue dashboard/);
    expect(help.stdout).toMatch(/--allow-actions/);
    expect(help.stdout).toMatch(/default 127\.0\.0\.1/);
    expect(help.stdout).toMatch(/--allowed-host NAME/);
    expect(help.stdout).toMatch(/With --host 0\.0\.0\.0 or :: the address names no host/);
    const overview = await runCli(['--help']);
    expect(overview.stdout).toMatch(/dashboard {3}serve a web page/);
  });

  it('exits 2 on bad usage and 1 when the database cannot be opened', async () => {
    const [noDatabase, noTable, bothDeadLetters, badPort, unknownFlag, missingFile, badAllowedHost] = await Promise.all([
      runCli(['dashboard', '--table', 'jobs']),
      runCli(['dashboard', '--database', 'sqlite::memory:']),
      runCli(['dashboard', '--database', 'sqlite::memory:', '--table', 'jobs', '--dead-letter-group', 'dead', '--dead-letter-table', 'dead_jobs']),
      runCli(['dashboard', '--database', 'sqlite::memory:', '--table', 'jobs', '--port', 'eighty']),
      runCli(['dashboard', '--database', 'sqlite::memory:', '--table', 'jobs', '--open-browser']),
      runCli(['dashboard', '--database', 'sqlite::memory:', '--table', 'jobs', '--port', '0']),
      runCli(['dashboard', '--database', 'sqlite::memory:', '--table', 'jobs', '--allowed-host', 'https://dash.example']),
    ]);
    expect(noDatabase.code).toBe(2);
    expect(noDatabase.stderr).toMatch(/dashboard needs --database/);
    expect(noTable.code).toBe(2);
    expect(noTable.stderr).toMatch(/at least one --table/);
    expect(bothDeadLetters.code).toBe(2);
    expect(bothDeadLetters.stderr).toMatch(/not both/);
    expect(badPort.code).toBe(2);
    expect(unknownFlag.code).toBe(2);
    expect(missingFile.code).toBe(1);
    expect(missingFile.stderr).toMatch(/table "jobs" cannot be read/);
    expect(badAllowedHost.code).toBe(2);
    expect(badAllowedHost.stderr).toMatch(/--allowed-host takes a host name or address/);
  });
});
