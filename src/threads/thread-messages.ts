import type { Message } from '../delivery/message.js';
import type { PoolerMode } from '../driver/driver.js';
import type { PublishOptions } from '../publish/publish-options.js';
import type { TableSpec } from '../table/table-spec.js';

/** What a thread is started with (its `workerData`). */
export interface ThreadSetup {
  readonly module: string;
  readonly exportName: string;
  /** The database URL; the thread opens its own small pool on it. */
  readonly database: string;
  /** The broker's `pooler` option. */
  readonly pooler: PoolerMode | undefined;
  readonly connections: number;
  readonly isBatch: boolean;
  readonly subscription: string;
}

/** A message as it crosses to a thread: structured-clone safe (Buffers arrive as Uint8Arrays). */
export type ThreadMessage = Omit<Message<unknown>, 'raw'> & { readonly raw: Uint8Array | undefined };

export type HostToThread =
  | { readonly type: 'invoke'; readonly callId: number; readonly messages: ThreadMessage[] }
  | { readonly type: 'published'; readonly requestId: number; readonly id?: string; readonly error?: SerializedError }
  | { readonly type: 'abort' }
  | { readonly type: 'close' };

export type ThreadToHost =
  | { readonly type: 'ready' }
  | { readonly type: 'startFailed'; readonly error: SerializedError }
  | { readonly type: 'returned'; readonly callId: number; readonly result: unknown }
  | { readonly type: 'threw'; readonly callId: number; readonly error: SerializedError }
  | {
      readonly type: 'publish';
      readonly requestId: number;
      readonly table: TableSpec;
      readonly queue: string;
      readonly payload: unknown;
      readonly options: Omit<PublishOptions, 'tx'>;
    }
  | { readonly type: 'closed' };

export interface SerializedError {
  readonly name: string;
  readonly message: string;
  readonly stack: string | undefined;
}

export function serializeError(error: unknown): SerializedError {
  if (error instanceof Error) return { name: error.name, message: error.message, stack: error.stack };
  return { name: 'Error', message: String(error), stack: undefined };
}

/** An error that happened on a worker thread, rebuilt on the main thread with its name and stack. */
export class ThreadError extends Error {
  constructor(serialized: SerializedError) {
    super(serialized.message);
    this.name = serialized.name;
    if (serialized.stack !== undefined) this.stack = serialized.stack;
  }
}
