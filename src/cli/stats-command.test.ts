import { describe, expect, it } from 'vitest';
import type { InspectionWithReaders } from './queue-readers-inspector.js';
import { inspectionJson, renderInspection } from './stats-command.js';
import { paintFor } from './terminal-output.js';

const NO_COLOUR = paintFor({ isTTY: false, write: () => true }, {});

function outboxInspection(relays: InspectionWithReaders['relays']): InspectionWithReaders {
  return {
    table: 'outbox',
    groups: [],
    deadLettered: 0,
    readAt: new Date('2026-12-03T19:00:00Z'),
    heartbeatTable: 'tablequeue_brokers',
    readers: null,
    unindexedRowsInWork: null,
    queueControlsTable: 'tablequeue_queue_controls',
    paused: null,
    relays,
  };
}

describe('stats of an outbox table', () => {
  it('prints each relay its brokers report, and under it the names it waits to send again and why', () => {
    const lines = renderInspection(
      outboxInspection([
        {
          broker: { id: 'b1', host: 'app-1', pid: 4121 },
          destination: 'nats jetstream at 127.0.0.1:4222',
          relayed: 1204,
          failedSends: 4,
          namesInWork: 0,
          namesWaitingToRetry: 2,
          waitingNames: [
            { name: 'orders', failedSends: 3, retryInMs: 2_500, error: 'DestinationError: HTTP 503' },
            { name: 'invoices', failedSends: 0, retryInMs: 0, error: null },
          ],
        },
      ]),
      NO_COLOUR,
    );
    expect(lines.slice(2)).toEqual([
      'relayed to nats jetstream at 127.0.0.1:4222 by app-1 pid 4121: 1,204 relayed, 4 failed sends, 0 names in work, 2 waiting to retry',
      '  waiting: "orders" after 3 failed sends in a row, again in 3s: DestinationError: HTTP 503',
      '  waiting: "invoices" after 0 failed sends in a row, due again now: its send could not begin (a service transaction held the SQLite handle)',
    ]);
  });

  it('says nothing of relays when none is reported, and gives null in JSON when the heartbeats cannot tell', () => {
    expect(renderInspection(outboxInspection([]), NO_COLOUR)).toHaveLength(2);
    expect(inspectionJson(outboxInspection(null)).relays).toBeNull();
  });
});
