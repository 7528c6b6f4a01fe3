import { DEFAULT_LEASE_MS } from '../../src/broker/broker-options.js';
import { resolveSubscribeOptions } from '../../src/subscription/subscription-options.js';
import type { ExtraSubscribeOptions } from '../partitioning/service-drain.js';

/** The subscription options that turn settlement coalescing of the lease form on and off. */
export interface CoalescingSwitch {
  /** The option's name, as the library spells it. */
  readonly option: string;
  readonly on: ExtraSubscribeOptions;
  readonly off: ExtraSubscribeOptions;
}

const PROBE_DEFAULTS = { pollIntervalMs: 1_000, leaseMs: DEFAULT_LEASE_MS };

/**
 * Finds the lease form's coalescing option in the library being measured: the benchmark runs
 * against the sources of the same tree, which may or may not have it yet. An option whose name
 * mentions coalescing and that takes `true` and `false` counts; undefined when there is none,
 * and the coalesced lease runs are left out.
 */
export function findCoalescingSwitch(): CoalescingSwitch | undefined {
  const option = subscriptionOptionNames().find((name) => /coalesc/i.test(name));
  if (option === undefined) return undefined;
  const on = { [option]: true } as ExtraSubscribeOptions;
  const off = { [option]: false } as ExtraSubscribeOptions;
  if (!isAccepted(on) || !isAccepted(off)) return undefined;
  return { option, on, off };
}

/** The names the library's validation lists when it refuses an unknown option. */
function subscriptionOptionNames(): string[] {
  try {
    resolveSubscribeOptions({ ['\u0000probe']: true } as never, PROBE_DEFAULTS, 'probe');
  } catch (error) {
    const listed = /the options are (.*)$/.exec(error instanceof Error ? error.message : '');
    if (listed?.[1] !== undefined) return listed[1].split(',').map((name) => name.trim());
  }
  return [];
}

function isAccepted(options: ExtraSubscribeOptions): boolean {
  try {
    resolveSubscribeOptions(options, PROBE_DEFAULTS, 'probe');
    return true;
  } catch {
    return false;
  }
}
