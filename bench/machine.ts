import { execFileSync } from 'node:child_process';
import { cpus, loadavg, release, totalmem, type } from 'node:os';
import { fileURLToPath } from 'node:url';

const REPOSITORY_ROOT = fileURLToPath(new URL('..', import.meta.url));

/** Where a benchmark ran, recorded next to its figures. */
export interface MachineDescription {
  readonly node: string;
  readonly os: string;
  readonly cpuModel: string;
  readonly cpuCount: number;
  readonly memoryGiB: number;
  /** The commit the library was measured at, and whether src/ had changes not yet committed. */
  readonly gitCommit: string | undefined;
  readonly hasUncommittedSourceChanges: boolean | undefined;
  /**
   * Which code of the library ran: its build in dist/ (`npm run bench` builds it and loads it
   * through bench/library-from-dist.mjs), or its TypeScript compiled by tsx on the fly.
   */
  readonly library: 'dist/ (built by tsc)' | 'src/ through tsx';
  /**
   * The 1-, 5- and 15-minute load averages when this was read: other processes on the same
   * cores (test suites, other benchmarks) show up here and explain noisy figures.
   */
  readonly loadAverage: readonly [number, number, number];
}

export function describeMachine(): MachineDescription {
  const processors = cpus();
  return {
    node: process.version,
    os: `${type()} ${release()}`,
    cpuModel: processors[0]?.model ?? 'unknown',
    cpuCount: processors.length,
    memoryGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    gitCommit: git(['rev-parse', '--short', 'HEAD']),
    hasUncommittedSourceChanges: gitStatusOfSource(),
    library: process.env['TABLEQUEUE_BENCH_LIBRARY'] === 'dist' ? 'dist/ (built by tsc)' : 'src/ through tsx',
    loadAverage: loadavg().map((value) => Math.round(value * 100) / 100) as [number, number, number],
  };
}

function gitStatusOfSource(): boolean | undefined {
  const status = git(['status', '--porcelain', '--', 'src']);
  return status === undefined ? undefined : status.length > 0;
}

/** A git answer, or undefined outside a work tree or without git. */
function git(args: string[]): string | undefined {
  try {
    return execFileSync('git', args, { cwd: REPOSITORY_ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return undefined;
  }
}
