/**
 * A dialect's renderings held against the built-in dialect it follows: what the broker checks of
 * a service's own dialect at `start()`, and what the dialect kit reports. The text of a statement
 * may differ (that is what a dialect of one's own is for); what the library relies on may not:
 * that it renders where the built-in does, in the same shape, under the same statement names,
 * with placeholders that match its declared parameters, and with the parameters the built-in
 * binds (the same names; as often, for statements rendered per row; in the same order, where the
 * library binds in placeholder order).
 */
import type { Statement } from '../statement.js';
import type { Dialect, DialectName } from './dialect.js';
import type { DialectRendering, Rendered, RenderedPart } from './dialect-renderings.js';
import { codeSpans } from './sql-code.js';

/** How one rendering of a dialect compares with the built-in's. */
export type RenderingOutcome =
  /** Neither renders; the library never asks. */
  | { readonly kind: 'refusedByBoth' }
  /** The dialect does not claim the capability the library asks it for. */
  | { readonly kind: 'notAsked' }
  /** Renders as the library needs; `differs` when any text differs from the built-in's. */
  | { readonly kind: 'conforms'; readonly differs: boolean }
  | { readonly kind: 'fails'; readonly problems: readonly string[] };

export function compareRendering(reference: Dialect, dialect: Dialect, rendering: DialectRendering): RenderingOutcome {
  if (rendering.needs !== undefined && !dialect.capabilities[rendering.needs]) return { kind: 'notAsked' };
  const expected = attempt(() => rendering.render(reference));
  const found = attempt(() => rendering.render(dialect));
  if ('error' in expected) {
    if ('error' in found) return { kind: 'refusedByBoth' };
    return {
      kind: 'fails',
      problems: [`renders where the built-in ${reference.label} dialect refuses (${reasonOf(expected.error)}); refuse it too`],
    };
  }
  if ('error' in found) {
    return { kind: 'fails', problems: [`refuses (${reasonOf(found.error)}) where the built-in ${reference.label} dialect renders one`] };
  }
  return compareRendered(reference, expected.rendered, found.rendered, rendering);
}

function compareRendered(reference: Dialect, expected: Rendered, found: Rendered, rendering: DialectRendering): RenderingOutcome {
  if (expected.shape !== found.shape) {
    return {
      kind: 'fails',
      problems: [`returns ${describeShape(found.shape)} where the built-in ${reference.label} dialect returns ${describeShape(expected.shape)}`],
    };
  }
  const problems: string[] = [];
  let differs = false;
  expected.parts.forEach((expectedPart, index) => {
    const foundPart = found.parts[index]!;
    if (foundPart.statement.sql !== expectedPart.statement.sql) differs = true;
    problems.push(...comparePart(reference, expectedPart, foundPart, rendering).map((problem) => (found.parts.length > 1 || foundPart.part !== 'statement' ? `${foundPart.part}: ${problem}` : problem)));
  });
  return problems.length > 0 ? { kind: 'fails', problems } : { kind: 'conforms', differs };
}

function comparePart(reference: Dialect, expected: RenderedPart, found: RenderedPart, rendering: DialectRendering): string[] {
  if (found.kind !== 'statement') return typeof found.statement.sql === 'string' ? [] : ['is not text'];
  const statement = found.statement;
  const problems: string[] = [];
  if (typeof statement.sql !== 'string' || !Array.isArray(statement.params)) {
    return ['is not a statement ({ name, sql, params })'];
  }
  if (statement.name !== expected.statement.name) {
    problems.push(`is named "${String(statement.name)}" where the built-in names it "${expected.statement.name}" (errors and tests name statements by it)`);
  }
  const mismatch = placeholderMismatch(statement, reference.name);
  if (mismatch !== undefined) problems.push(mismatch);
  const params = compareParams(expected.statement.params, statement.params, rendering.binding);
  if (params !== undefined) problems.push(`${params} (built-in ${reference.label}: ${listParams(expected.statement.params)})`);
  return problems;
}

