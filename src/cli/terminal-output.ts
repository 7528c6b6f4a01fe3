/**
 * What the commands print for people: tables whose columns line up, colours only on a terminal
 * that wants them, and a progress bar drawn in place (on a terminal only, so logs and pipes get
 * clean text).
 */

/** The part of a stream the output helpers need; `process.stdout` and test streams fit. */
export interface OutputStream {
  write(text: string): unknown;
  readonly isTTY?: boolean | undefined;
  readonly columns?: number | undefined;
}

export type ColumnAlignment = 'left' | 'right';

export interface TableColumn {
  readonly heading: string;
  readonly align?: ColumnAlignment;
}

/**
 * C0 controls, DEL and C1 controls. A terminal acts on them rather than showing them: text read
 * from a queue (a payload, a last error, a group name) could set the window title (ESC ] 0;…),
 * write the clipboard (ESC ] 52;c;…), erase lines already printed (ESC [2K ESC [1A), or do the
 * same with a C1 CSI (U+009B) in place of ESC [.
 */
// eslint-disable-next-line no-control-regex
const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f-\u009f]/g;
// eslint-disable-next-line no-control-regex
const CONTROL_CHARACTERS_BUT_NEWLINE = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/g;

const SHORT_ESCAPES: Readonly<Record<string, string>> = { '\t': '\\t', '\n': '\\n', '\r': '\\r' };

function visibleEscape(character: string): string {
  const code = character.charCodeAt(0);
  const short = SHORT_ESCAPES[character];
  if (short !== undefined) return short;
  return code < 0x80 ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
}

/**
 * Text from the database made safe to print: every control character shown as its escape
 * (`\x1b`, `\u009b`, `\n`), so it reads as what it is and the terminal does nothing with it.
 * Every human-readable output passes what it did not write itself through this; `--json`
 * output is escaped by JSON itself (see `jsonForTerminal`).
 */
export function printable(text: string): string {
  return text.replace(CONTROL_CHARACTERS, visibleEscape);
}

/** `printable`, keeping line breaks: for messages of several lines, such as an error with its usage. */
export function printableLines(text: string): string {
  return text.replace(CONTROL_CHARACTERS_BUT_NEWLINE, visibleEscape);
}

/**
 * `JSON.stringify`, with DEL and the C1 controls written as `\u007f`…`\u009f` too: JSON escapes
 * C0 controls itself but leaves these as they are, and some terminals act on C1. A JSON reader gets the same
 * values either way.
 */
export function jsonForTerminal(value: unknown, indent?: number): string {
  return (JSON.stringify(value, null, indent) ?? 'null').replace(/[\u007f-\u009f]/g, (character) => `\\u${character.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** The visible width of text that may carry colour escapes. */
export function visibleWidth(text: string): number {
  // eslint-disable-next-line no-control-regex
  return [...text.replace(/\u001b\[[0-9;]*m/g, '')].length;
}

/**
 * Lines of a table: a heading row, then one row per entry, columns separated by two spaces and
 * padded to their widest cell (numbers right-aligned). Trailing spaces are trimmed.
 */
export function formatTable(columns: readonly TableColumn[], rows: readonly (readonly string[])[], paint: Paint = plainPaint): string[] {
  const widths = columns.map((column, index) =>
    Math.max(visibleWidth(column.heading), ...rows.map((row) => visibleWidth(row[index] ?? ''))),
  );
  const line = (cells: readonly string[]) =>
    columns
      .map((column, index) => {
        const cell = cells[index] ?? '';
        const padding = ' '.repeat(widths[index]! - visibleWidth(cell));
        return column.align === 'right' ? padding + cell : cell + padding;
      })
      .join('  ')
      .trimEnd();
  return [paint.bold(line(columns.map((column) => column.heading))), ...rows.map(line)];
}

/** `42s`, `3m 05s`, `2h 10m`, `3d 4h`; `-` for none. */
export function formatAge(seconds: number | null): string {
  if (seconds === null) return '-';
  const whole = Math.max(0, Math.floor(seconds));
  if (whole < 60) return `${whole}s`;
  if (whole < 3600) return `${Math.floor(whole / 60)}m ${String(whole % 60).padStart(2, '0')}s`;
  if (whole < 86_400) return `${Math.floor(whole / 3600)}h ${String(Math.floor(whole / 60) % 60).padStart(2, '0')}m`;
  return `${Math.floor(whole / 86_400)}d ${Math.floor(whole / 3600) % 24}h`;
}

/** `12,345`: counts with thousands separators, whatever the machine's locale. */
export function formatCount(count: number): string {
  return count.toLocaleString('en-US');
}

export interface Paint {
  bold(text: string): string;
  dim(text: string): string;
  red(text: string): string;
  yellow(text: string): string;
  green(text: string): string;
}

const plainPaint: Paint = {
  bold: (text) => text,
  dim: (text) => text,
  red: (text) => text,
  yellow: (text) => text,
  green: (text) => text,
};

const ansi = (open: number, close: number) => (text: string) => `\u001b[${open}m${text}\u001b[${close}m`;

const colourPaint: Paint = {
  bold: ansi(1, 22),
  dim: ansi(2, 22),
  red: ansi(31, 39),
  yellow: ansi(33, 39),
  green: ansi(32, 39),
};

/** Colours only on a terminal, and never when `NO_COLOR` is set to anything (no-color.org). */
export function paintFor(stream: OutputStream, environment: Readonly<Record<string, string | undefined>> = process.env): Paint {
  return stream.isTTY === true && environment['NO_COLOR'] === undefined ? colourPaint : plainPaint;
}

const BAR_WIDTH = 30;

/**
 * A progress bar redrawn in place with `\r`. Off a terminal it draws nothing: a log would fill
 * with partial lines. `finish` ends the line.
 */
export class ProgressBar {
  readonly #stream: OutputStream;
  readonly #label: string;
  #isDrawn = false;

  constructor(stream: OutputStream, label: string) {
    this.#stream = stream;
    this.#label = label;
  }

  update(doneCount: number, totalCount: number): void {
    if (this.#stream.isTTY !== true) return;
    this.#stream.write(`\r${renderProgressLine(this.#label, doneCount, totalCount)}`);
    this.#isDrawn = true;
  }

  finish(): void {
    if (this.#isDrawn) this.#stream.write('\n');
    this.#isDrawn = false;
  }
}

/** `label [#########.....]  450/1,000  45%`. */
export function renderProgressLine(label: string, doneCount: number, totalCount: number): string {
  const fraction = totalCount <= 0 ? 1 : Math.min(1, Math.max(0, doneCount / totalCount));
  const filled = Math.round(fraction * BAR_WIDTH);
  const bar = '#'.repeat(filled) + '.'.repeat(BAR_WIDTH - filled);
  return `${label} [${bar}] ${formatCount(doneCount)}/${formatCount(totalCount)} ${String(Math.floor(fraction * 100)).padStart(3)}%`;
}
