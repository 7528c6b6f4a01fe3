import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';

export interface LineProcess<Item> {
  readonly child: ChildProcess;
  /** What the process reported, one item per line that began with the prefix, in order. */
  readonly items: Item[];
  /** Resolves when the process printed `ready`; rejects when it exits first. */
  readonly ready: Promise<void>;
  /** Resolves when the process has exited. */
  readonly exited: Promise<number | null>;
  /** Resolves once `count` items have been reported. */
  itemsAtLeast(count: number, timeoutMs?: number): Promise<void>;
}

export interface LineProcessOptions<Item> {
  /** The TypeScript file to run (through tsx) with the config as its one argument. */
  readonly script: string;
  readonly config: unknown;
  /** What the process is, for error messages: `worker`, `the relay`. */
  readonly label: string;
  /** The start of the lines that report an item, for example `handling `. */
  readonly prefix: string;
  readonly parse: (rest: string) => Item;
  /** Whether the test writes to the process's stdin (`child.stdin`), to tell it when to go on. */
  readonly input?: boolean;
}

/**
 * Starts a separate Node process that reports on its stdout, one line per event, so a test waits
 * on what the process said rather than on time.
 */
export function spawnLineProcess<Item>(options: LineProcessOptions<Item>): LineProcess<Item> {
  const { label, prefix } = options;
  const child = spawn(process.execPath, ['--import', 'tsx', options.script, JSON.stringify(options.config)], {
    stdio: [options.input === true ? 'pipe' : 'ignore', 'pipe', 'pipe'],
  });
  const items: Item[] = [];
  const waiters: { count: number; resolve: () => void }[] = [];
  let markReady!: () => void;
  let failReady!: (error: Error) => void;
  const ready = new Promise<void>((resolve, reject) => {
    markReady = resolve;
    failReady = reject;
  });
  // A test that never waits for `ready` must not see its rejection as unhandled when the process exits.
  ready.catch(() => undefined);
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  createInterface({ input: child.stdout! }).on('line', (line) => {
    if (line === 'ready') markReady();
    else if (line.startsWith(prefix)) {
      items.push(options.parse(line.slice(prefix.length)));
      for (const waiter of [...waiters]) {
        if (items.length >= waiter.count) {
          waiters.splice(waiters.indexOf(waiter), 1);
          waiter.resolve();
        }
      }
    }
  });
  const exited = new Promise<number | null>((resolve) => {
    child.on('exit', (code) => {
      failReady(new Error(`${label} exited with code ${code} before it was ready: ${stderr}`));
      resolve(code);
    });
  });
  return {
    child,
    items,
    ready,
    exited,
    itemsAtLeast: (count, timeoutMs = 30_000) =>
      items.length >= count
        ? Promise.resolve()
        : new Promise((resolve, reject) => {
            const timer = setTimeout(
              () => reject(new Error(`${label} reported ${items.length} of ${count} "${prefix.trim()}" lines: ${stderr}`)),
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
