import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { Queue, QueueTable } from '../definition/define-table.js';
import type { Message } from '../delivery/message.js';
import type { PoolerMode } from '../driver/driver.js';
import { DeclarationError } from '../errors.js';
import type { PublishOptions } from '../publish/publish-options.js';
import type { ThreadInvoker, ThreadRequest } from '../subscription/subscription.js';
import {
  serializeError,
  ThreadError,
  type HostToThread,
  type ThreadMessage,
  type ThreadSetup,
  type ThreadToHost,
} from './thread-messages.js';

export interface ThreadHostOptions {
  readonly request: ThreadRequest;
  /** The broker's database URL: each thread opens its own pool on it. */
  readonly database: string;
  /** The broker's `pooler` option: each thread's pool declares it too. */
  readonly pooler: PoolerMode | undefined;
  readonly publish: (queue: Queue<unknown>, payload: unknown, options: PublishOptions) => Promise<string>;
}

/** How long a closing thread may take to close its pool before it is terminated. */
const THREAD_CLOSE_TIMEOUT_MS = 5_000;

/**
 * The worker threads of one subscription. Thread `slot` runs the deliveries of worker (or lane)
 * `slot`, one at a time, so a keyed subscription keeps a key on one thread.
 */
export class ThreadHost implements ThreadInvoker {
  readonly #threads: Worker[];
  readonly #options: ThreadHostOptions;
  readonly #calls = new Map<number, { resolve: (result: unknown) => void; reject: (error: Error) => void }>();
  #nextCallId = 0;

  private constructor(options: ThreadHostOptions, threads: Worker[]) {
    this.#options = options;
    this.#threads = threads;
    for (const thread of threads) thread.on('message', (message: ThreadToHost) => this.#receive(thread, message));
    options.request.signal.addEventListener('abort', () => this.#broadcast({ type: 'abort' }), { once: true });
  }

  /** Starts every thread and waits until each has loaded the handler and opened its pool. */
  static async start(options: ThreadHostOptions): Promise<ThreadHost> {
    const { request } = options;
    const setup: ThreadSetup = {
      module: request.options.module,
      exportName: request.options.export,
      database: options.database,
      pooler: options.pooler,
      connections: request.options.connections,
      isBatch: request.isBatch,
      subscription: request.subscription,
    };
    const threads = Array.from({ length: request.options.threads }, () => startThread(setup));
    try {
      await Promise.all(threads.map((thread) => whenReady(thread, request.subscription)));
    } catch (error) {
      await Promise.allSettled(threads.map((thread) => thread.terminate()));
      throw error;
    }
    return new ThreadHost(options, threads);
  }

  readonly invoke = (messages: Message<unknown>[], slot: number): Promise<unknown> => {
    const thread = this.#threads[slot % this.#threads.length]!;
    const callId = this.#nextCallId++;
    const crossing: ThreadMessage[] = messages.map((message) => ({ ...message }));
    return new Promise((resolve, reject) => {
      this.#calls.set(callId, { resolve, reject });
      thread.postMessage({ type: 'invoke', callId, messages: crossing } satisfies HostToThread);
    });
  };

  async close(): Promise<void> {
    await Promise.allSettled(
      this.#threads.map(async (thread) => {
        const closed = new Promise<void>((resolve) => thread.once('exit', () => resolve()));
        thread.postMessage({ type: 'close' } satisfies HostToThread);
        const timer = setTimeout(() => void thread.terminate(), THREAD_CLOSE_TIMEOUT_MS);
        await closed;
        clearTimeout(timer);
      }),
    );
  }

  #receive(thread: Worker, message: ThreadToHost): void {
    if (message.type === 'returned' || message.type === 'threw') {
      const call = this.#calls.get(message.callId);
      this.#calls.delete(message.callId);
      if (message.type === 'returned') call?.resolve(message.result);
      else call?.reject(new ThreadError(message.error));
      return;
    }
    if (message.type === 'publish') {
      const queue = new Queue(QueueTable.fromSpec(message.table), message.queue);
      this.#options.publish(queue, message.payload, message.options).then(
        (id) => thread.postMessage({ type: 'published', requestId: message.requestId, id } satisfies HostToThread),
        (error: unknown) =>
          thread.postMessage({
            type: 'published',
            requestId: message.requestId,
            error: serializeError(error),
          } satisfies HostToThread),
      );
    }
  }

  #broadcast(message: HostToThread): void {
    for (const thread of this.#threads) thread.postMessage(message);
  }
}

function whenReady(thread: Worker, subscription: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const onMessage = (message: ThreadToHost) => {
      if (message.type === 'ready') {
        thread.off('message', onMessage);
        resolve();
      } else if (message.type === 'startFailed') {
        thread.off('message', onMessage);
        reject(
          new DeclarationError(`subscription "${subscription}": a worker thread could not start: ${message.error.message}`, {
            cause: new ThreadError(message.error),
          }),
        );
      }
    };
    thread.on('message', onMessage);
    thread.once('error', reject);
  });
}

/**
 * The compiled entry (`thread-entry.js`) in a built package. From TypeScript sources (the
 * project's own tests) a worker cannot take `--import tsx`, so a small bootstrap registers tsx's
 * loader inside the thread and then imports the `.ts` entry.
 */
function startThread(setup: ThreadSetup): Worker {
  const compiled = new URL('./thread-entry.js', import.meta.url);
  if (existsSync(fileURLToPath(compiled))) return new Worker(compiled, { workerData: setup });
  const source = new URL('./thread-entry.ts', import.meta.url).href;
  const bootstrap = `const { register } = await import('tsx/esm/api'); register(); await import(${JSON.stringify(source)});`;
  return new Worker(bootstrap, { eval: true, workerData: setup });
}
