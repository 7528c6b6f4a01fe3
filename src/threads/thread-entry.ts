/**
 * The code a worker thread runs: it loads the handler module, opens its own small pool, and
 * runs one delivery at a time as the host asks. Claims and settlements stay on the main thread.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { pathToFileURL } from 'node:url';
import type { Queue } from '../definition/define-table.js';
import { createDriver } from '../driver/create-driver.js';
import type { Driver } from '../driver/driver.js';
import type { PublishOptions } from '../publish/publish-options.js';
import {
  serializeError,
  ThreadError,
  type HostToThread,
  type ThreadMessage,
  type ThreadSetup,
  type ThreadToHost,
} from './thread-messages.js';

type ThreadHandler = (input: unknown, context: unknown) => unknown;

const port = parentPort!;
const setup = workerData as ThreadSetup;
const abort = new AbortController();
let nextRequestId = 0;
const pendingPublishes = new Map<number, { resolve: (id: string) => void; reject: (error: Error) => void }>();

function send(message: ThreadToHost): void {
  port.postMessage(message);
}

async function loadHandler(): Promise<ThreadHandler> {
  const specifier = /^[a-z]+:/i.test(setup.module) ? setup.module : pathToFileURL(setup.module).href;
  const loaded = (await import(specifier)) as Record<string, unknown>;
  const handler = loaded[setup.exportName];
  if (typeof handler !== 'function') {
    throw new TypeError(`module ${setup.module} has no function export "${setup.exportName}" for subscription "${setup.subscription}"`);
  }
  return handler as ThreadHandler;
}

function createContext(driver: Driver) {
  return {
    get signal() {
      return abort.signal;
    },
    query: async (sql: string, params: readonly unknown[] = []) =>
      (await driver.execute({ name: 'context.query', sql, values: params })).rows,
    publish: (queue: Queue<unknown>, payload: unknown, options: PublishOptions = {}) => {
      if (options.tx !== undefined) {
        return Promise.reject(new TypeError('publish from a worker thread cannot join a transaction (tx)'));
      }
      const requestId = nextRequestId++;
      return new Promise<string>((resolve, reject) => {
        pendingPublishes.set(requestId, { resolve, reject });
        send({ type: 'publish', requestId, table: queue.table.spec, queue: queue.name, payload, options });
      });
    },
  };
}

function toHandlerMessage(message: ThreadMessage) {
  return { ...message, raw: message.raw === undefined ? undefined : Buffer.from(message.raw) };
}

async function main(): Promise<void> {
  let handler: ThreadHandler;
  let driver: Driver;
  try {
    handler = await loadHandler();
    driver = createDriver(setup.database, { poolSize: setup.connections, pooler: setup.pooler });
    await driver.open();
  } catch (error) {
    send({ type: 'startFailed', error: serializeError(error) });
    return;
  }
  const context = createContext(driver);
  port.on('message', (message: HostToThread) => {
    switch (message.type) {
      case 'invoke': {
        const messages = message.messages.map(toHandlerMessage);
        Promise.resolve()
          .then(() => handler(setup.isBatch ? messages : messages[0], context))
          .then(
            (result) => send({ type: 'returned', callId: message.callId, result }),
            (error: unknown) => send({ type: 'threw', callId: message.callId, error: serializeError(error) }),
          );
        return;
      }
      case 'published': {
        const pending = pendingPublishes.get(message.requestId);
        pendingPublishes.delete(message.requestId);
        if (message.error) pending?.reject(new ThreadError(message.error));
        else pending?.resolve(message.id!);
        return;
      }
      case 'abort':
        abort.abort();
        return;
      case 'close':
        void driver.close().finally(() => {
          send({ type: 'closed' });
          port.close();
        });
        return;
    }
  });
  send({ type: 'ready' });
}

void main();
