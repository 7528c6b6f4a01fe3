import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: 'unit',
          include: ['src/**/*.test.ts'],
        },
      },
      {
        test: {
          name: 'conformance',
          include: ['conformance/**/*.test.ts'],
          testTimeout: 60_000,
          hookTimeout: 60_000,
          // Each database file runs in its own fork; the suites inside one file run in order
          // so that timing-sensitive tests (leases, wake-ups) do not compete for the 2 cores.
          pool: 'forks',
        },
      },
    ],
  },
});
