/**
 * The smallest power of two at or above `count` (1 for 0). Statements rendered for a number of
 * rows are padded to it, so few texts are ever prepared.
 */
export function powerOfTwoAtLeast(count: number): number {
  let rounded = 1;
  while (rounded < count) rounded *= 2;
  return rounded;
}
