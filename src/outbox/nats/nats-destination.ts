import { ConnectionError, DeclarationError, DestinationError } from '../../errors.js';
import { MAX_TIMER_MS } from '../../option-checks.js';
import { OUTBOX_RECORD_ID_HEADER, type OutboxDestination, type OutboxRecord, type RefusalCandidate } from '../destination.js';
import type {
  NatsConnectionLike,
  NatsErrorLike,
  NatsHeadersLike,
  NatsJetStreamClientLike,
  NatsModuleLike,
} from './nats-like.js';

/** A stream the destination creates on `open()` when no stream of that name exists. */
export interface NatsStreamOptions {
  readonly name: string;
  /** The subjects it takes; default `<subjectPrefix>>` (every subject under the prefix). */
  readonly subjects?: readonly string[];
  /** How long JetStream remembers message ids to drop resends; default 120,000 (JetStream's own). */
  readonly duplicateWindowMs?: number;
  /** Default `file`. */
  readonly storage?: 'file' | 'memory';
}

export interface NatsDestinationOptions {
  /** `nats://host:port` or `host:port`, or several of them. */
  readonly servers: string | readonly string[];
  /** A record's subject is this prefix followed by its name; default none (the name itself). */
  readonly subjectPrefix?: string;
  /** A record's subject computed from its name, instead of `subjectPrefix`. */
  readonly subjectOf?: (name: string) => string;
  /**
   * Put before every record id to form JetStream's message id. JetStream deduplicates per stream,
   * so when several outbox tables publish into one stream, give each its own prefix: equal ids of
   * two tables would otherwise drop each other's messages as duplicates.
   */
  readonly messageIdPrefix?: string;
  /** Creates this stream on `open()` unless a stream of its name exists (which is left as it is). */
  readonly ensureStream?: NatsStreamOptions;
  /** How long to wait for each PubAck before `send` fails; default 5,000. */
  readonly ackTimeoutMs?: number;
  /** How long `open()` waits for the server; default 10,000. */
  readonly connectTimeoutMs?: number;
  /** More options for the package's `connect` (user and pass, token, TLS, …). */
  readonly connectOptions?: Readonly<Record<string, unknown>>;
}

const DEFAULT_ACK_TIMEOUT_MS = 5_000;
const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;
/** JetStream's default duplicate window. */
const DEFAULT_DUPLICATE_WINDOW_MS = 120_000;
const CONNECTION_NAME = 'tablequeue-outbox';
/** The header JetStream's `msgID` option writes. */
const MESSAGE_ID_HEADER = 'Nats-Msg-Id';
/**
 * The longest record id a write is checked with before its row (and so its id) exists: a
 * bigint's 19 digits and a minus, a UUID's 36 characters, with room to spare.
 */
const LONGEST_UNWRITTEN_ID = 'x'.repeat(40);
/** What the package reports when a request finds no subscriber: no stream listens on the subject. */
const NO_RESPONDERS = '503';
/** JetStream's error code for a stream that does not exist. */
const STREAM_NOT_FOUND = 10059;
const CONNECTION_FAILURES = new Set(['CONNECTION_REFUSED', 'CONNECTION_TIMEOUT', 'CONNECTION_CLOSED', 'DISCONNECT']);

/**
 * Publishes outbox records to NATS JetStream. Each record goes to the subject derived from its
 * name with the record id as JetStream's message id, so a resend within the stream's duplicate
 * window is acknowledged as a duplicate and stored once. A `send` publishes every record before
 * awaiting any PubAck (the acks come back over the one connection in any order) and resolves
 * when all arrived.
 *
 * The connection does not reconnect by itself: a lost connection fails the `send` in flight at
 * once instead of after the ack timeout, and the relay's next `open()` connects again.
 */
