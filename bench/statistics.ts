/** The middle value (the mean of the two middle values for an even count); undefined when empty. */
export function median(values: readonly number[]): number | undefined {
  if (values.length === 0) return undefined;
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle] : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

/** The smallest and largest value; undefined when empty. */
export function spread(values: readonly number[]): { min: number; max: number } | undefined {
  if (values.length === 0) return undefined;
  return { min: Math.min(...values), max: Math.max(...values) };
}

/**
 * The nearest-rank percentile: the smallest value that at least `percent` % of the values do not
 * exceed (p50 of 2,000 values is the 1,000th smallest, p99 the 1,980th); undefined when empty.
 */
export function percentile(values: readonly number[], percent: number): number | undefined {
  if (values.length === 0) return undefined;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.max(1, Math.ceil((percent / 100) * sorted.length));
  return sorted[rank - 1];
}
