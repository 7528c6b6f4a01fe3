import { describe, it } from 'vitest';
import type { Stand, StandName } from './stand.js';
import { MARIADB_URL_VARIABLE } from './stands/mariadb-stand.js';
import { POSTGRES_URL_VARIABLE } from './stands/postgres-stand.js';

/** Where each server stand's URL comes from, for the message when it is unreachable. */
const URL_VARIABLES: Partial<Record<StandName, string>> = {
  postgres: POSTGRES_URL_VARIABLE,
  mariadb: MARIADB_URL_VARIABLE,
  mysql: 'MYSQL_URL',
};

/**
 * Registers `registerSuites` for a stand whose database answers. An unreachable stand is skipped
 * with the reason logged, or, when `REQUIRE_LIVE=1` (CI), registers a test that fails naming the
 * stand and the variable its URL comes from: a database test that skips in CI hides a failure.
 */
export async function requireLive(stand: Stand, registerSuites: (stand: Stand) => void): Promise<void> {
  if (await stand.isReachable()) {
    registerSuites(stand);
    return;
  }
  const variable = URL_VARIABLES[stand.name];
  const reason =
    `the ${stand.name} stand is unreachable` +
    (variable === undefined ? '' : `: start its server or set ${variable} to a server that answers`);
  if (process.env['REQUIRE_LIVE'] === '1') {
    describe(stand.name, () => {
      it('is reachable (REQUIRE_LIVE=1)', () => {
        throw new Error(`${reason}; REQUIRE_LIVE=1 forbids skipping it`);
      });
    });
    return;
  }
  console.warn(`skipping ${stand.name}: ${reason}`);
  describe.skip(stand.name, () => registerSuites(stand));
}
