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
describe('tablequeue command line', { timeout: 60_000 }, () => {
  it('answers --help on every command with exit code 0', async () => {
    const commands = ['init', 'stats', 'peek', 'requeue', 'purge', 'demo'];
    const results = await Promise.all([['--help'], ...commands.map((command) => [command, '--help'])].map((args) => runCli(args)));
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

  it('reads the database URL from DATABASE_URL, or the variable --database-env names, when --database is absent', async () => {
    const [fromDefault, fromNamed, missingDefault, missingNamed, both] = await Promise.all([
      runCli(['init', '--table', 'jobs', '--print'], { DATABASE_URL: 'mariadb://app:s3cret@nowhere.invalid/db' }),
      runCli(['init', '--database-env', 'QUEUE_DB', '--table', 'jobs', '--print'], { QUEUE_DB: 'postgres://app:s3cret@nowhere.invalid/db' }),
      runCli(['stats', '--table', 'jobs']),
      runCli(['peek', '--database-env', 'QUEUE_DB', '--table', 'jobs'], { DATABASE_URL: 'postgres://nowhere.invalid/db' }),
      runCli(['purge', '--database', 'sqlite::memory:', '--database-env', 'QUEUE_DB', '--table', 'jobs']),
    ]);
    expect(fromDefault.code).toBe(0);
    expect(fromDefault.stdout).toMatch(/ENGINE=InnoDB/);
    expect(fromNamed.code).toBe(0);
    expect(fromNamed.stdout).toMatch(/CREATE TABLE "jobs"/);
    expect(missingDefault.code).toBe(2);
    expect(missingDefault.stderr).toMatch(/stats needs --database URL, or the URL in the environment variable DATABASE_URL, which is not set/);
    expect(missingNamed.code).toBe(2);
    expect(missingNamed.stderr).toMatch(/environment variable QUEUE_DB, which is not set/);
    expect(both.code).toBe(2);
    expect(both.stderr).toMatch(/--database or --database-env, not both/);
  });

  it('says in --help where the database URL comes from without --database', async () => {
    const results = await Promise.all([['--help'], ...['init', 'stats', 'peek', 'requeue', 'purge', 'dashboard'].map((command) => [command, '--help'])].map((args) => runCli(args)));
    for (const result of results) {
      expect(result.stdout).toMatch(/\$DATABASE_URL/);
      expect(result.stdout).toMatch(/--database-env/);
    }
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
