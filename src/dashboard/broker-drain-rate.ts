import type { BrokerList } from './broker-directory.js';

/** What a broker's beat says about the rows its subscriptions of the watched tables finished. */
interface BeatReading {
  /** When the beat was written, on this host's clock (read time minus the age the database computed). */
  readonly beatAt: number;
  readonly finished: number;
  /** Rows finished per second between this beat and the one before; 0 after the first. */
  readonly ratePerSecond: number;
}

/**
 * Rows per second the reporting brokers finish (acked or dropped) on the watched tables, from
 * the counters in their heartbeats. A table that deletes rows on ack shows the dashboard only
 * the net fall in depth, which reads zero while publishes keep up with the drain; the brokers'
 * own counters do not. Each broker's rate holds from one beat to the next, so it lags the
 * inspections by up to one heartbeat interval.
 */
export class BrokerDrainRate {
  readonly #tables: ReadonlySet<string>;
  #readings = new Map<string, BeatReading>();

  constructor(tables: Iterable<string>) {
    this.#tables = new Set(tables);
  }

  /** Takes a fresh read of the heartbeat table (read at `readAt`) and returns the summed rate. */
  update(list: BrokerList, readAt: number): number {
    const readings = new Map<string, BeatReading>();
    let total = 0;
    for (const broker of list.brokers) {
      const beatAt = readAt - broker.seenMsAgo;
      const finished = this.#finishedOn(broker.subscriptions);
      const previous = this.#readings.get(broker.id);
      let ratePerSecond = previous?.ratePerSecond ?? 0;
      let reading: BeatReading = { beatAt, finished, ratePerSecond };
      if (previous !== undefined) {
        // The same beat read twice gives an age that moved with the clock: keep the first reading.
        const isNewBeat = finished !== previous.finished || beatAt - previous.beatAt >= broker.intervalMs / 2;
        if (isNewBeat && beatAt > previous.beatAt) {
          ratePerSecond = (Math.max(0, finished - previous.finished) * 1000) / (beatAt - previous.beatAt);
          reading = { beatAt, finished, ratePerSecond };
        } else {
          reading = previous;
        }
      }
      readings.set(broker.id, reading);
      total += reading.ratePerSecond;
    }
    this.#readings = readings;
    return total;
  }

  #finishedOn(subscriptions: readonly unknown[]): number {
    let finished = 0;
    for (const subscription of subscriptions) {
      if (subscription === null || typeof subscription !== 'object') continue;
      const { queue, acked, dropped } = subscription as Record<string, unknown>;
      if (typeof queue !== 'string' || !this.#tables.has(queue.split('/')[0] ?? '')) continue;
      finished += (typeof acked === 'number' ? acked : 0) + (typeof dropped === 'number' ? dropped : 0);
    }
    return finished;
  }
}
