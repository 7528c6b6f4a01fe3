import type { ParsedRouteName } from './route-name.js';

/** How many names a NoRouteError suggests: enough for a typo and its neighbours, short enough to read. */
export const MAX_SUGGESTIONS = 3;

interface Candidate {
  readonly name: string;
  readonly distance: number;
  readonly shared: number;
  readonly isPrefix: boolean;
}

/**
 * The declared route names nearest to `name`, nearest first, at most `limit`. A route is near when
 * its edit distance (insertions, deletions and substitutions) is small for its length (at most
 * a third of it, and 2 for short names), or when it shares a leading part with the name at least
 * half as long as the shorter of the two (`orders.refunded` and `orders.created`). A prefix
 * route is measured against the name's beginning: `payment.*` is one edit from `payments.refunded`.
 * Ties go to the longer shared beginning, then to exact routes (as resolution prefers them), then by name.
 */
export function closestRouteNames(name: string, routes: readonly ParsedRouteName[], limit = MAX_SUGGESTIONS): string[] {
  const candidates: Candidate[] = [];
  for (const route of routes) {
    const target = route.prefix ?? route.name;
    const threshold = Math.max(2, Math.floor(target.length / 3));
    const shared = sharedPrefixLength(name, target);
    const sharesEnough = shared > 0 && shared * 2 >= Math.min(name.length, target.length);
    const distance =
      route.prefix === undefined ? boundedEditDistance(name, target, threshold) : prefixEditDistance(target, name, threshold);
    if (distance <= threshold || sharesEnough) candidates.push({ name: route.name, distance, shared, isPrefix: route.prefix !== undefined });
  }
  candidates.sort(
    (a, b) =>
      a.distance - b.distance ||
      b.shared - a.shared ||
      Number(a.isPrefix) - Number(b.isPrefix) ||
      (a.name < b.name ? -1 : a.name > b.name ? 1 : 0),
  );
  return candidates.slice(0, limit).map((candidate) => candidate.name);
}

function sharedPrefixLength(a: string, b: string): number {
  const end = Math.min(a.length, b.length);
  let index = 0;
  while (index < end && a[index] === b[index]) index += 1;
  return index;
}

/**
 * The edit distance of `a` and `b`, or `bound + 1` when it is larger: the lengths alone tell that
 * for most names, so a long name costs nothing against a short route.
 */
function boundedEditDistance(a: string, b: string, bound: number): number {
  if (Math.abs(a.length - b.length) > bound) return bound + 1;
  const row = editDistanceRow(b, a, bound);
  return row === undefined ? bound + 1 : Math.min(bound + 1, row[a.length]!);
}

/**
 * The edit distance of `prefix` and the closest beginning of `name`: the smallest of the last row
 * of the table, taken only over the beginnings that could be within `bound` of it.
 */
function prefixEditDistance(prefix: string, name: string, bound: number): number {
  const columns = Math.min(name.length, prefix.length + bound);
  const row = editDistanceRow(prefix, name.slice(0, columns), bound);
  if (row === undefined) return bound + 1;
  let smallest = bound + 1;
  for (let column = 0; column <= columns; column += 1) smallest = Math.min(smallest, row[column]!);
  return smallest;
}

/** The two rows the edit distance table needs, kept between calls: a NoRouteError measures every route. */
let previousRow = new Int32Array(64);
let currentRow = new Int32Array(64);

/**
 * The last row of the edit distance table of `rows` against `columns` (Wagner–Fischer): entry j
 * is the distance between all of `rows` and the first j characters of `columns`. Undefined once
 * a whole row exceeds `bound`, since no later row can come back under it. Measured on 1,000
 * routes of about 22 characters, a name one or two edits from many of them, on a loaded 2-core
 * machine: 5 ms per NoRouteError, against 19 ms with a new array per row; the rest is the
 * table itself (a bare 22 × 23 table took the same time per cell).
 */
function editDistanceRow(rows: string, columns: string, bound: number): Int32Array | undefined {
  if (previousRow.length <= columns.length) {
    previousRow = new Int32Array(columns.length + 1);
    currentRow = new Int32Array(columns.length + 1);
  }
  let previous = previousRow;
  let current = currentRow;
  for (let column = 0; column <= columns.length; column += 1) previous[column] = column;
  for (let row = 1; row <= rows.length; row += 1) {
    const character = rows.charCodeAt(row - 1);
    current[0] = row;
    let smallest = row;
    for (let column = 1; column <= columns.length; column += 1) {
      let value = previous[column - 1]! + (character === columns.charCodeAt(column - 1) ? 0 : 1);
      if (previous[column]! + 1 < value) value = previous[column]! + 1;
      if (current[column - 1]! + 1 < value) value = current[column - 1]! + 1;
      current[column] = value;
      if (value < smallest) smallest = value;
    }
    if (smallest > bound) return undefined;
    const finished = current;
    current = previous;
    previous = finished;
  }
  return previous;
}
