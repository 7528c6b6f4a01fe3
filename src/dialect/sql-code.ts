/**
 * SQL text as a database reads it: the spans outside string literals, quoted names and comments,
 * which is where placeholders and parameters stand. Shared by the check of a dialect's
 * placeholders (dialect-comparison.ts) and the rendering of a table's statements of the service's
 * own with named parameters (service-statement-text.ts).
 */
import type { DialectName } from './dialect.js';

/** A stretch of SQL code, and where it starts in the text. */
export interface CodeSpan {
  readonly start: number;
  readonly text: string;
}

/**
 * The code of `text`, leaving out `'…'`, `"…"` and `` `…` `` (MySQL reads backslash escapes in
 * the first two), `-- …` and `/* … *\/` comments, MySQL's `# …` and PostgreSQL's dollar quotes
 * (`$$…$$`, `$tag$…$tag$`). PostgreSQL's `$1` stays code.
 */
export function codeSpans(text: string, protocol: DialectName): CodeSpan[] {
  const spans: CodeSpan[] = [];
  let codeStart = 0;
  let index = 0;
  const skip = (to: number): void => {
    if (index > codeStart) spans.push({ start: codeStart, text: text.slice(codeStart, index) });
    index = to;
    codeStart = to;
  };
  const skipTo = (closing: string, from: number): number => {
    const end = text.indexOf(closing, from);
    return end === -1 ? text.length : end + closing.length;
  };
  while (index < text.length) {
    const char = text[index]!;
    const next = text[index + 1];
    if (char === "'" || char === '"' || char === '`') {
      skip(skipQuoted(text, index, char, protocol === 'mysql' && char !== '`'));
    } else if (char === '-' && next === '-') {
      skip(skipTo('\n', index + 2));
    } else if (char === '#' && protocol === 'mysql') {
      skip(skipTo('\n', index + 1));
    } else if (char === '/' && next === '*') {
      skip(skipTo('*/', index + 2));
    } else if (char === '$' && protocol === 'postgres') {
      const number = /^\$\d+/.exec(text.slice(index));
      const tag = /^\$([A-Za-z_][A-Za-z0-9_]*)?\$/.exec(text.slice(index));
      if (number !== null) index += number[0].length;
      else if (tag !== null) skip(skipTo(tag[0], index + tag[0].length));
      else index += 1;
    } else {
      index += 1;
    }
  }
  skip(text.length);
  return spans;
}

/** Past the closing quote; a doubled quote stays inside, and so does a backslash-escaped one where MySQL reads escapes. */
function skipQuoted(text: string, start: number, quote: string, backslashEscapes: boolean): number {
  let index = start + 1;
  while (index < text.length) {
    const char = text[index]!;
    if (backslashEscapes && char === '\\') {
      index += 2;
    } else if (char === quote) {
      if (text[index + 1] !== quote) return index + 1;
      index += 2;
    } else {
      index += 1;
    }
  }
  return index;
}
