import type { ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { spawnLineProcess } from './spawn-line-process.js';

const REPLICA = fileURLToPath(new URL('./schedule-replica.ts', import.meta.url));

export interface SpawnedScheduleReplica {
  readonly child: ChildProcess;
  /** The ticks whose messages this replica committed, as their ISO instants, in order. */
  readonly fired: string[];
  /** Resolves when the replica printed `ready`. */
  readonly ready: Promise<void>;
  /** Resolves when the process has exited. */
  readonly exited: Promise<number | null>;
}

/** Starts a broker that declares one schedule in a separate Node process (TypeScript through tsx). */
export function spawnScheduleReplica(config: Record<string, unknown>): SpawnedScheduleReplica {
  const replica = spawnLineProcess({ script: REPLICA, config, label: 'schedule replica', prefix: 'fired ', parse: (instant) => instant });
  return { child: replica.child, fired: replica.items, ready: replica.ready, exited: replica.exited };
}
