import type { NotifyStatements } from '../dialect/notify.js';
import type { NotificationClient, NotificationHandlers } from '../driver/driver.js';
import { abortableSleep } from '../internal/abortable-sleep.js';
import { backoffDelayMs } from '../internal/backoff.js';
import { bindStatement } from '../statement.js';
import type { TableSpec } from '../table/table-spec.js';

/**
 * The first reconnect waits this long, each failed one doubles it up to the maximum. A killed
 * session comes back after 100 ms; a server that stays down sees one attempt every 30 s, and the
 * subscriptions poll at their interval meanwhile.
 */
export const RECONNECT_FIRST_DELAY_MS = 100;
export const RECONNECT_MAX_DELAY_MS = 30_000;

export interface NotifyListenerOptions {
  /** Opens a session beside the pool (`Driver.openNotificationClient`). */
  readonly openSession: (handlers: NotificationHandlers) => Promise<NotificationClient>;
  readonly statements: NotifyStatements;
  /** Every subscribed table; one channel each. */
  readonly tables: readonly TableSpec[];
  /** Wakes this broker's subscriptions of a table: of one group, or all of them when `group` is undefined. */
  readonly wake: (spec: TableSpec, group: string | undefined) => void;
  readonly onError: (error: unknown, detail: Record<string, unknown>) => void;
  readonly onWarning: (message: string) => void;
  /**
   * Channels that name no table, each with what a notification on it does: given the payload, or
   * undefined after a reconnect, when notifications sent meanwhile are gone.
   */
  readonly channels?: ReadonlyMap<string, (payload: string | undefined) => void>;
}

export interface ListenerStats {
  /** Whether the session is connected and listening on every channel now. */
  readonly isListening: boolean;
  /** Times the session was lost and listening again. */
  readonly reconnects: number;
  /** Notifications received for the subscribed tables, this broker's own publishes included. */
  readonly notifications: number;
}

/**
 * The broker's LISTEN session (Postgres): one per broker, beside the pool. It listens on the
 * channel of every subscribed table before the first claim, and a notification wakes the
 * subscriptions of its table and group. When the session is lost it reconnects with a growing
 * backoff for as long as the broker runs, listens again and wakes every subscription once, since
 * notifications sent while it was away are gone. Polling stays the floor: a missed notification
 * costs at most one poll interval.
 */
export class NotifyListener {
  readonly #options: NotifyListenerOptions;
  readonly #tablesByChannel = new Map<string, TableSpec>();
  readonly #closing = new AbortController();
  #session: NotificationClient | undefined;
  #reconnecting: Promise<void> | undefined;
  #reconnects = 0;
  #notifications = 0;

  /** Names every channel now, so a table whose channel the server would refuse stops `start()` first. */
  constructor(options: NotifyListenerOptions) {
    this.#options = options;
    for (const spec of options.tables) this.#tablesByChannel.set(options.statements.channel(spec), spec);
  }

  /** Connects and listens on every channel; a failure here fails the broker's start. */
  async open(): Promise<void> {
    this.#session = await this.#listen();
  }

  stats(): ListenerStats {
    return { isListening: this.#session !== undefined, reconnects: this.#reconnects, notifications: this.#notifications };
  }

  /** Stops reconnecting and ends the session. */
  async close(): Promise<void> {
    this.#closing.abort();
    await this.#reconnecting;
    const session = this.#session;
    this.#session = undefined;
    await session?.close();
  }

  async #listen(): Promise<NotificationClient> {
    const { openSession, statements } = this.#options;
    // Known once open; a session lost before it listens on every channel fails #listen instead.
    let session: NotificationClient | undefined = undefined;
    session = await openSession({
      onNotification: (channel, payload) => this.#onNotification(channel, payload),
      onLost: (error) => {
        if (session !== undefined && session === this.#session) this.#onLost(error);
      },
    });
    try {
      for (const spec of this.#tablesByChannel.values()) await session.execute(bindStatement(statements.listen(spec), {}));
      for (const channel of this.#options.channels?.keys() ?? []) {
        await session.execute(bindStatement(statements.listenTo(channel), {}));
      }
    } catch (error) {
      await session.close();
      throw error;
    }
    return session;
  }

  #onNotification(channel: string, payload: string): void {
    const onChannel = this.#options.channels?.get(channel);
    if (onChannel !== undefined) {
      onChannel(payload);
      return;
    }
    const spec = this.#tablesByChannel.get(channel);
    if (spec === undefined) return;
    this.#notifications += 1;
    this.#options.wake(spec, payload === '' ? undefined : payload);
  }

  #onLost(error: Error | undefined): void {
    this.#session = undefined;
    if (this.#closing.signal.aborted) return;
    const reason = error === undefined ? '' : ` (${error.message})`;
    this.#options.onWarning(
      `the LISTEN connection was lost${reason}; reconnecting, and subscriptions poll at their interval meanwhile`,
    );
    this.#reconnecting ??= this.#reconnect().finally(() => {
      this.#reconnecting = undefined;
    });
  }

  async #reconnect(): Promise<void> {
    const signal = this.#closing.signal;
    const backoff = { initialMs: RECONNECT_FIRST_DELAY_MS, maxMs: RECONNECT_MAX_DELAY_MS };
    let attempt = 1;
    while (!signal.aborted) {
      await abortableSleep(backoffDelayMs(backoff, attempt), signal);
      if (signal.aborted) return;
      let session: NotificationClient;
      try {
        session = await this.#listen();
      } catch (error) {
        attempt += 1;
        this.#options.onError(error, { phase: 'listen', retryInMs: backoffDelayMs(backoff, attempt) });
        continue;
      }
      if (signal.aborted) {
        await session.close();
        return;
      }
      this.#session = session;
      this.#reconnects += 1;
      for (const spec of this.#tablesByChannel.values()) this.#options.wake(spec, undefined);
      for (const onChannel of this.#options.channels?.values() ?? []) onChannel(undefined);
      return;
    }
  }
}
