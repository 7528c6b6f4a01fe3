import type { ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { spawnLineProcess } from './spawn-line-process.js';

const RELAY = fileURLToPath(new URL('./relay-process.ts', import.meta.url));

export interface SpawnedRelay {
  readonly child: ChildProcess;
  /** Record ids the relay's destination wrote, in order. */
  readonly sent: string[];
  /** Resolves when the relay printed `ready`. */
  readonly ready: Promise<void>;
  /** Resolves once the destination wrote `count` records. */
  sentAtLeast(count: number, timeoutMs?: number): Promise<void>;
  /** Resolves when the process has exited. */
  readonly exited: Promise<number | null>;
}

/** Starts an outbox relay in a separate Node process (TypeScript through tsx). */
export function spawnRelay(config: Record<string, unknown>): SpawnedRelay {
  const relay = spawnLineProcess({ script: RELAY, config, label: 'the relay', prefix: 'sent ', parse: (id) => id });
  return { child: relay.child, sent: relay.items, ready: relay.ready, exited: relay.exited, sentAtLeast: relay.itemsAtLeast };
}
