import type { ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { OutboxRelayConfig } from './outbox-relay.js';
import { spawnLineProcess } from './spawn-line-process.js';

const RELAY = fileURLToPath(new URL('./outbox-relay.ts', import.meta.url));

export interface SpawnedRelay {
  readonly child: ChildProcess;
  /** The record ids of each send JetStream confirmed, in the order the relay printed them. */
  readonly confirmedSends: string[][];
  /** Resolves when the relay has printed `count` confirmed sends. */
  confirmedAtLeast(count: number, timeoutMs?: number): Promise<void>;
  /** Resolves when the process has exited. */
  readonly exited: Promise<number | null>;
}

/** Starts an outbox relay in a separate Node process (TypeScript through tsx). */
export function spawnRelay(config: OutboxRelayConfig): SpawnedRelay {
  const relay = spawnLineProcess({
    script: RELAY,
    config,
    label: 'the relay',
    prefix: 'confirmed ',
    parse: (ids) => JSON.parse(ids) as string[],
  });
  return { child: relay.child, confirmedSends: relay.items, exited: relay.exited, confirmedAtLeast: relay.itemsAtLeast };
}
