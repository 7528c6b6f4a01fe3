import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { initDeclaration } from './init-command.js';
import { runCliHere, type CliResult } from './run-cli.fixture.js';

const CLI = fileURLToPath(new URL('./cli.ts', import.meta.url));
const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** The installed command in a process of its own: for what only a process has, its exit code and signals. */
function spawnCli(args: string[]): Promise<CliResult> {
  const { DATABASE_URL: _ignored, ...inherited } = process.env;
  return new Promise((resolve) => {
    execFile(process.execPath, ['--import', 'tsx', CLI, ...args], { env: inherited }, (error, stdout, stderr) => {
      resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr });
    });
  });
}

describe('tablequeue as a process', { timeout: 60_000 }, () => {
  it('sets the exit code runCli returns and writes to its own stdout and stderr', async () => {
    const [help, unknown, missing] = await Promise.all([spawnCli(['--help']), spawnCli(['frobnicate']), spawnCli(['init', '--database', 'sqlite::memory:'])]);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/usage: tablequeue/);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/unknown command "frobnicate"/);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/init needs --table/);
  });
});

describe('tablequeue command line', () => {
  it('answers --help on every command with exit code 0', async () => {
    const commands = ['init', 'stats', 'peek', 'requeue', 'purge', 'demo'];
    const results = await Promise.all([['--help'], ...commands.map((command) => [command, '--help'])].map((args) => runCliHere(args)));
    for (const result of results) {
      expect(result.code).toBe(0);
      expect(result.stdout).toMatch(/usage: tablequeue/);
    }
  });

  it('exits 2 on bad usage and 1 on a failure, saying what to fix', async () => {
    const [unknown, missing, badUrl, badCount] = await Promise.all([
      runCliHere(['frobnicate']),
      runCliHere(['init', '--database', 'sqlite::memory:']),
      runCliHere(['init', '--database', 'oracle://x', '--table', 'jobs', '--print']),
      runCliHere(['demo', '--messages', 'lots']),
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
      runCliHere(['init', '--table', 'jobs', '--print'], { DATABASE_URL: 'mariadb://app:s3cret@nowhere.invalid/db' }),
      runCliHere(['init', '--database-env', 'QUEUE_DB', '--table', 'jobs', '--print'], { QUEUE_DB: 'postgres://app:s3cret@nowhere.invalid/db' }),
      runCliHere(['stats', '--table', 'jobs']),
      runCliHere(['peek', '--database-env', 'QUEUE_DB', '--table', 'jobs'], { DATABASE_URL: 'postgres://nowhere.invalid/db' }),
      runCliHere(['purge', '--database', 'sqlite::memory:', '--database-env', 'QUEUE_DB', '--table', 'jobs']),
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
    const results = await Promise.all([['--help'], ...['init', 'stats', 'peek', 'requeue', 'purge', 'dashboard'].map((command) => [command, '--help'])].map((args) => runCliHere(args)));
    for (const result of results) {
      expect(result.stdout).toMatch(/\$DATABASE_URL/);
      expect(result.stdout).toMatch(/--database-env/);
    }
  });

  it('prints the DDL for each database without connecting', async () => {
    const printed = await runCliHere(['init', '--database', 'mariadb://nowhere.invalid/db', '--table', 'jobs', '--print']);
    expect(printed.code).toBe(0);
    expect(printed.stdout).toMatch(/CREATE TABLE `jobs`/);
    expect(printed.stdout).toMatch(/ENGINE=InnoDB/);
  });

  it('init --dedupe-key adds the key column and its unique index', async () => {
    const printed = await runCliHere(['init', '--database', 'postgres://nowhere.invalid/db', '--table', 'jobs', '--lease', '--dedupe-key', '--print']);
    expect(printed.code).toBe(0);
    expect(printed.stdout).toMatch(/"dedupe_key" TEXT NULL/);
    expect(printed.stdout).toMatch(/CREATE UNIQUE INDEX "jobs_dedupe_key" ON "jobs" \("queue", "dedupe_key"\) WHERE "dedupe_key" IS NOT NULL/);
  });

  it('init --in-work-index indexes locked_until of a lease table, and is refused without --lease', async () => {
    const [lease, rowLock] = await Promise.all([
      runCliHere(['init', '--database', 'postgres://nowhere.invalid/db', '--table', 'jobs', '--lease', '--in-work-index', '--print']),
      runCliHere(['init', '--database', 'postgres://nowhere.invalid/db', '--table', 'jobs', '--in-work-index', '--print']),
    ]);
    expect(lease.code).toBe(0);
    expect(lease.stdout).toMatch(/CREATE INDEX "jobs_in_work" ON "jobs" \("queue", "locked_until"\) WHERE "locked_until" IS NOT NULL/);
    expect(rowLock.code).toBe(2);
    expect(rowLock.stderr).toMatch(/--in-work-index indexes locked_until, which only --lease adds/);
  });

  it('refuses operator commands written wrongly with exit code 2 before connecting', async () => {
    const url = 'postgres://nowhere.invalid/db';
    const [watch, column, both, neither] = await Promise.all([
      runCliHere(['stats', '--database', url, '--table', 'jobs', '--watch', '0']),
      runCliHere(['stats', '--database', url, '--table', 'jobs', '--column', 'colour=red']),
      runCliHere(['peek', '--database', url, '--table', 'jobs', '--dead-letter-group', 'd', '--dead-letter-table', 't']),
      runCliHere(['requeue', '--database', url, '--table', 'jobs', '--dead-letter-table', 'dead']),
    ]);
    expect(watch.code).toBe(2);
    expect(watch.stderr).toMatch(/--watch takes seconds/);
    expect(column.code).toBe(2);
    expect(column.stderr).toMatch(/--column takes ROLE=NAME/);
    expect(both.code).toBe(2);
    expect(neither.code).toBe(2);
    expect(neither.stderr).toMatch(/--id \(repeatable\) or --all/);
  });

  it('takes --pooler transaction or session, only with a PostgreSQL URL, and refuses it before connecting', async () => {
    const [mode, mysql, sqlite, schedules] = await Promise.all([
      runCliHere(['stats', '--database', 'postgres://nowhere.invalid/db', '--table', 'jobs', '--pooler', 'statement']),
      runCliHere(['peek', '--database', 'mysql://nowhere.invalid/db', '--table', 'jobs', '--pooler', 'transaction']),
      runCliHere(['pause', '--database', 'sqlite::memory:', '--table', 'jobs', '--pooler', 'session']),
      runCliHere(['schedules', '--pooler', 'transaction'], { DATABASE_URL: 'mariadb://nowhere.invalid/db' }),
    ]);
    expect(mode.code).toBe(2);
    expect(mode.stderr).toMatch(/--pooler takes the pooler's pool_mode, transaction or session; got "statement"/);
    for (const refused of [mysql, schedules]) {
      expect(refused.code).toBe(2);
      expect(refused.stderr).toMatch(/--pooler is for PostgreSQL through PgBouncer or a pooler like it, and the URL is a mysql one; remove --pooler/);
    }
    expect(sqlite.code).toBe(2);
    expect(sqlite.stderr).toMatch(/the URL is a sqlite one; remove --pooler/);
  });

  it('exits 2, the usage code, on peek --dead-letters without saying where the dead letters are', async () => {
    const result = await runCliHere(['peek', '--database', 'postgres://nowhere.invalid/db', '--table', 'jobs', '--dead-letters']);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/peek --dead-letters needs to know where the dead letters are: --dead-letter-group NAME or --dead-letter-table NAME/);
  });
});

describe('tablequeue init', () => {
  it("--lease makes the README Quickstart's table", () => {
    const quickstart = readFileSync(join(ROOT, 'examples', 'quickstart.ts'), 'utf8');
    const declared = /defineTable\(\{([^}]*)\}\)/.exec(quickstart)?.[1];
    expect(declared).toBeDefined();
    const roles = Object.fromEntries([...declared!.matchAll(/(\w+): '([^']+)'/g)].map(([, role, column]) => [role, column]));
    expect(initDeclaration({ table: roles['table']!, lease: true })).toEqual(roles);
  });
});

describe('tablequeue init and stats on an SQLite file', { timeout: 60_000 }, () => {
  const folder = mkdtempSync(join(tmpdir(), 'tablequeue-cli-'));
  afterAll(() => rmSync(folder, { recursive: true, force: true }));

  it('refuses a table that exists with exit code 1, and --if-not-exists leaves it as it is', async () => {
    const url = `sqlite:${join(folder, 'twice.db')}`;
    const first = await runCliHere(['init', '--database', url, '--table', 'jobs', '--lease']);
    expect(first.stderr).toBe('');
    expect(first.stdout).toMatch(/created jobs \(2 statements\)/);
    const [again, kept, otherLayout] = await Promise.all([
      runCliHere(['init', '--database', url, '--table', 'jobs', '--lease']),
      runCliHere(['init', '--database', url, '--table', 'jobs', '--lease', '--if-not-exists']),
      runCliHere(['init', '--database', url, '--table', 'jobs', '--lease', '--mark', '--if-not-exists']),
    ]);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/table "jobs" already exists on sqlite file .*twice\.db; nothing was changed \(--if-not-exists leaves an existing table as it is and exits 0\)/);
    expect(kept.stderr).toBe('');
    expect(kept.code).toBe(0);
    expect(kept.stdout).toMatch(/table "jobs" already exists on sqlite file .*; left as it is/);
    expect(otherLayout.code).toBe(0);
    expect(otherLayout.stdout).toMatch(/already exists on .* without "processed_at", which these flags would add; left as it is/);
  });

  /** Starts `stats --watch` and resolves once two snapshots are out; `exited` is its exit code, or the signal that ended it. */
  function watchStats(command: string, args: string[], environment: Record<string, string> = {}) {
    const child = spawn(command, args, { cwd: ROOT, detached: true, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...environment } });
    const exited = new Promise<number | string | null>((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal)));
    let stdout = '';
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const snapshots = new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (chunk: Buffer) => {
        stdout += chunk.toString();
        if (stdout.split('\n').filter((line) => line.startsWith('{')).length >= 2) resolve();
      });
      void exited.then(() => reject(new Error(`stats --watch exited before two snapshots: ${stderr}`)));
    });
    return { child, exited, snapshots };
  }

  it('stats --watch exits 0 on Ctrl-C when the signal comes again while it closes, as from a wrapper that passes it on', async () => {
    const url = `sqlite:${join(folder, 'watch.db')}`;
    expect((await runCliHere(['init', '--database', url, '--table', 'jobs', '--lease'])).code).toBe(0);
    const watch = watchStats(process.execPath, ['--import', 'tsx', CLI, 'stats', '--database', url, '--table', 'jobs', '--watch', '0.1', '--json']);
    await watch.snapshots;
    watch.child.kill('SIGINT');
    // npm passes the terminal's Ctrl-C on to its child, which already had it from the terminal:
    // the second comes a moment after the first, while the command closes.
    const again = setTimeout(() => watch.child.kill('SIGINT'), 1);
    try {
      expect(await watch.exited).toBe(0);
    } finally {
      clearTimeout(again);
    }
  });

  it('stats --watch through npx exits 0 on a Ctrl-C to its whole process group (npm running its commands with bash)', async () => {
    const url = `sqlite:${join(folder, 'npx.db')}`;
    expect((await runCliHere(['init', '--database', url, '--table', 'jobs', '--lease'])).code).toBe(0);
    // Node itself with tsx's loader, as the installed command runs: the tsx command line would put
    // a signal relay of its own in between.
    const watch = watchStats('npx', ['--no-install', 'node', '--import', 'tsx', CLI, 'stats', '--database', url, '--table', 'jobs', '--watch', '0.1', '--json'], {
      npm_config_script_shell: 'bash',
      npm_config_update_notifier: 'false',
    });
    await watch.snapshots;
    process.kill(-watch.child.pid!, 'SIGINT');
    expect(await watch.exited).toBe(0);
  });
});
