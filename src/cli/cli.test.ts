import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const CLI = fileURLToPath(new URL('./cli.ts', import.meta.url));

function runCli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, ['--import', 'tsx', CLI, ...args], (error, stdout, stderr) => {
      resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr });
    });
  });
}

// Each case starts Node with the TypeScript loader: about a second apiece on 2 cores.
describe('tablequeue command line', { timeout: 60_000 }, () => {
  it('answers --help on every command with exit code 0', async () => {
    const commands = ['init', 'stats', 'peek', 'requeue', 'purge', 'demo'];
    const results = await Promise.all([['--help'], ...commands.map((command) => [command, '--help'])].map(runCli));
    for (const result of results) {
      expect(result.code).toBe(0);
      expect(result.stdout).toMatch(/usage: tablequeue/);
    }
  });

  it('exits 2 on bad usage and 1 on a failure, saying what to fix', async () => {
    const [unknown, missing, badUrl, badCount] = await Promise.all([
      runCli(['frobnicate']),
      runCli(['init', '--database', 'sqlite::memory:']),
      runCli(['init', '--database', 'oracle://x', '--table', 'jobs', '--print']),
      runCli(['demo', '--messages', 'lots']),
    ]);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/unknown command "frobnicate"/);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/init needs --table/);
    expect(badUrl.code).toBe(1);
    expect(badUrl.stderr).toMatch(/postgres:\/\//);
    expect(badCount.code).toBe(2);
  });

  it('prints the DDL for each database without connecting', async () => {
    const printed = await runCli(['init', '--database', 'mariadb://nowhere.invalid/db', '--table', 'jobs', '--print']);
    expect(printed.code).toBe(0);
    expect(printed.stdout).toMatch(/CREATE TABLE `jobs`/);
    expect(printed.stdout).toMatch(/ENGINE=InnoDB/);
  });

  it('refuses operator commands written wrongly with exit code 2 before connecting', async () => {
    const url = 'postgres://nowhere.invalid/db';
    const [watch, column, both, neither] = await Promise.all([
      runCli(['stats', '--database', url, '--table', 'jobs', '--watch', '0']),
      runCli(['stats', '--database', url, '--table', 'jobs', '--column', 'colour=red']),
      runCli(['peek', '--database', url, '--table', 'jobs', '--dead-letter-group', 'd', '--dead-letter-table', 't']),
      runCli(['requeue', '--database', url, '--table', 'jobs', '--dead-letter-table', 'dead']),
    ]);
    expect(watch.code).toBe(2);
    expect(watch.stderr).toMatch(/--watch takes seconds/);
    expect(column.code).toBe(2);
    expect(column.stderr).toMatch(/--column takes ROLE=NAME/);
    expect(both.code).toBe(2);
    expect(neither.code).toBe(2);
    expect(neither.stderr).toMatch(/--id \(repeatable\) or --all/);
  });
});
