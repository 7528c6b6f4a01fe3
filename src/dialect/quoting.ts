import type { ParamName, Statement } from '../statement.js';

type SqlPart =
  | { readonly kind: 'text'; readonly text: string }
  | { readonly kind: 'identifier'; readonly name: string }
  | { readonly kind: 'param'; readonly param: ParamName }
  | { readonly kind: 'clock'; readonly plusMicroseconds: ParamName | undefined };

/**
 * SQL text whose identifiers and parameters stay apart from the text until a dialect renders it.
 * Statements are assembled from pieces built in any order (a condition list before the SET clause
 * that precedes it); numbering Postgres placeholders only at render time keeps `$n` and the
 * parameter list in the order they appear, whatever order the pieces were built in.
 */
export class SqlText {
  readonly parts: readonly SqlPart[];

  constructor(parts: readonly SqlPart[]) {
    this.parts = parts;
  }
}

/**
 * Builds SQL from a template. Only `SqlText` may be interpolated, so a value can never be pasted
 * into the text: values go through `param`, names through `identifier`.
 */
export function sql(strings: TemplateStringsArray, ...pieces: readonly SqlText[]): SqlText {
  const parts: SqlPart[] = [];
  strings.forEach((text, index) => {
    if (text.length > 0) parts.push({ kind: 'text', text });
    const piece = pieces[index];
    if (piece !== undefined) parts.push(...piece.parts);
  });
  return new SqlText(parts);
}

/** Fixed SQL written in this folder (a type name, a keyword chosen from a table); never input. */
export function fixedSql(text: string): SqlText {
  return new SqlText([{ kind: 'text', text }]);
}

/**
 * A string literal of text this folder builds from validated names (a lock-key prefix), never a
 * value: values are parameters. A single quote is doubled; a backslash is refused, since MySQL
 * reads it as an escape where Postgres and SQLite read it as itself.
 */
export function textLiteral(text: string): SqlText {
  if (text.includes('\\')) throw new TypeError(`a SQL text literal must not contain a backslash: ${JSON.stringify(text)}`);
  return fixedSql(`'${text.replaceAll("'", "''")}'`);
}

export function identifier(name: string): SqlText {
  return new SqlText([{ kind: 'identifier', name }]);
}

/** `schema.name` or `name`, each part quoted. */
export function qualifiedName(schema: string | undefined, name: string): SqlText {
  return schema === undefined ? identifier(name) : sql`${identifier(schema)}.${identifier(name)}`;
}

export function param(name: ParamName): SqlText {
  return new SqlText([{ kind: 'param', param: name }]);
}

/**
 * The database's own now, spelt by the dialect that renders the statement (tables with
 * `clock: 'database'`); with `plusMicroseconds`, that now plus a bound delay.
 */
export function databaseClock(plusMicroseconds?: ParamName): SqlText {
  return new SqlText([{ kind: 'clock', plusMicroseconds }]);
}

export function joinSql(pieces: readonly SqlText[], separator: string): SqlText {
  const parts: SqlPart[] = [];
  pieces.forEach((piece, index) => {
    if (index > 0) parts.push({ kind: 'text', text: separator });
    parts.push(...piece.parts);
  });
  return new SqlText(parts);
}

/** How one database spells identifiers and placeholders. */
export interface SqlStyle {
  quoteIdentifier(name: string): string;
  /** The placeholder at a 1-based position. */
  placeholder(position: number): string;
  /** How the database reads its own clock; only dialects that render `databaseClock` have one. */
  readonly clock?: DatabaseClockSpelling;
}

/** The database's now, and that now plus a delay in microseconds bound at `placeholder`. */
export interface DatabaseClockSpelling {
  readonly now: string;
  plusMicroseconds(placeholder: string): string;
}

/** Postgres: `"name"` (a `"` inside doubled) and numbered `$n` placeholders. */
export const DOUBLE_QUOTE_STYLE: SqlStyle = {
  quoteIdentifier: (name) => `"${name.replaceAll('"', '""')}"`,
  placeholder: (position) => `$${position}`,
};

/**
 * MySQL, MariaDB and SQLite: `` `name` `` (a backtick inside doubled) and `?` placeholders.
 * SQLite accepts double quotes too, but reads a double-quoted name that matches no column as a
 * string literal, so a misspelt column would compare against text instead of failing.
 */
export const BACKTICK_STYLE: SqlStyle = {
  quoteIdentifier: (name) => `\`${name.replaceAll('`', '``')}\``,
  placeholder: () => '?',
};

export function renderStatement(style: SqlStyle, name: string, text: SqlText): Statement {
  const params: ParamName[] = [];
  const sqlText = text.parts
    .map((part) => {
      switch (part.kind) {
        case 'text':
          return part.text;
        case 'identifier':
          return style.quoteIdentifier(part.name);
        case 'param':
          params.push(part.param);
          return style.placeholder(params.length);
        case 'clock':
          return renderClock(style, name, part.plusMicroseconds, params);
      }
    })
    .join('');
  return { name, sql: sqlText, params };
}

function renderClock(style: SqlStyle, statement: string, plusMicroseconds: ParamName | undefined, params: ParamName[]): string {
  if (style.clock === undefined) {
    throw new TypeError(`statement "${statement}" reads the database clock, but its dialect's style spells none`);
  }
  if (plusMicroseconds === undefined) return style.clock.now;
  params.push(plusMicroseconds);
  return style.clock.plusMicroseconds(style.placeholder(params.length));
}

/** DDL takes no parameters; a placeholder in it is a bug in this folder. */
export function renderDdl(style: SqlStyle, text: SqlText): string {
  const statement = renderStatement(style, 'schema.createTable', text);
  if (statement.params.length > 0) {
    throw new TypeError(`DDL must not contain parameters, found ${statement.params.join(', ')}`);
  }
  return statement.sql;
}
