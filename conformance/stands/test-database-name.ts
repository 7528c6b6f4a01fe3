import { randomBytes } from 'node:crypto';

/** A fresh database name per test, so tests never share rows and leftovers are easy to spot. */
export function createTestDatabaseName(): string {
  return `tq_test_${randomBytes(6).toString('hex')}`;
}

/** The server URL with its database replaced. */
export function urlWithDatabase(serverUrl: string, database: string): string {
  const url = new URL(serverUrl);
  url.pathname = `/${database}`;
  return url.toString();
}
