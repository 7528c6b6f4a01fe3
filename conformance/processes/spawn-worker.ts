import type { ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { spawnLineProcess } from './spawn-line-process.js';

const WORKER = fileURLToPath(new URL('./queue-worker.ts', import.meta.url));

export interface SpawnedWorker {
  readonly child: ChildProcess;
  /** Ids the worker printed as it began handling them. */
  readonly handling: string[];
  /** Resolves when the worker printed `ready`. */
  readonly ready: Promise<void>;
  /** Resolves when the worker has begun `count` handlers. */
  handlingAtLeast(count: number, timeoutMs?: number): Promise<void>;
  /** Resolves when the process has exited. */
  readonly exited: Promise<number | null>;
}

/** Starts a queue worker in a separate Node process (TypeScript through tsx). */
export function spawnWorker(config: Record<string, unknown>): SpawnedWorker {
  const worker = spawnLineProcess({ script: WORKER, config, label: 'worker', prefix: 'handling ', parse: (id) => id });
  return {
    child: worker.child,
    handling: worker.items,
    ready: worker.ready,
    exited: worker.exited,
    handlingAtLeast: worker.itemsAtLeast,
  };
}
