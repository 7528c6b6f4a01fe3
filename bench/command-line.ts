import { DEFAULT_MARIADB_URL, DEFAULT_POSTGRES_URL } from './bench-database.js';

/** A mistake in the command line: printed with the benchmark's usage. */
export class UsageError extends Error {}

export function readCount(text: string, flag: string, least: number): number {
  const value = Number(text);
  if (!Number.isInteger(value) || value < least) throw new UsageError(`${flag} takes whole numbers of at least ${least}; got "${text}"`);
  return value;
}

export function readList<Name extends string>(text: string, flag: string, known: readonly Name[]): Name[] {
  const items = text.split(',').map((item) => item.trim());
  for (const item of items) {
    if (!(known as readonly string[]).includes(item)) throw new UsageError(`${flag}: "${item}" is not one of ${known.join(', ')}`);
  }
  return items as Name[];
}

/** The servers the benchmarks use: POSTGRES_URL and MARIADB_URL, or the local defaults. */
export function serversFromEnvironment(): { postgresUrl: string; mariadbUrl: string } {
  return {
    postgresUrl: process.env.POSTGRES_URL ?? DEFAULT_POSTGRES_URL,
    mariadbUrl: process.env.MARIADB_URL ?? DEFAULT_MARIADB_URL,
  };
}

/** Ctrl-C ends the run in progress cleanly (its database is dropped) and keeps what was measured. */
export function interruptOnSigint(): AbortSignal {
  const interrupt = new AbortController();
  process.once('SIGINT', () => {
    console.error('interrupted: finishing the current run and dropping its database');
    interrupt.abort();
  });
  return interrupt.signal;
}
