import { describe, it, type TestContext } from 'vitest';
import type { Stand, StandName } from './stand.js';
import { GALERA_URLS_VARIABLE } from './stands/galera-stand.js';
import { MARIADB_URL_VARIABLE } from './stands/mariadb-stand.js';
import { PGBOUNCER_SESSION_URL_VARIABLE, PGBOUNCER_TRANSACTION_URL_VARIABLE } from './stands/pgbouncer-stand.js';
import { POSTGRES_URL_VARIABLE } from './stands/postgres-stand.js';

/**
 * `REQUIRE_LIVE=1` (CI): a database, server or browser that the tests need and cannot reach fails
 * them, naming what to start or set; a test that skips in CI hides a failure. Without it they are
 * skipped, and each skip prints its reason.
 */
export function isLiveRequired(): boolean {
  return process.env['REQUIRE_LIVE'] === '1';
}

/** Where each server stand's URL comes from, for the message when it is unreachable. */
const URL_VARIABLES: Partial<Record<StandName, string>> = {
  postgres: POSTGRES_URL_VARIABLE,
  'pgbouncer-transaction': PGBOUNCER_TRANSACTION_URL_VARIABLE,
  'pgbouncer-session': PGBOUNCER_SESSION_URL_VARIABLE,
  mariadb: MARIADB_URL_VARIABLE,
  galera: GALERA_URLS_VARIABLE,
  mysql: 'MYSQL_URL',
};

/**
 * Registers `body` as `describe(name)` when `missing` is undefined. Otherwise `missing` says what
 * is absent and how to get it: the tests are skipped, with that reason printed and in the name
 * of the skipped block, or, under `REQUIRE_LIVE=1`, one test fails with it.
 */
export function describeWhenLive(name: string, missing: string | undefined, body: () => void): void {
  if (missing === undefined) {
    describe(name, body);
    return;
  }
  if (isLiveRequired()) {
    describe(name, () => {
      it('has what it needs (REQUIRE_LIVE=1)', () => {
        throw new Error(`${missing}; REQUIRE_LIVE=1 forbids skipping ${name}`);
      });
    });
    return;
  }
  console.warn(`skipping ${name}: ${missing}`);
  describe.skip(`${name} (skipped: ${missing})`, body);
}

/** The same inside a running test: skips it with `missing` printed, or fails it under `REQUIRE_LIVE=1`. */
export function skipTestWhenMissing(test: TestContext, missing: string | undefined): void {
  if (missing === undefined) return;
  if (isLiveRequired()) throw new Error(`${missing}; REQUIRE_LIVE=1 forbids skipping it`);
  console.warn(`skipping "${test.task.name}": ${missing}`);
  test.skip(missing);
}

/** Registers `registerSuites` for a stand whose database answers; see `describeWhenLive` for one that does not. */
export async function requireLive(stand: Stand, registerSuites: (stand: Stand) => void): Promise<void> {
  if (await stand.isReachable()) {
    registerSuites(stand);
    return;
  }
  const variable = URL_VARIABLES[stand.name];
  const missing =
    `the ${stand.name} stand is unreachable` +
    (variable === undefined ? '' : `: start its server or set ${variable} to a server that answers`);
  describeWhenLive(stand.name, missing, () => registerSuites(stand));
}
