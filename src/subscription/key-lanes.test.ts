import { describe, expect, it } from 'vitest';
import type { HeldRow } from '../claim/claim-form.js';
import { createDeferred, type Deferred } from '../internal/deferred.js';
import type { DeliveryUnit } from './dispatcher.js';
import { KeyLanes } from './key-lanes.js';

function row(id: string, key: string | null): HeldRow {
  return {
    id,
    idValue: id,
    attempt: 1,
    row: { key },
    settle: () => Promise.resolve(),
    handBack: () => Promise.resolve(),
  };
}

describe('KeyLanes', () => {
  it('WP-10: hashes a key to the same lane every time, in every process', () => {
    // Lanes are FNV-1a of the key (its published vectors are checked in internal/fnv1a.test.ts),
    // fixed so they stay put across processes and versions.
    const lanes = new KeyLanes({ lanes: 4, run: () => Promise.resolve(), onIdle: () => undefined, keyOf: () => null });
    // 0x124fb217 % 4
    expect(lanes.laneOf('customer-1')).toBe(3);
    expect(lanes.laneOf('foobar')).toBe(0);
  });

  it('WP-10: runs rows of one key one at a time in claim order, other keys beside them', async () => {
    const started: string[] = [];
    const gates = new Map<string, Deferred<void>>();
    const firstIdle = createDeferred();
    const lanes = new KeyLanes({
      lanes: 8,
      keyOf: (unit: DeliveryUnit) => unit[0]!.row['key'] as string | null,
      // Called once a finished unit's lane has started the next unit waiting in it.
      onIdle: () => firstIdle.resolve(),
      run: (unit) => {
        const id = unit[0]!.id;
        started.push(id);
        const gate = createDeferred();
        gates.set(id, gate);
        return gate.promise;
      },
    });
    const keyA = 'a';
    const keyB = [...'bcdefghij'].find((key) => lanes.laneOf(key) !== lanes.laneOf(keyA))!;
    lanes.offer([row('a1', keyA)]);
    lanes.offer([row('a2', keyA)]);
    lanes.offer([row('b1', keyB)]);
    expect(started).toEqual(['a1', 'b1']);
    expect(lanes.waiting).toBe(1);
    gates.get('a1')!.resolve();
    await firstIdle.promise;
    expect(started).toEqual(['a1', 'b1', 'a2']);
    gates.get('a2')!.resolve();
    gates.get('b1')!.resolve();
    await lanes.drain();
    expect(lanes.inWork).toBe(0);
  });

  it('WP-10: spreads keyless rows over the lanes in turn', () => {
    const lanes = new KeyLanes({ lanes: 3, run: () => Promise.resolve(), onIdle: () => undefined, keyOf: () => null });
    expect([lanes.laneOf(null), lanes.laneOf(null), lanes.laneOf(null), lanes.laneOf(null)]).toEqual([0, 1, 2, 0]);
  });
});
