/**
 * The part of AsyncAPI 3.0.0 that `broker.asyncapi()` writes, as plain JSON-serialisable data:
 * every reference is a `$ref` into the same document, so `JSON.stringify` gives the whole of it.
 */

/** A JSON Schema (AsyncAPI's default schema format, a superset of draft-07). */
export type JsonSchema = { readonly [keyword: string]: unknown };

export interface AsyncApiReference {
  readonly $ref: string;
}

export interface AsyncApiInfo {
  readonly title: string;
  readonly version: string;
  readonly description?: string;
}

export interface AsyncApiServerVariable {
  readonly description?: string;
  readonly default?: string;
  readonly examples?: readonly string[];
}

/** A database the queues live in: its address without user or password, or only its protocol. */
export interface AsyncApiServer {
  readonly host: string;
  readonly protocol: string;
  readonly pathname?: string;
  readonly title?: string;
  readonly description?: string;
  readonly variables?: Readonly<Record<string, AsyncApiServerVariable>>;
}

export interface AsyncApiMessage {
  readonly name: string;
  readonly title?: string;
  readonly summary?: string;
  readonly contentType?: string;
  readonly headers?: JsonSchema;
  readonly payload?: JsonSchema;
}

/** One queue: the rows of one table, or of one group of a grouped table. */
export interface AsyncApiChannel {
  /** The table (`schema.table` or `table`), then `/` and the group on a grouped table. */
  readonly address: string;
  readonly title?: string;
  readonly description?: string;
  readonly messages: Readonly<Record<string, AsyncApiMessage>>;
  /** What a tool needs to find the rows: the table, the group column and value, the claim form. */
  readonly 'x-tablequeue': ChannelTableDescription;
}

export interface ChannelTableDescription {
  readonly table: string;
  readonly groupColumn?: string;
  readonly group?: string;
  readonly fifo?: boolean;
  readonly claimForm: 'rowLock' | 'lease' | 'advisory';
}

/** `send`: this service writes rows into the queue; `receive`: it claims and handles them. */
export interface AsyncApiOperation {
  readonly action: 'send' | 'receive';
  readonly channel: AsyncApiReference;
  readonly title?: string;
  readonly summary?: string;
  readonly description?: string;
  readonly messages: readonly AsyncApiReference[];
}

export interface AsyncApiDocument {
  readonly asyncapi: '3.0.0';
  readonly info: AsyncApiInfo;
  readonly defaultContentType: 'application/json';
  readonly servers: Readonly<Record<string, AsyncApiServer>>;
  readonly channels: Readonly<Record<string, AsyncApiChannel>>;
  readonly operations: Readonly<Record<string, AsyncApiOperation>>;
}
