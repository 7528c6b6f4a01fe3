/** A command line that cannot be run as written: exit code 2. */
export class UsageError extends Error {}

export function positiveInteger(text: string, flag: string): number {
  const value = Number(text);
  if (!Number.isInteger(value) || value < 1) throw new UsageError(`${flag} must be a whole number of at least 1`);
  return value;
}
