/**
 * Gathers settlements that arrive close together so they reach the database as one statement
 * per kind. Each kind has its own window, in one of these states:
 *
 *   empty ──first item──▶ open (timer running) ──window over | full | flushNow──▶ flushing ──▶ empty
 *
 * A window opens with its first item and flushes `windowMs` later, at once when it holds
 * `maxSize` items, or when `flushNow` is called. A window of 0 ms flushes after the rest of the
 * current turn of the event loop, which still gathers what one batch handler settles together.
 * While one window flushes, the next one of the same kind already gathers.
 */
export interface SettlementCoalescerOptions<Item> {
  /** How long a window stays open after its first item; 0 for the rest of this event-loop turn. */
  readonly windowMs: number;
  /** Items that fill a window: it flushes as soon as it holds this many. */
  readonly maxSize: number;
  /**
   * Settles one window's items, all of kind `key`. It answers each item itself (items carry
   * their own promise) and never rejects.
   */
  readonly flush: (key: string, items: Item[]) => Promise<void>;
}

interface Window<Item> {
  readonly items: Item[];
  readonly cancel: () => void;
}

export class SettlementCoalescer<Item> {
  readonly #options: SettlementCoalescerOptions<Item>;
  readonly #windows = new Map<string, Window<Item>>();
  readonly #flushes = new Set<Promise<void>>();
  /** The window in force: `windowMs`, or 0 once stop began (`flushNow({ thenImmediately: true })`). */
  #windowMs: number;

  constructor(options: SettlementCoalescerOptions<Item>) {
    if (!Number.isFinite(options.windowMs) || options.windowMs < 0) {
      throw new TypeError(`a settlement window must be 0 ms or more, got ${options.windowMs}`);
    }
    if (!Number.isInteger(options.maxSize) || options.maxSize < 1) {
      throw new TypeError(`a settlement window must hold at least 1 item, got ${options.maxSize}`);
    }
    this.#options = options;
    this.#windowMs = options.windowMs;
  }

  /** Items waiting in open windows (not yet flushing). */
  get pendingCount(): number {
    let count = 0;
    for (const window of this.#windows.values()) count += window.items.length;
    return count;
  }

  /** Flushes in flight. */
  get flushingCount(): number {
    return this.#flushes.size;
  }

  add(key: string, item: Item): void {
    let window = this.#windows.get(key);
    if (window === undefined) {
      window = this.#open(key);
      this.#windows.set(key, window);
    }
    window.items.push(item);
    if (window.items.length >= this.#options.maxSize) this.#flush(key);
  }

  /**
   * Flushes every open window now and waits for every flush in flight. With `thenImmediately`
   * (stop began), later items wait only for the rest of their event-loop turn.
   */
  async flushNow(options: { thenImmediately?: boolean } = {}): Promise<void> {
    if (options.thenImmediately === true) this.#windowMs = 0;
    for (const key of [...this.#windows.keys()]) this.#flush(key);
    while (this.#flushes.size > 0) await Promise.allSettled([...this.#flushes]);
  }

  #open(key: string): Window<Item> {
    const flush = () => this.#flush(key);
    if (this.#windowMs === 0) {
      const immediate = setImmediate(flush);
      return { items: [], cancel: () => clearImmediate(immediate) };
    }
    const timer = setTimeout(flush, this.#windowMs);
    return { items: [], cancel: () => clearTimeout(timer) };
  }

  #flush(key: string): void {
    const window = this.#windows.get(key);
    if (window === undefined) return;
    this.#windows.delete(key);
    window.cancel();
    const flushing = this.#options.flush(key, window.items).catch(() => undefined);
    this.#flushes.add(flushing);
    void flushing.then(() => this.#flushes.delete(flushing));
  }
}
