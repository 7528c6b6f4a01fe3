import { describe, expect, it } from 'vitest';
import { runCliHere } from './run-cli.fixture.js';

describe('tablequeue dashboard command line', () => {
  it('answers --help with exit code 0 and names the security choices', async () => {
    const help = await runCliHere(['dashboard', '--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/usage: tablequeue dashboard/);
    expect(help.stdout).toMatch(/--allow-actions/);
    expect(help.stdout).toMatch(/default 127\.0\.0\.1/);
    expect(help.stdout).toMatch(/--allowed-host NAME/);
    expect(help.stdout).toMatch(/With --host 0\.0\.0\.0 or :: the address names no host/);
    const overview = await runCliHere(['--help']);
    expect(overview.stdout).toMatch(/dashboard {3}serve a web page/);
  });

  it('exits 2 on bad usage and 1 when the database cannot be opened', async () => {
    const [noDatabase, noTable, bothDeadLetters, badPort, unknownFlag, missingFile, badAllowedHost] = await Promise.all([
      runCliHere(['dashboard', '--table', 'jobs']),
      runCliHere(['dashboard', '--database', 'sqlite::memory:']),
      runCliHere(['dashboard', '--database', 'sqlite::memory:', '--table', 'jobs', '--dead-letter-group', 'dead', '--dead-letter-table', 'dead_jobs']),
      runCliHere(['dashboard', '--database', 'sqlite::memory:', '--table', 'jobs', '--port', 'eighty']),
      runCliHere(['dashboard', '--database', 'sqlite::memory:', '--table', 'jobs', '--open-browser']),
      runCliHere(['dashboard', '--database', 'sqlite::memory:', '--table', 'jobs', '--port', '0']),
      runCliHere(['dashboard', '--database', 'sqlite::memory:', '--table', 'jobs', '--allowed-host', 'https://dash.example']),
    ]);
    expect(noDatabase.code).toBe(2);
    expect(noDatabase.stderr).toMatch(/dashboard needs --database/);
    expect(noTable.code).toBe(2);
    expect(noTable.stderr).toMatch(/at least one --table/);
    expect(bothDeadLetters.code).toBe(2);
    expect(bothDeadLetters.stderr).toMatch(/both say where the dead letters of every table are; give one/);
    expect(badPort.code).toBe(2);
    expect(unknownFlag.code).toBe(2);
    expect(missingFile.code).toBe(1);
    expect(missingFile.stderr).toMatch(/table "jobs" cannot be read/);
    expect(badAllowedHost.code).toBe(2);
    expect(badAllowedHost.stderr).toMatch(/--allowed-host takes a host name or address/);
  });
});
