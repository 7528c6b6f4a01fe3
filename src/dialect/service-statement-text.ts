/**
 * A table's statements of the service's own (`defineTable({ statements })`) as statements the
 * library binds: SQL text whose parameters are named (`:id`, `:group`, `:now`…), rendered with
 * the placeholders of the database (`$1`… on PostgreSQL, `?` on MySQL and SQLite) and bound by
 * name like every statement a dialect renders. Which parameters each statement gets depends on
 * the statement and the table's form; one it does not get, a positional placeholder, or a missing
 * one it needs is a `DeclarationError` naming the statement.
 */
import { DeclarationError } from '../errors.js';
import type { ParamName, Statement } from '../statement.js';
import type { ServiceStatementName, TableSpec } from '../table/table-spec.js';
import type { DialectName } from './dialect.js';
import { scanPlaceholders } from './dialect-comparison.js';
import { codeSpans } from './sql-code.js';

/** What a statement may bind, and what it must. */
export interface ServiceStatementParameters {
  readonly allowed: readonly ParamName[];
  readonly required: readonly ParamName[];
}

/**
 * The parameters tablequeue gives each statement of the service's own on `spec`:
 * - `claim`: `:group` (grouped tables), `:now`, `:limit`.
 * - `fetch`: `:ids`, every claimed id as one array (PostgreSQL), or `:id`, run once per id.
 * - `ack`, `drop`, `retry`: `:id`, `:now`; `retryAfter` adds `:retryAfterAt` and `:delayMicroseconds`;
 *   `deadLetter` adds `:destination` (the dead-letter group) and `:lastError`. In the lease form
 *   each also gets `:held`, the token tablequeue confirmed before it.
 * - `extend`: `:id`, `:held`, `:lockedUntil`, all three.
 * - `lock`, `unlock`: `:key`.
 */
export function serviceStatementParameters(name: ServiceStatementName, spec: TableSpec, protocol: DialectName): ServiceStatementParameters {
  const settlement = (extra: readonly ParamName[]): ServiceStatementParameters => ({
    allowed: ['id', 'now', ...(spec.form === 'lease' ? (['held'] as const) : []), ...extra],
    required: ['id'],
  });
  switch (name) {
    case 'claim':
      return { allowed: [...(spec.group === undefined ? [] : (['group'] as const)), 'now', 'limit'], required: [] };
    case 'fetch':
      return { allowed: protocol === 'postgres' ? ['ids', 'id'] : ['id'], required: [] };
    case 'ack':
    case 'drop':
    case 'retry':
      return settlement([]);
    case 'retryAfter':
      return settlement(['retryAfterAt', 'delayMicroseconds']);
    case 'deadLetter':
      return settlement(['destination', 'lastError']);
    case 'extend':
      return { allowed: ['id', 'held', 'lockedUntil'], required: ['id', 'held', 'lockedUntil'] };
    case 'lock':
    case 'unlock':
      return { allowed: ['key'], required: ['key'] };
  }
}

/**
 * A named parameter: a colon and a letter, then letters, digits and underscores. A colon after
 * another (PostgreSQL's `::type`) or before `=` (MySQL's `:=`) starts none.
 */
const NAMED_PARAMETER = /(?<!:):([A-Za-z][A-Za-z0-9_]*)/g;

/**
 * Renders one text of statement `label` (`statements.ack`): each `:name` outside literals and
 * comments becomes a placeholder, `$n` numbered per name on PostgreSQL (a name used twice binds
 * once) and one `?` per use elsewhere.
 */
export function renderServiceStatement(
  text: string,
  label: string,
  protocol: DialectName,
  parameters: ServiceStatementParameters,
  where: string,
): Statement {
  const positional = scanPlaceholders(text, protocol);
  if (positional.numbered.length > 0 || positional.questionMarks > 0) {
    throw new DeclarationError(
      `${where}: ${label} has a positional placeholder (${protocol === 'postgres' ? '$1' : '?'}); name its parameters instead, as :id`,
    );
  }
  const params: ParamName[] = [];
  const unknown = new Set<string>();
  let sql = '';
  let copied = 0;
  for (const span of codeSpans(text, protocol)) {
    for (const match of span.text.matchAll(NAMED_PARAMETER)) {
      const name = match[1]!;
      if (!(parameters.allowed as readonly string[]).includes(name)) {
        unknown.add(name);
        continue;
      }
      const at = span.start + match.index;
      sql += text.slice(copied, at) + placeholderFor(name as ParamName, params, protocol);
      copied = at + match[0].length;
    }
  }
  sql += text.slice(copied);
  if (unknown.size > 0) {
    const given = parameters.allowed.length === 0 ? 'no parameters' : parameters.allowed.map((param) => `:${param}`).join(', ');
    throw new DeclarationError(
      `${where}: ${label} uses ${[...unknown].map((name) => `:${name}`).join(', ')}, which tablequeue does not bind there; it binds ${given}`,
    );
  }
  const missing = parameters.required.filter((param) => !params.includes(param));
  if (missing.length > 0) {
    throw new DeclarationError(`${where}: ${label} must use ${missing.map((param) => `:${param}`).join(', ')}; docs/service-statements.md says why`);
  }
  return { name: label, sql, params };
}

function placeholderFor(name: ParamName, params: ParamName[], protocol: DialectName): string {
  if (protocol !== 'postgres') {
    params.push(name);
    return '?';
  }
  const known = params.indexOf(name);
  if (known !== -1) return `$${known + 1}`;
  params.push(name);
  return `$${params.length}`;
}

/** One text, or a settlement's several, of statement `name`, rendered for `spec` on `protocol`. */
export function renderServiceStatements(name: ServiceStatementName, spec: TableSpec, protocol: DialectName): Statement[] {
  const declared = spec.statements?.[name];
  if (declared === undefined) return [];
  const texts: readonly string[] = typeof declared === 'string' ? [declared] : declared;
  const parameters = serviceStatementParameters(name, spec, protocol);
  const where = `table "${spec.qualifiedName}"`;
  return texts.map((text, index) =>
    renderServiceStatement(text, texts.length === 1 ? `statements.${name}` : `statements.${name}[${index}]`, protocol, parameters, where),
  );
}
