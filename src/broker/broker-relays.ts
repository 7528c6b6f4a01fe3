import { DeclarationError, AlreadySubscribedError } from '../errors.js';
import type { OutboxTable } from '../outbox/define-outbox.js';
import type { OutboxDestination } from '../outbox/destination.js';
import { Outbox } from '../outbox/outbox.js';
import { resolveRelayOptions, type RelayOptions } from '../outbox/relay-options.js';
import type { RelayRuntime } from '../outbox/relay-runtime.js';
import { Relay } from '../outbox/relay.js';
import type { BrokerState } from './broker-lifecycle.js';
import type { ResolvedBrokerOptions } from './broker-options.js';

/**
 * A `relay(...)` declaration checked against the broker's state and its relays so far, and added
 * to them: one relay per outbox table, before `start()`.
 */
export function declareRelay(
  relays: Relay[],
  declaration: { readonly outbox: OutboxTable | Outbox; readonly destination: OutboxDestination; readonly options: RelayOptions },
  broker: { readonly state: BrokerState; readonly options: ResolvedBrokerOptions },
): Relay {
  const { outbox, destination, options } = declaration;
  const table = outbox instanceof Outbox ? outbox.table : outbox;
  if (broker.state !== 'new') {
    throw new DeclarationError(`relay of outbox "${table.label}": declare relays before broker.start()`);
  }
  if (destination === null || typeof destination !== 'object' || typeof destination.send !== 'function') {
    throw new DeclarationError(`relay of outbox "${table.label}": the destination must be an OutboxDestination (queueDestination(queue), …)`);
  }
  if (relays.some((relay) => relay.outbox.spec.qualifiedName === table.spec.qualifiedName)) {
    // Relays of one table share its records: two destinations would each get only some of them.
    throw new AlreadySubscribedError(
      `outbox "${table.label}" is already relayed by this broker; one relay per outbox table, scaled with { concurrency: n }`,
    );
  }
  const resolved = resolveRelayOptions(options, broker.options, `relay of outbox "${table.label}"`);
  const relay = new Relay(table, destination, resolved);
  relays.push(relay);
  return relay;
}

/** At start: each relay opened on the broker's pool, in declaration order. */
export async function openRelays(relays: readonly Relay[], runtime: RelayRuntime): Promise<void> {
  for (const relay of relays) await relay.open(runtime);
}
