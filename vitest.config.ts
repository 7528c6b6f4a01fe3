import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    // Two files at a time, whatever the core count: Vitest's default on a two-core machine is one
    // (cores − 1), and the database files spend most of their time waiting on servers, timers
    // and child processes. On two cores the whole run took 1,057 s one file at a time on a quiet
    // machine, and 807 s two at a time while other work kept the load average near 10.
    maxWorkers: 2,
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
