/**
 * A wake-up that is never lost: `wake()` while nobody waits is kept, and the next `wait()`
 * returns at once. A wait also ends after its timeout or when `cancel()` is called.
 */
export class WakeSignal {
  #pending = false;
  #settle: ((woken: boolean) => void) | undefined;
  #timer: NodeJS.Timeout | undefined;

  wake(): void {
    if (this.#settle) this.#end(true);
    else this.#pending = true;
  }

  /** Waits up to `timeoutMs`; resolves `true` when woken, `false` on timeout or cancel. */
  wait(timeoutMs: number): Promise<boolean> {
    if (this.#pending) {
      this.#pending = false;
      return Promise.resolve(true);
    }
    this.#end(false);
    return new Promise((resolve) => {
      this.#settle = resolve;
      this.#timer = setTimeout(() => this.#end(false), timeoutMs);
    });
  }

  /** Ends a wait in progress as if it timed out, and forgets a kept wake. */
  cancel(): void {
    this.#pending = false;
    this.#end(false);
  }

  #end(woken: boolean): void {
    const settle = this.#settle;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#settle = undefined;
    settle?.(woken);
  }
}
