import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = new URL('../', import.meta.url);

/** The README's fenced blocks whose info string names an example file: "```ts examples/x.ts". */
function readmeExampleBlocks(): Map<string, string> {
  const readme = readFileSync(new URL('README.md', ROOT), 'utf8');
  const blocks = new Map<string, string>();
  for (const match of readme.matchAll(/^```ts (examples\/[\w.-]+\.ts)\n([\s\S]*?)^```$/gm)) {
    blocks.set(match[1]!, match[2]!);
  }
  return blocks;
}

describe('the README and examples/', () => {
  it('shows the Quickstart exactly as examples/quickstart.ts, which CI typechecks and runs', () => {
    const blocks = readmeExampleBlocks();
    expect([...blocks.keys()]).toContain('examples/quickstart.ts');
    for (const [file, block] of blocks) {
      expect(block, `the README's block of ${file}`).toBe(readFileSync(new URL(file, ROOT), 'utf8'));
    }
  });

  it('links every example it ships', () => {
    const readme = readFileSync(new URL('README.md', ROOT), 'utf8');
    const examples = readdirSync(fileURLToPath(new URL('examples/', ROOT))).filter((name) => name.endsWith('.ts'));
    expect(examples.length).toBeGreaterThan(0);
    expect(examples.filter((name) => !readme.includes(`](examples/${name})`))).toEqual([]);
  });
});
