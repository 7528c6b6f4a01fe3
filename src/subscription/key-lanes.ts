import { fnv1a32 } from '../internal/fnv1a.js';
import type { DeliveryUnit, Dispatcher, RunUnit } from './dispatcher.js';

/**
 * `workersByKey: n` (WP-10): n sequential lanes. A row goes to the lane chosen by a stable hash of
 * its partition key, so rows of one key never run on two lanes at once and keep their claim
 * order; rows without a key go to the lanes in turn.
 */
export class KeyLanes implements Dispatcher {
  readonly capacity: number;
  readonly #run: RunUnit;
  readonly #onIdle: () => void;
  readonly #keyOf: (unit: DeliveryUnit) => string | null;
  readonly #queues: DeliveryUnit[][];
  readonly #busy: boolean[];
  readonly #running = new Set<Promise<void>>();
  #nextKeylessLane = 0;
  #waitingCount = 0;

  constructor(options: {
    lanes: number;
    run: RunUnit;
    onIdle: () => void;
    keyOf: (unit: DeliveryUnit) => string | null;
  }) {
    this.capacity = options.lanes;
    this.#run = options.run;
    this.#onIdle = options.onIdle;
    this.#keyOf = options.keyOf;
    this.#queues = Array.from({ length: options.lanes }, () => []);
    this.#busy = Array.from({ length: options.lanes }, () => false);
  }

  get inWork(): number {
    return this.#running.size;
  }

  get waiting(): number {
    return this.#waitingCount;
  }

  offer(unit: DeliveryUnit): void {
    const lane = this.laneOf(this.#keyOf(unit));
    if (this.#busy[lane]) {
      this.#queues[lane]!.push(unit);
      this.#waitingCount += 1;
    } else {
      this.#start(unit, lane);
    }
  }

  /** The lane of a key: FNV-1a of its UTF-8 bytes, the same in every process and run; keyless rows take the lanes in turn. */
  laneOf(key: string | null): number {
    if (key === null) {
      const lane = this.#nextKeylessLane;
      this.#nextKeylessLane = (lane + 1) % this.capacity;
      return lane;
    }
    return fnv1a32(key) % this.capacity;
  }

  takeWaiting(): DeliveryUnit[] {
    this.#waitingCount = 0;
    return this.#queues.flatMap((queue) => queue.splice(0));
  }

  async drain(): Promise<void> {
    while (this.#running.size > 0) await Promise.allSettled([...this.#running]);
  }

  #start(unit: DeliveryUnit, lane: number): void {
    this.#busy[lane] = true;
    const running = this.#run(unit, lane).finally(() => {
      this.#running.delete(running);
      const next = this.#queues[lane]!.shift();
      if (next === undefined) {
        this.#busy[lane] = false;
      } else {
        this.#waitingCount -= 1;
        this.#start(next, lane);
      }
      this.#onIdle();
    });
    this.#running.add(running);
  }
}
