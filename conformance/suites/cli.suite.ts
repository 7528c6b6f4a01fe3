import { describe, expect, it } from 'vitest';
import { runCliHere } from '../../src/cli/run-cli.fixture.js';
import { Broker, defineTable } from '../../src/index.js';
import { Collector } from '../fixtures.js';
import type { SuiteContext } from '../run-conformance.js';

/** The `tablequeue` command line against each database. */
export function cliSuite(context: SuiteContext): void {
  const { stand } = context;
  // The command runs in a process of its own: it needs a database another process can open.
  if (!stand.capabilities.supportsProcesses) return;
  describe('tablequeue init', () => {
    it('creates a table a broker can use, and --print shows the SQL instead', async () => {
      const url = context.db.url!;
      const printed = await runCliHere(['init', '--database', url, '--table', 'cli_jobs', '--lease', '--print']);
      expect(printed.code).toBe(0);
      expect(printed.stdout).toMatch(/CREATE TABLE/);

      const created = await runCliHere(['init', '--database', url, '--table', 'cli_jobs', '--lease']);
      expect(created.stderr).toBe('');
      expect(created.code).toBe(0);
      const table = defineTable({
        table: 'cli_jobs',
        id: 'id',
        group: 'queue',
        retryAfter: 'retry_after',
        attempt: 'attempt',
        lockedUntil: 'locked_until',
        headers: 'headers',
        payload: 'payload',
      });
      const broker = new Broker({ database: url, pollIntervalMs: 50 });
      const seen = new Collector<unknown>();
      broker.subscribe(table.queue('q'), (message) => void seen.push(message.payload));
      await broker.start();
      await broker.publish(table.queue('q'), { made: 'by init' });
      await seen.waitFor(1);
      await broker.stop();
      expect(seen.items).toEqual([{ made: 'by init' }]);
    });

    it('refuses a table that exists with exit code 1 naming --if-not-exists, which leaves it as it is', async () => {
      const url = context.db.url!;
      const created = await runCliHere(['init', '--database', url, '--table', 'cli_twice', '--lease']);
      expect(created.code).toBe(0);
      const [again, kept] = await Promise.all([
        runCliHere(['init', '--database', url, '--table', 'cli_twice', '--lease']),
        runCliHere(['init', '--database', url, '--table', 'cli_twice', '--lease', '--if-not-exists']),
      ]);
      expect(again.code).toBe(1);
      expect(again.stderr).toMatch(/table "cli_twice" already exists on .*; nothing was changed \(--if-not-exists leaves an existing table as it is and exits 0\)/);
      expect(kept.stderr).toBe('');
      expect(kept.code).toBe(0);
      expect(kept.stdout).toMatch(/table "cli_twice" already exists on .*; left as it is/);
    });

    it('names the server as it reports itself: MariaDB as mariadb, whichever of mysql:// and mariadb:// the URL says', async () => {
      const url = context.db.url!;
      let urls = [url];
      let server = /^postgres(ql)?:/.test(url) ? 'postgres at ' : 'sqlite file ';
      if (/^(mysql|mariadb):/.test(url)) {
        urls = ['mysql:', 'mariadb:'].map((scheme) => url.replace(/^[a-z]+:/, scheme));
        const [row] = await context.db.query<{ version: string }>('SELECT VERSION() AS version');
        server = /mariadb/i.test(String(row?.version)) ? 'mariadb at ' : 'mysql at ';
      }
      const results = await Promise.all(urls.map((database) => runCliHere(['stats', '--database', database, '--table', 'no_such_jobs'])));
      for (const result of results) {
        expect(result.code).toBe(1);
        expect(result.stderr).toContain(`table "no_such_jobs" cannot be read on ${server}`);
      }
    });

    if (stand.kind === 'sqlite') {
      it('refuses a row-lock table on SQLite with exit code 1 and says to add the lease', async () => {
        const rowLock = await runCliHere(['init', '--database', context.db.url!, '--table', 'jobs']);
        expect(rowLock.code).toBe(1);
        expect(rowLock.stderr).toMatch(/lockedUntil/);
      });
    }
  });
}
