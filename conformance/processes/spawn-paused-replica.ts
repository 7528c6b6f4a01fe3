import type { ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { spawnLineProcess } from './spawn-line-process.js';

const REPLICA = fileURLToPath(new URL('./paused-replica.ts', import.meta.url));

export interface PausedReplica {
  readonly child: ChildProcess;
  /** What the replica reported, in order: `claim <Date.now()>`, `paused`, `handling <id>`. */
  readonly events: string[];
  readonly ready: Promise<void>;
  readonly exited: Promise<number | null>;
  /** Resolves once `count` events from index `from` on satisfy `matches`. */
  eventsAtLeast(matches: (event: string) => boolean, count: number, from?: number, timeoutMs?: number): Promise<void>;
}

/** Starts paused-replica.ts in a separate Node process (TypeScript through tsx). */
export function spawnPausedReplica(config: {
  database: string;
  table: unknown;
  queue: string;
  pollIntervalMs: number;
}): PausedReplica {
  const replica = spawnLineProcess({ script: REPLICA, config, label: 'replica', prefix: 'event ', parse: (event) => event });
  const counted = (matches: (event: string) => boolean, from: number) => replica.items.slice(from).filter(matches).length;
  return {
    child: replica.child,
    events: replica.items,
    ready: replica.ready,
    exited: replica.exited,
    async eventsAtLeast(matches, count, from = 0, timeoutMs = 30_000) {
      const deadline = Date.now() + timeoutMs;
      while (counted(matches, from) < count) {
        await replica.itemsAtLeast(replica.items.length + 1, Math.max(1, deadline - Date.now()));
      }
    },
  };
}