function compareParams(expected: readonly string[], found: readonly string[], binding: DialectRendering['binding']): string | undefined {
  if (binding === 'order') {
    const same = expected.length === found.length && expected.every((param, index) => found[index] === param);
    return same ? undefined : `binds ${listParams(found)}, where the library binds values in exactly the built-in's order`;
  }
  const expectedCounts = countsOf(expected);
  const foundCounts = countsOf(found);
  const missing = [...expectedCounts.keys()].filter((param) => !foundCounts.has(param));
  const extra = [...foundCounts.keys()].filter((param) => !expectedCounts.has(param));
  if (missing.length > 0 || extra.length > 0) {
    const parts = [
      missing.length > 0 ? `does not bind ${missing.join(', ')}` : '',
      extra.length > 0 ? `binds ${extra.join(', ')}, which the library does not give it here` : '',
    ];
    return parts.filter((part) => part !== '').join(' and ');
  }
  if (binding === 'rows') {
    const uneven = [...expectedCounts].filter(([param, count]) => foundCounts.get(param) !== count);
    if (uneven.length > 0) {
      const described = (counts: Map<string, number>): string => uneven.map(([param]) => `${param} ${times(counts.get(param) ?? 0)}`).join(', ');
      return `binds ${described(foundCounts)}, where the library binds a row's values once per row, as the built-in does (${described(expectedCounts)})`;
    }
  }
  return undefined;
}

function times(count: number): string {
  return count === 1 ? 'once' : count === 2 ? 'twice' : `${count} times`;
}

function countsOf(params: readonly string[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const param of params) counts.set(param, (counts.get(param) ?? 0) + 1);
  return counts;
}

function listParams(params: readonly string[]): string {
  return params.length === 0 ? 'no parameters' : params.join(', ');
}

function describeShape(shape: string): string {
  return shape === 'none' ? 'nothing' : `"${shape}"`;
}

/**
 * Placeholders against the declared parameters: Postgres numbers them, and `$1`…`$n` must each
 * appear (a number may repeat; a gap leaves the server unable to type it); MySQL and SQLite bind
 * one value per `?`, so there are as many as parameters.
 */
export function placeholderMismatch(statement: Statement, protocol: DialectName): string | undefined {
  const found = scanPlaceholders(statement.sql, protocol);
  const declared = statement.params.length;
  if (protocol === 'postgres') {
    const highest = Math.max(0, ...found.numbered);
    const unused = Array.from({ length: declared }, (_, index) => index + 1).filter((position) => !found.numbered.includes(position));
    if (highest === declared && unused.length === 0) return undefined;
    return `uses placeholders ${describeNumbered(found.numbered)} but declares ${declared} ${declared === 1 ? 'parameter' : 'parameters'} (${listParams(statement.params)}): $1 to $${declared}, each at least once`;
  }
  if (found.questionMarks === declared) return undefined;
  return `has ${found.questionMarks} ? ${found.questionMarks === 1 ? 'placeholder' : 'placeholders'} but declares ${declared} ${declared === 1 ? 'parameter' : 'parameters'} (${listParams(statement.params)}): one ? per parameter, in order`;
}

function describeNumbered(numbered: readonly number[]): string {
  if (numbered.length === 0) return 'none';
  return [...new Set(numbered)]
    .sort((a, b) => a - b)
    .map((position) => `$${position}`)
    .join(', ');
}

/**
 * The placeholders of SQL text outside string literals, quoted names and comments: Postgres `$n`
 * (not inside dollar quotes), and `?` elsewhere (on Postgres `?` is a JSON operator).
 */
export function scanPlaceholders(text: string, protocol: DialectName): { numbered: number[]; questionMarks: number } {
  const numbered: number[] = [];
  let questionMarks = 0;
  for (const span of codeSpans(text, protocol)) {
    if (protocol === 'postgres') {
      for (const match of span.text.matchAll(/\$(\d+)/g)) numbered.push(Number(match[1]));
    } else {
      questionMarks += span.text.split('?').length - 1;
    }
  }
  return { numbered, questionMarks };
}

function attempt(render: () => Rendered): { rendered: Rendered } | { error: unknown } {
  try {
    return { rendered: render() };
  } catch (error) {
    return { error };
  }
}

export function reasonOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
