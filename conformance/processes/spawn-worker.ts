import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

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
  const child = spawn(process.execPath, ['--import', 'tsx', WORKER, JSON.stringify(config)], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const handling: string[] = [];
  const waiters: { count: number; resolve: () => void }[] = [];
  let markReady!: () => void;
  let failReady!: (error: Error) => void;
  const ready = new Promise<void>((resolve, reject) => {
    markReady = resolve;
    failReady = reject;
  });
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  createInterface({ input: child.stdout! }).on('line', (line) => {
    if (line === 'ready') markReady();
    else if (line.startsWith('handling ')) {
      handling.push(line.slice('handling '.length));
      for (const waiter of [...waiters]) {
        if (handling.length >= waiter.count) {
          waiters.splice(waiters.indexOf(waiter), 1);
          waiter.resolve();
        }
      }
    }
  });
  const exited = new Promise<number | null>((resolve) => {
    child.on('exit', (code) => {
      failReady(new Error(`worker exited with code ${code} before it was ready: ${stderr}`));
      resolve(code);
    });
  });
  return {
    child,
    handling,
    ready,
    exited,
    handlingAtLeast: (count, timeoutMs = 30_000) =>
      handling.length >= count
        ? Promise.resolve()
        : new Promise((resolve, reject) => {
            const timer = setTimeout(
              () => reject(new Error(`worker began ${handling.length} handlers, expected ${count}: ${stderr}`)),
              timeoutMs,
            );
            waiters.push({
              count,
              resolve: () => {
                clearTimeout(timer);
                resolve();
              },
            });
          }),
  };
}
