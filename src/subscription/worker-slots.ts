import type { DeliveryUnit, Dispatcher, RunUnit } from './dispatcher.js';

/**
 * `workers: n`: n interchangeable workers. A unit takes any free worker; units beyond the free
 * workers wait in claim order (WP-9).
 */
export class WorkerSlots implements Dispatcher {
  readonly capacity: number;
  readonly #run: RunUnit;
  readonly #onIdle: () => void;
  readonly #freeSlots: number[];
  readonly #waiting: DeliveryUnit[] = [];
  readonly #running = new Set<Promise<void>>();

  constructor(options: { workers: number; run: RunUnit; onIdle: () => void }) {
    this.capacity = options.workers;
    this.#run = options.run;
    this.#onIdle = options.onIdle;
    this.#freeSlots = Array.from({ length: options.workers }, (_, index) => options.workers - 1 - index);
  }

  get inWork(): number {
    return this.#running.size;
  }

  get waiting(): number {
    return this.#waiting.length;
  }

  offer(unit: DeliveryUnit): void {
    const slot = this.#freeSlots.pop();
    if (slot === undefined) this.#waiting.push(unit);
    else this.#start(unit, slot);
  }

  takeWaiting(): DeliveryUnit[] {
    return this.#waiting.splice(0);
  }

  async drain(): Promise<void> {
    while (this.#running.size > 0) await Promise.allSettled([...this.#running]);
  }

  #start(unit: DeliveryUnit, slot: number): void {
    const running = this.#run(unit, slot).finally(() => {
      this.#running.delete(running);
      const next = this.#waiting.shift();
      if (next === undefined) this.#freeSlots.push(slot);
      else this.#start(next, slot);
      this.#onIdle();
    });
    this.#running.add(running);
  }
}
