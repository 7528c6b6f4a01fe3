/**
 * `node --import tsx --import ./bench/library-from-dist.mjs`: every module of the library the
 * benchmarks import from src/ is loaded from its build in dist/ instead, so the figures are those
 * of the package as users install it (plain JavaScript from tsc), not of the TypeScript that tsx
 * compiles with esbuild on the fly. The benchmarks' own code still runs through tsx.
 */
import { register } from 'node:module';
import process from 'node:process';

register('./library-from-dist-resolve.mjs', import.meta.url);
// Read by bench/machine.ts for the machine section, and inherited by the processes a benchmark starts.
process.env.TABLEQUEUE_BENCH_LIBRARY = 'dist';
