import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { UsageError } from './usage-error.js';

const BENCH_USAGE = `usage: tablequeue bench [--repository PATH] [--] <benchmark> [options]

Runs the benchmark suite of a tablequeue repository checkout (its bench folder, with its own
dependencies installed) through "npm run bench -- <benchmark> [options]"; every argument after
the command's own flags is passed through. "tablequeue bench -- --help" shows the suite's options.

  --repository PATH     the checkout to run (default: the one this command runs from)
  -h, --help            this help

The suite is not part of the published package. To install it:
  git clone <tablequeue repository> && cd tablequeue && npm install && npm install --prefix bench`;

/** The checkout this file sits in: src/cli/ or dist/cli/ below the repository's root. */
const OWN_REPOSITORY = fileURLToPath(new URL('../../', import.meta.url));

export async function runBenchCommand(args: string[]): Promise<number> {
  let repository = OWN_REPOSITORY;
  let rest = [...args];
  for (;;) {
    const first = rest[0];
    if (first === '--help' || first === '-h') {
      console.log(BENCH_USAGE);
      return 0;
    }
    if (first === '--repository') {
      const path = rest[1];
      if (path === undefined) throw new UsageError('--repository needs the path of a tablequeue checkout');
      repository = resolve(path);
      rest = rest.slice(2);
      continue;
    }
    if (first === '--') rest = rest.slice(1);
    break;
  }
  const missing = missingPieces(repository);
  if (missing.length > 0) {
    console.error(
      `tablequeue: the benchmark suite is not installed at ${repository} (missing ${missing.join(', ')}); ` +
        'it runs from a repository checkout: clone tablequeue, run "npm install" in it and "npm install --prefix bench", ' +
        'then "tablequeue bench --repository <checkout> partitioning" (or "npm run bench" there)',
    );
    return 1;
  }
  return runNpmBench(repository, rest);
}

function missingPieces(repository: string): string[] {
  const needed = [
    join('bench', 'run.ts'),
    join('bench', 'node_modules'),
    join('node_modules', 'tsx'),
  ];
  return needed.filter((path) => !existsSync(join(repository, path)));
}

/** npm's exit code is the suite's; Ctrl-C reaches the suite itself through the shared terminal. */
function runNpmBench(repository: string, args: readonly string[]): Promise<number> {
  return new Promise((resolveCode, reject) => {
    const child = spawn('npm', ['run', '--silent', 'bench', '--', ...args], { cwd: repository, stdio: 'inherit' });
    const ignoreInterrupt = () => undefined;
    process.on('SIGINT', ignoreInterrupt);
    child.once('error', (error) => {
      process.off('SIGINT', ignoreInterrupt);
      reject(new Error(`could not start npm to run the benchmarks: ${error.message}`));
    });
    child.once('exit', (code) => {
      process.off('SIGINT', ignoreInterrupt);
      resolveCode(code ?? 1);
    });
  });
}
