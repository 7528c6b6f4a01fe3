import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

/**
 * The peers are dev dependencies of the bench package only (never of the library), installed
 * with `npm install --prefix bench`. They are loaded at run time through this module, so that the
 * repository typechecks and the other benchmarks run without them.
 */
export const PEER_PACKAGES = ['pg-boss', 'graphile-worker', 'bullmq', 'plainjob'] as const;

export type PeerPackage = (typeof PEER_PACKAGES)[number];

const BENCH_DIRECTORY = fileURLToPath(new URL('..', import.meta.url));

export const INSTALL_COMMAND = 'npm install --prefix bench';

/** The exact versions bench/package.json asks for. */
export function expectedPeerVersions(): Record<string, string> {
  const manifest = JSON.parse(readFileSync(`${BENCH_DIRECTORY}package.json`, 'utf8')) as { devDependencies?: Record<string, string> };
  return manifest.devDependencies ?? {};
}

/**
 * What is wrong with the installed peers, one line each: missing, or at a version other than
 * bench/package.json's. Empty when every peer is there at its version.
 */
export function peerInstallProblems(): string[] {
  const expected = expectedPeerVersions();
  const problems: string[] = [];
  for (const name of PEER_PACKAGES) {
    const manifestPath = `${BENCH_DIRECTORY}node_modules/${name}/package.json`;
    if (!existsSync(manifestPath)) {
      problems.push(`${name} is not installed`);
      continue;
    }
    const { version } = JSON.parse(readFileSync(manifestPath, 'utf8')) as { version: string };
    if (version !== expected[name]) problems.push(`${name} is at ${version}; bench/package.json asks for ${expected[name]}`);
  }
  return problems;
}

/** The version of a peer as installed, for the results. */
export function installedVersion(name: PeerPackage): string | undefined {
  const manifestPath = `${BENCH_DIRECTORY}node_modules/${name}/package.json`;
  if (!existsSync(manifestPath)) return undefined;
  return (JSON.parse(readFileSync(manifestPath, 'utf8')) as { version: string }).version;
}

/**
 * Loads a package by name from the bench package (a name held in a variable, so TypeScript does
 * not look for its types): a CommonJS package through `require`, which hands back its
 * `module.exports` as the package documents it; an ES module through `import`. The caller states
 * the shape it uses (`*Like` types beside each peer).
 */
export async function importPackage<Shape>(name: string, shape: 'commonjs' | 'module'): Promise<Shape> {
  if (shape === 'commonjs') return requireFromBench(name) as Shape;
  return (await import(name)) as Shape;
}

const requireFromBench = createRequire(import.meta.url);
