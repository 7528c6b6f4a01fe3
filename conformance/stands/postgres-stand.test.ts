import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { requireLive } from '../require-live.js';
import type { TestDatabase } from '../stand.js';
import { postgresStand } from './postgres-stand.js';

await requireLive(postgresStand, (stand) => {
  describe('the postgres stand', () => {
    let db: TestDatabase;
    beforeEach(async () => {
      db = await stand.createDatabase();
    });
    afterEach(async () => {
      await db.drop();
    });

    it('runs admin queries that overlap on sessions of their own, and queries in turn on one', async () => {
      const sessionOf = async (sql: string) => Number((await db.query<{ pid: unknown }>(sql))[0]!.pid);
      const [slow, beside] = await Promise.all([
        sessionOf('SELECT pg_backend_pid() AS pid, pg_sleep(0.2)'),
        sessionOf('SELECT pg_backend_pid() AS pid'),
      ]);
      expect(beside).not.toBe(slow);
      expect(await sessionOf('SELECT pg_backend_pid() AS pid')).toBe(slow);
      expect(await sessionOf('SELECT pg_backend_pid() AS pid')).toBe(slow);
    });
  });
});
