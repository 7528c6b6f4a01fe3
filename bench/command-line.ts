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
