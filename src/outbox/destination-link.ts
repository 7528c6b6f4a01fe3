import type { OutboxDestination } from './destination.js';

/** Opens a destination before its first send and again after a failed one; concurrent sends share one attempt. */
export class DestinationLink {
  readonly #destination: OutboxDestination;
  #needsOpen = true;
  #opening: Promise<void> | undefined;

  constructor(destination: OutboxDestination) {
    this.#destination = destination;
  }

  async open(): Promise<void> {
    if (!this.#needsOpen) return;
    this.#opening ??= this.#destination.open().then(
      () => {
        this.#needsOpen = false;
        this.#opening = undefined;
      },
      (error: unknown) => {
        this.#opening = undefined;
        throw error;
      },
    );
    await this.#opening;
  }

  /** A send failed: the next one opens the destination again first. */
  failed(): void {
    this.#needsOpen = true;
  }
}
