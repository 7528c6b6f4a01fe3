import { defineConfig } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * The database files that take longest, longest first (in a run two files at a time at a load
 * average near 10: PostgreSQL 647 s, MariaDB 516 s, the SQLite file 157 s). A run lasts at least
 * as long as its longest file, and only about as long when the long ones start at once; Vitest's
 * own order without a cache (larger files first) reaches these small wrappers late.
 */
const LONGEST_FILES = ['postgres.conformance', 'mariadb.conformance', 'sqlite-file.conformance'];

class LongestFilesFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const rank = (file: TestSpecification) => {
      const found = LONGEST_FILES.findIndex((name) => file.moduleId.includes(`/${name}.test.ts`));
      return found === -1 ? LONGEST_FILES.length : found;
    };
    return (await super.sort(files)).sort((a, b) => rank(a) - rank(b));
  }
}

export default defineConfig({
  test: {
    // Two files at a time, whatever the core count: Vitest's default on a two-core machine is one
    // (cores − 1), and the database files spend most of their time waiting on servers, timers
    // and child processes. On two cores the whole run took 1,057 s one file at a time on a quiet
    // machine, and 807 s two at a time while other work kept the load average near 10.
    maxWorkers: 2,
    sequence: { sequencer: LongestFilesFirst },
    projects: [
      {
        test: {
          name: 'unit',
          include: ['src/**/*.test.ts'],
          // A few unit files run the TypeScript compiler over the sources (the CLI's flag hints,
          // the dashboard's page script): 2 to 3 s alone, past Vitest's 5 s default while a
          // database file runs beside them on a loaded two-core machine.
          testTimeout: 20_000,
        },
      },
      {
        test: {
          name: 'conformance',
          include: ['conformance/**/*.test.ts'],
          testTimeout: 60_000,
          hookTimeout: 60_000,
          // Each database file runs in its own fork; the suites inside one file run in order, so
          // at most two tests run at once and timing-sensitive ones (leases, wake-ups) are not
          // crowded by their own file.
          pool: 'forks',
        },
      },
    ],
  },
});
