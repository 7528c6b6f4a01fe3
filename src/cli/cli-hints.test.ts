import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { COMMAND_FLAGS } from './command-flags.js';
import { COLUMN_ROLES } from './inspector-flags.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const SOURCES = join(ROOT, 'src');

/** Files whose text holds `--name` that is not a flag of ours, and why. */
const NOT_COMMAND_LINE: Record<string, string> = {
  'src/dashboard/dashboard-style.ts': 'CSS custom properties (--accent, --muted, …)',
};

type CommandName = keyof typeof COMMAND_FLAGS;

/** A flag token: `--` after neither a word character nor a hyphen, then a lower-case name. */
const FLAG = /(?<![\w-])--([a-z][a-z0-9-]*)/g;
/** `--column ROLE=…` names a role too. */
const COLUMN_ASSIGNMENT = /--column ([A-Za-z]+)=/g;

function flagNamesOf(command: CommandName): Set<string> {
  return new Set(Object.keys(COMMAND_FLAGS[command]));
}

const EVERY_FLAG = new Set(Object.keys(COMMAND_FLAGS).flatMap((command) => [...flagNamesOf(command as CommandName)]));

function sourceFiles(folder: string): string[] {
  return readdirSync(folder, { withFileTypes: true }).flatMap((entry) => {
    const path = join(folder, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.test.ts') && !entry.name.includes('.fixture.') ? [path] : [];
  });
}

/** The text of every string and template literal of a file: whatever it can print. */
function literalTexts(path: string): string[] {
  const source = ts.createSourceFile(path, readFileSync(path, 'utf8'), ts.ScriptTarget.Latest, true);
  const texts: string[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isStringLiteralLike(node) || ts.isTemplateHead(node) || ts.isTemplateMiddle(node) || ts.isTemplateTail(node)) {
      texts.push(node.text);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return texts;
}

/** `src/cli/<command>-command.ts` prints that command's hints; any other file may reach any command. */
function commandOf(file: string): CommandName | undefined {
  const match = /^src\/cli\/([a-z]+)-command\.ts$/.exec(file);
  const name = match?.[1];
  return name !== undefined && name in COMMAND_FLAGS ? (name as CommandName) : undefined;
}

interface Misnamed {
  readonly where: string;
  readonly flag: string;
  readonly text: string;
}

function misnamedFlags(where: string, text: string, allowed: ReadonlySet<string>): Misnamed[] {
  const found: Misnamed[] = [];
  for (const [, flag] of text.matchAll(FLAG)) {
    if (!allowed.has(flag!)) found.push({ where, flag: `--${flag}`, text });
  }
  for (const [, role] of text.matchAll(COLUMN_ASSIGNMENT)) {
    if (role !== 'ROLE' && !(COLUMN_ROLES as readonly string[]).includes(role!)) found.push({ where, flag: `--column ${role}=`, text });
  }
  return found;
}

describe('the hints the command line prints', () => {
  it('name only flags that exist: every literal of the sources, checked against the flag table', () => {
    const misnamed: Misnamed[] = [];
    let flagCount = 0;
    for (const path of sourceFiles(SOURCES)) {
      const file = relative(ROOT, path).split('\\').join('/');
      if (file in NOT_COMMAND_LINE) continue;
      const command = commandOf(file);
      const allowed = command === undefined ? EVERY_FLAG : flagNamesOf(command);
      for (const text of literalTexts(path)) {
        flagCount += [...text.matchAll(FLAG)].length;
        misnamed.push(...misnamedFlags(file, text, allowed));
      }
    }
    // The scan found the hints at all: the usages alone name well over a hundred flags.
    expect(flagCount).toBeGreaterThan(100);
    expect(misnamed).toEqual([]);
  });

  it('in the README name only flags of the command they run', () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    const misnamed: Misnamed[] = [];
    let commandLines = 0;
    for (const line of readme.split('\n')) {
      const match = /^tablequeue ([a-z]+)\b(.*)$/.exec(line.trim());
      const command = match?.[1];
      if (command === undefined || !(command in COMMAND_FLAGS)) continue;
      commandLines += 1;
      // What follows a `#` is a comment: it may mention another command's flags.
      misnamed.push(...misnamedFlags(`README: ${line.trim()}`, match![2]!.split('#')[0]!, flagNamesOf(command as CommandName)));
    }
    expect(commandLines).toBeGreaterThan(5);
    expect(misnamed).toEqual([]);
  });

  it('would catch a flag that does not exist, and a role --column does not take', () => {
    expect(misnamedFlags('example', 'name its id column (--id-column)', EVERY_FLAG)).toEqual([
      { where: 'example', flag: '--id-column', text: 'name its id column (--id-column)' },
    ]);
    expect(misnamedFlags('example', 'use --column identifier=job_id', EVERY_FLAG).map((found) => found.flag)).toEqual(['--column identifier=']);
    expect(misnamedFlags('example', 'use --column id=job_id or --dead-letter-group dead', EVERY_FLAG)).toEqual([]);
  });
});