export class NatsDestination implements OutboxDestination {
  readonly description: string;
  readonly #options: Required<Omit<NatsDestinationOptions, 'ensureStream' | 'subjectOf' | 'servers'>> & {
    readonly servers: readonly string[];
    readonly ensureStream: ResolvedStream | undefined;
  };
  readonly #subjectOf: (name: string) => string;
  #library: NatsModuleLike | undefined;
  #connection: NatsConnectionLike | undefined;
  #jetStream: NatsJetStreamClientLike | undefined;
  #opening: Promise<void> | undefined;
  /** Counts `close()` calls, so a connection that opens after one is closed instead of kept. */
  #closings = 0;

  constructor(options: NatsDestinationOptions) {
    const servers = typeof options.servers === 'string' ? [options.servers] : [...options.servers];
    if (servers.length === 0 || servers.some((server) => server.trim() === '')) {
      throw new DeclarationError('the nats destination needs servers: "nats://host:port" or a list of them');
    }
    if (options.subjectPrefix !== undefined && options.subjectOf !== undefined) {
      throw new DeclarationError('the nats destination takes subjectPrefix or subjectOf, not both');
    }
    const subjectPrefix = options.subjectPrefix ?? '';
    if (/[\s*>]/.test(subjectPrefix)) {
      throw new DeclarationError(`subjectPrefix "${subjectPrefix}" contains whitespace or a wildcard; use plain subject tokens`);
    }
    const ackTimeoutMs = positiveMs('ackTimeoutMs', options.ackTimeoutMs ?? DEFAULT_ACK_TIMEOUT_MS);
    const connectTimeoutMs = positiveMs('connectTimeoutMs', options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS);
    const ensureStream = options.ensureStream === undefined ? undefined : resolveStream(options.ensureStream, subjectPrefix);
    this.#options = Object.freeze({
      servers: Object.freeze(servers),
      subjectPrefix,
      messageIdPrefix: options.messageIdPrefix ?? '',
      ensureStream,
      ackTimeoutMs,
      connectTimeoutMs,
      connectOptions: Object.freeze({ ...options.connectOptions }),
    });
    this.#subjectOf = options.subjectOf ?? ((name) => subjectPrefix + name);
    this.description = `nats jetstream at ${servers.map(withoutCredentials).join(', ')}`;
  }

  open(): Promise<void> {
    if (this.#connection !== undefined && !this.#connection.isClosed()) return Promise.resolve();
    this.#opening ??= this.#connect().finally(() => {
      this.#opening = undefined;
    });
    return this.#opening;
  }

  async send(records: readonly OutboxRecord[]): Promise<void> {
    const jetStream = this.#jetStream;
    if (jetStream === undefined || this.#connection === undefined || this.#connection.isClosed()) {
      throw new ConnectionError({
        host: this.#host(),
        message: `${this.description} is not connected; open() it first (the relay opens it again after a failed send)`,
      });
    }
    const library = this.#library!;
    // Subjects and headers are checked for every record before the first one is published.
    const messages = records.map((record) => ({
      record,
      subject: this.#subjectFor(record),
      headers: this.#headersFor(library, record),
    }));
    const published = messages.map(({ record, subject, headers }) => ({
      subject,
      ack: jetStream.publish(subject, record.payload, {
        msgID: this.#options.messageIdPrefix + record.id,
        headers,
        timeout: this.#options.ackTimeoutMs,
      }),
    }));
    // Every publish is on the wire before the first ack is awaited; a duplicate ack confirms too.
    const outcomes = await Promise.allSettled(published.map(({ ack }) => ack));
    const failedAt = outcomes.findIndex((outcome) => outcome.status === 'rejected');
    if (failedAt === -1) return;
    const failure = (outcomes[failedAt] as PromiseRejectedResult).reason;
    throw this.#publishFailure(failure, published[failedAt]!.subject, records[failedAt]!.id);
  }

  async close(): Promise<void> {
    this.#closings += 1;
    const connection = this.#connection;
    this.#connection = undefined;
    this.#jetStream = undefined;
    if (connection === undefined || connection.isClosed()) return;
    await connection.close().catch(() => undefined);
  }

  async #connect(): Promise<void> {
    const closingPrevious = this.close();
    const closings = this.#closings;
    await closingPrevious;
    this.#library ??= await loadNats();
    const library = this.#library;
    let connection: NatsConnectionLike;
    try {
      connection = await library.connect({
        name: CONNECTION_NAME,
        ...this.#options.connectOptions,
        servers: [...this.#options.servers],
        reconnect: false,
        timeout: this.#options.connectTimeoutMs,
      });
    } catch (error) {
      throw new ConnectionError({
        host: this.#host(),
        message: `cannot reach NATS at ${this.#host()} (${reasonOf(error)}); start the server or fix the destination's servers`,
        cause: error,
      });
    }
    try {
      if (this.#options.ensureStream !== undefined) await this.#ensureStream(library, connection, this.#options.ensureStream);
    } catch (error) {
      await connection.close().catch(() => undefined);
      throw error;
    }
    if (closings !== this.#closings) {
      await connection.close().catch(() => undefined);
      throw new ConnectionError({ host: this.#host(), message: `${this.description} was closed while it opened` });
    }
    this.#connection = connection;
    this.#jetStream = connection.jetstream({ timeout: this.#options.ackTimeoutMs });
  }

  async #ensureStream(library: NatsModuleLike, connection: NatsConnectionLike, stream: ResolvedStream): Promise<void> {
    try {
      const manager = await connection.jetstreamManager({ timeout: this.#options.ackTimeoutMs });
      const exists = await manager.streams.info(stream.name).then(
        () => true,
        (error: unknown) => {
          if ((error as NatsErrorLike).api_error?.err_code === STREAM_NOT_FOUND) return false;
          throw error;
        },
      );
      if (exists) return;
      await manager.streams.add({
        name: stream.name,
        subjects: [...stream.subjects],
        duplicate_window: library.nanos(stream.duplicateWindowMs),
        storage: stream.storage === 'memory' ? library.StorageType.Memory : library.StorageType.File,
      });
    } catch (error) {
      throw new DestinationError({
        destination: this.description,
        message:
          `cannot ensure JetStream stream "${stream.name}" on ${this.#host()} (${reasonOf(error)}); ` +
          'check that JetStream is enabled and that no other stream takes the same subjects',
        cause: error,
      });
    }
  }

  /**
   * A record no send could ever publish: its name maps to a subject one cannot publish to, or
   * (once connected) its payload and headers together are over the server's `max_payload`. The
   * relay sends the records before it and names it; a broker relaying here refuses to write it
   * (counting its id header at 40 characters, the id not being known yet).
   */
  refusalOf(record: RefusalCandidate): string | undefined {
    const subject: unknown = this.#subjectOf(record.name);
    if (!isPublishableSubject(subject)) return unpublishableSubject(record.name, subject);
    const maxPayload = this.#connection?.info?.max_payload;
    if (maxPayload === undefined) return undefined;
    const id = record.id ?? LONGEST_UNWRITTEN_ID;
    const headerBytes = natsHeaderBytes({ ...record.headers, [OUTBOX_RECORD_ID_HEADER]: id, [MESSAGE_ID_HEADER]: this.#options.messageIdPrefix + id });
    if (record.payload.byteLength + headerBytes <= maxPayload) return undefined;
    return (
      `its payload is ${record.payload.byteLength} bytes and its headers ${headerBytes}, over the server's max_payload of ${maxPayload} ` +
      '(which counts both); raise max_payload on the server or send smaller records'
    );
  }

  #subjectFor(record: OutboxRecord): string {
    const subject: unknown = this.#subjectOf(record.name);
    if (!isPublishableSubject(subject)) {
      throw new DestinationError({ destination: this.description, message: `outbox record ${record.id}: ${unpublishableSubject(record.name, subject)}` });
    }
    return subject;
  }

  #headersFor(library: NatsModuleLike, record: OutboxRecord): NatsHeadersLike {
    const headers = library.headers();
    for (const [key, value] of Object.entries(record.headers)) {
      try {
        headers.set(key, value);
      } catch (error) {
        throw new DestinationError({
          destination: this.description,
          message: `outbox record ${record.id} has header "${key}" that NATS cannot carry (${reasonOf(error)}); use header names without spaces or colons`,
          cause: error,
        });
      }
    }
    headers.set(OUTBOX_RECORD_ID_HEADER, record.id);
    return headers;
  }

  #publishFailure(error: unknown, subject: string, recordId: string): Error {
    const code = (error as NatsErrorLike | undefined)?.code;
    if (code === NO_RESPONDERS) {
      return new DestinationError({
        destination: this.description,
        message:
          `no JetStream stream takes subject "${subject}" on ${this.#host()} (or JetStream is not enabled there); ` +
          'add a stream whose subjects match it, or set ensureStream',
        cause: error,
      });
    }
    const connectionLost = this.#connection?.isClosed() ?? true;
    if (connectionLost || (typeof code === 'string' && CONNECTION_FAILURES.has(code))) {
      return new ConnectionError({
        host: this.#host(),
        message: `lost the connection to NATS at ${this.#host()} before JetStream acknowledged record ${recordId}; the records will be sent again`,
        cause: error,
      });
    }
    if (code === 'TIMEOUT') {
      return new ConnectionError({
        host: this.#host(),
        message:
          `JetStream at ${this.#host()} did not acknowledge record ${recordId} on subject "${subject}" within ${this.#options.ackTimeoutMs} ms; ` +
          'the records will be sent again (raise ackTimeoutMs if the stream is slow to store)',
        cause: error,
      });
    }
    return new DestinationError({
      destination: this.description,
      message: `JetStream refused record ${recordId} on subject "${subject}": ${reasonOf(error)}`,
      cause: error,
    });
  }

  #host(): string {
    return this.#options.servers.map(withoutCredentials).join(', ');
  }
}

/** A JetStream destination; see `NatsDestination`. */
export function createNatsDestination(options: NatsDestinationOptions): NatsDestination {
  return new NatsDestination(options);
}

/** Loads the optional `nats` package; the error says how to install it. */
export async function loadNats(load: () => Promise<unknown> = () => import('nats')): Promise<NatsModuleLike> {
  let namespace: unknown;
  try {
    namespace = await load();
  } catch (error) {
    throw new DeclarationError(`the nats destination needs the "nats" package, but ${missingReason(error, 'nats')}`, {
      cause: error,
    });
  }
  const { default: defaultExport } = namespace as { default?: unknown };
  return (defaultExport ?? namespace) as NatsModuleLike;
}

type ResolvedStream = Required<NatsStreamOptions>;

function resolveStream(stream: NatsStreamOptions, subjectPrefix: string): ResolvedStream {
  if (!/^[^\s.*>/\\]+$/.test(stream.name)) {
    throw new DeclarationError(`ensureStream.name "${stream.name}" is not a JetStream stream name (no whitespace, ".", "*", ">", slashes)`);
  }
  const subjects = stream.subjects ?? (subjectPrefix.endsWith('.') ? [`${subjectPrefix}>`] : undefined);
  if (subjects === undefined || subjects.length === 0) {
    throw new DeclarationError(
      `ensureStream "${stream.name}" needs subjects, or a subjectPrefix ending in "." to take every subject under it`,
    );
  }
  return Object.freeze({
    name: stream.name,
    subjects: Object.freeze([...subjects]),
    duplicateWindowMs: positiveMs('ensureStream.duplicateWindowMs', stream.duplicateWindowMs ?? DEFAULT_DUPLICATE_WINDOW_MS),
    storage: stream.storage ?? 'file',
  });
}

function positiveMs(name: string, value: number): number {
  if (!Number.isInteger(value) || value <= 0 || value > MAX_TIMER_MS) {
    throw new DeclarationError(`${name} must be a whole number of milliseconds from 1 to ${MAX_TIMER_MS}, got ${value}`);
  }
  return value;
}

/** `nats://user:secret@host:4222` → `host:4222`: descriptions and errors never show credentials. */
function withoutCredentials(server: string): string {
  try {
    return new URL(server.includes('://') ? server : `nats://${server}`).host;
  } catch {
    return server.replace(/^[^@]*@/, '');
  }
}

function missingReason(error: unknown, packageName: string): string {
  const isMissing = (error as { code?: unknown } | undefined)?.code === 'ERR_MODULE_NOT_FOUND';
  return isMissing ? `it is not installed: npm install ${packageName}` : `it failed to load (${reasonOf(error)})`;
}

function reasonOf(error: unknown): string {
  const apiError = (error as NatsErrorLike | undefined)?.api_error;
  if (apiError?.description !== undefined) return apiError.description;
  return error instanceof Error ? error.message : String(error);
}

/**
 * The size of the header block a message carries on the wire (`NATS/1.0`, a `name: value` line
 * per header, an empty line), which the server counts against `max_payload` with the payload.
 */
function natsHeaderBytes(headers: Readonly<Record<string, string>>): number {
  const lines = Object.entries(headers).reduce((sum, [name, value]) => sum + Buffer.byteLength(name) + Buffer.byteLength(value) + 4, 0);
  return 'NATS/1.0\r\n'.length + lines + 2;
}

function isPublishableSubject(subject: unknown): subject is string {
  return typeof subject === 'string' && !/\s/.test(subject) && subject.split('.').every((token) => token !== '' && token !== '*' && token !== '>');
}

function unpublishableSubject(name: string, subject: unknown): string {
  return (
    `the name "${name}" maps to subject "${String(subject)}", which is not a subject one can publish to ` +
    '(no whitespace, empty tokens or wildcards); rename the records or change subjectPrefix/subjectOf'
  );
}
