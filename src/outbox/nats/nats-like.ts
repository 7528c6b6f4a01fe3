/**
 * The subset of the `nats` package (2.x) the JetStream destination uses, described structurally
 * so that `nats` stays an optional peer dependency and no public type needs its declarations.
 */

export interface NatsHeadersLike {
  set(key: string, value: string): void;
}

/** JetStream's answer to a publish: the stream and sequence that stored it, or a duplicate. */
export interface NatsPubAckLike {
  readonly stream: string;
  readonly seq: number;
  /** The message id was seen within the stream's duplicate window: nothing new was stored. */
  readonly duplicate: boolean;
}

/**
 * Optional as in the package, which takes a partial of its options. `Headers` is whatever the
 * package's `headers()` makes, so the package's own types fit these (see the unit test).
 */
export interface NatsPublishOptionsLike<Headers extends NatsHeadersLike = NatsHeadersLike> {
  /** JetStream's message id (`Nats-Msg-Id`), the key of its deduplication. */
  readonly msgID?: string;
  readonly headers?: Headers;
  /** How long to wait for the PubAck. */
  readonly timeout?: number;
}

export interface NatsJetStreamClientLike<Headers extends NatsHeadersLike = NatsHeadersLike> {
  publish(subject: string, payload: Uint8Array, options: NatsPublishOptionsLike<Headers>): Promise<NatsPubAckLike>;
}

/** `Storage` is the package's `StorageType` enum, reached through `NatsModuleLike.StorageType`. */
export interface NatsStreamConfigLike<Storage = string> {
  readonly name: string;
  readonly subjects: string[];
  /** Nanoseconds. */
  readonly duplicate_window: number;
  readonly storage: Storage;
}

export interface NatsJetStreamManagerLike<Storage = string> {
  readonly streams: {
    info(name: string): Promise<unknown>;
    add(config: NatsStreamConfigLike<Storage>): Promise<unknown>;
  };
}

export interface NatsConnectionLike<Headers extends NatsHeadersLike = NatsHeadersLike, Storage = string> {
  jetstream(options: { readonly timeout: number }): NatsJetStreamClientLike<Headers>;
  jetstreamManager(options: { readonly timeout: number }): Promise<NatsJetStreamManagerLike<Storage>>;
  isClosed(): boolean;
  close(): Promise<void>;
  /** What the server said of itself when the connection opened; `max_payload` bounds a message's headers and payload. */
  readonly info?: { readonly max_payload: number } | undefined;
}

export interface NatsConnectOptionsLike {
  readonly servers: string[];
  readonly reconnect: boolean;
  readonly timeout: number;
  readonly name: string;
  readonly [option: string]: unknown;
}

export interface NatsModuleLike<Headers extends NatsHeadersLike = NatsHeadersLike, Storage = string> {
  connect(options: NatsConnectOptionsLike): Promise<NatsConnectionLike<Headers, Storage>>;
  headers(): Headers;
  readonly StorageType: { readonly File: Storage; readonly Memory: Storage };
  nanos(milliseconds: number): number;
}

/** What the package's `NatsError` carries: a string code, and JetStream's own error for API failures. */
export interface NatsErrorLike {
  readonly code?: unknown;
  readonly message?: unknown;
  readonly api_error?: { readonly code?: number; readonly err_code?: number; readonly description?: string };
}
