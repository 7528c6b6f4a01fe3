import { Queue } from '../definition/define-table.js';
import { LAST_ERROR_HEADER } from '../dialect/last-error-header.js';
import { TIMEOUT_HEADER } from '../delivery/message-timeout.js';
import type { StandardSchemaV1 } from '../delivery/standard-schema.js';
import { DeclarationError } from '../errors.js';
import { TRACEPARENT_HEADER, TRACESTATE_HEADER } from '../observability/trace-context.js';
import { SCHEDULED_AT_HEADER } from '../schedule/schedule-options.js';
import type { Decoder } from '../subscription/subscription-options.js';
import { isStandardSchema } from '../subscription/subscription-options.js';
import { parseDeadLetterTable, type TableSpec } from '../table/table-spec.js';
import type {
  AsyncApiChannel,
  AsyncApiDocument,
  AsyncApiMessage,
  AsyncApiOperation,
  ChannelTableDescription,
  JsonSchema,
} from './asyncapi-document.js';
import { databaseServer } from './database-server.js';
import { payloadSchemaOf, rebasedAt, type JsonSchemaConverter, type PayloadSchema } from './payload-schema.js';

/** A queue the service publishes to, with the validator its payloads pass, when it has one. */
export interface PublishedQueue {
  readonly queue: Queue<unknown>;
  /** A Standard Schema validator of the payloads; its JSON Schema becomes the message's payload. */
  readonly payload?: StandardSchemaV1<unknown, unknown>;
  readonly description?: string;
}

export interface AsyncApiOptions {
  /** `info.title`. Default "tablequeue queues". */
  title?: string;
  /** `info.version`, the version of the service's interface. Default "1.0.0". */
  version?: string;
  /** `info.description`. */
  description?: string;
  /**
   * Queues the service publishes to. A broker learns its subscriptions, schedules, dead letters and
   * relays from their declarations, but `publish` names its queue only when it runs.
   */
  publishes?: ReadonlyArray<Queue<unknown> | PublishedQueue>;
  /** For validators without a JSON Schema of their own: zod 4's `z.toJSONSchema`, for instance. */
  toJsonSchema?: JsonSchemaConverter;
}

/** What a broker declared, as the document needs it; the broker hands this over. */
export interface BrokerDeclarations {
  readonly database: string | object;
  readonly subscriptions: ReadonlyArray<{
    readonly queue: Queue<unknown>;
    readonly decode: Decoder<unknown> | undefined;
    readonly deadLetter: string | undefined;
  }>;
  readonly schedules: ReadonlyArray<{ readonly name: string; readonly queue: Queue<unknown>; readonly cron: string; readonly timeZone: string }>;
  readonly relays: ReadonlyArray<{ readonly outbox: TableSpec; readonly destination: string }>;
}

const OPTION_KEYS = new Set(['title', 'version', 'description', 'publishes', 'toJsonSchema']);
const SERVER = 'database';

/** A channel while the document is assembled: the headers it may carry, its payload's schema. */
interface ChannelDraft {
  readonly id: string;
  readonly address: string;
  readonly table: ChannelTableDescription;
  readonly spec: TableSpec;
  readonly headers: Map<string, string>;
  payload: PayloadSchema | undefined;
  /** Payloads decoded by a function of the service's own: their shape is not known here. */
  customDecoder: boolean;
}

/**
 * The AsyncAPI 3.0.0 document of a broker: a channel per queue it reads or writes, a `receive`
 * operation per subscription and relay, a `send` operation per declared publish, schedule and
 * dead-letter destination, and the database as the one server.
 */
export function describeBroker(declarations: BrokerDeclarations, options: AsyncApiOptions = {}): AsyncApiDocument {
  checkOptions(options);
  const channels = new Map<string, ChannelDraft>();
  const channelIds = new Set<string>();
  const operations: Record<string, AsyncApiOperation> = {};
  const operationIds = new Set<string>();
  const converter = options.toJsonSchema;

  const channelOf = (spec: TableSpec, table: string, group: string | undefined): ChannelDraft => {
    const address = group === undefined ? table : `${table}/${group}`;
    const known = channels.get(address);
    if (known !== undefined) return known;
    const draft: ChannelDraft = {
      id: uniqueId(address, channelIds),
      address,
      spec,
      table: {
        table,
        ...(spec.group === undefined ? {} : { groupColumn: spec.group.column, fifo: spec.group.fifo }),
        ...(group === undefined ? {} : { group }),
        claimForm: spec.form,
      },
      headers: new Map([
        [TRACEPARENT_HEADER, 'W3C trace context of the publish, written while tracing is on.'],
        [TRACESTATE_HEADER, 'W3C trace state, written with traceparent when the publish has one.'],
        [TIMEOUT_HEADER, "The message's own timeoutMs, when its publish gave one."],
      ]),
      payload: undefined,
      customDecoder: false,
    };
    channels.set(address, draft);
    return draft;
  };
  const queueChannel = (queue: Queue<unknown>): ChannelDraft => channelOf(queue.table.spec, queue.table.spec.qualifiedName, queue.group);
  const operation = (name: string, draft: ChannelDraft, fields: Omit<AsyncApiOperation, 'channel' | 'messages'>): void => {
    operations[uniqueId(name, operationIds)] = {
      ...fields,
      channel: { $ref: `#/channels/${draft.id}` },
      messages: [{ $ref: `#/channels/${draft.id}/messages/${draft.id}` }],
    };
  };
  const describePayload = (draft: ChannelDraft, validator: Decoder<unknown> | undefined): void => {
    if (validator === undefined || draft.payload?.schema !== undefined) return;
    if (isStandardSchema(validator)) draft.payload = payloadSchemaOf(validator, converter);
    else draft.customDecoder = true;
  };

  for (const subscription of declarations.subscriptions) {
    const draft = queueChannel(subscription.queue);
    describePayload(draft, subscription.decode);
    operation(`receive_${draft.id}`, draft, {
      action: 'receive',
      title: `Handle ${draft.address}`,
      summary: `Claims the queue's rows (${FORM_WORDS[draft.spec.form]}) and runs the subscription's handler on each.`,
    });
    const deadLetter = subscription.deadLetter;
    if (deadLetter === undefined) continue;
    const spec = subscription.queue.table.spec;
    const target =
      spec.group === undefined
        ? channelOf(spec, qualifiedNameOf(parseDeadLetterTable(deadLetter, `subscription "${subscription.queue.label}"`)), undefined)
        : channelOf(spec, spec.qualifiedName, deadLetter);
    describePayload(target, subscription.decode);
    target.headers.set(LAST_ERROR_HEADER, 'Why the last attempt failed: the error thrown, or the retry asked for at the last attempt.');
    operation(`deadLetter_${draft.id}`, target, {
      action: 'send',
      title: `Dead letters of ${draft.address}`,
      summary: `Rows of ${draft.address} whose attempts ran out, moved here with the last error in their headers.`,
    });
  }

  for (const schedule of declarations.schedules) {
    const draft = queueChannel(schedule.queue);
    draft.headers.set(SCHEDULED_AT_HEADER, 'The instant of the cron tick that wrote the message (ISO 8601).');
    operation(`schedule_${schedule.name}`, draft, {
      action: 'send',
      title: `Schedule ${schedule.name}`,
      summary: `A message at every tick of "${schedule.cron}" (${schedule.timeZone}), once across every replica.`,
    });
  }

  for (const relay of declarations.relays) {
    const draft = channelOf(relay.outbox, relay.outbox.qualifiedName, undefined);
    operation(`relay_${draft.id}`, draft, {
      action: 'receive',
      title: `Relay ${draft.address}`,
      summary: `Relays the outbox's records, in order per record name, to ${relay.destination}.`,
    });
  }

  for (const published of options.publishes ?? []) {
    const { queue, payload, description } = published instanceof Queue ? { queue: published, payload: undefined, description: undefined } : published;
    const draft = queueChannel(queue);
    describePayload(draft, payload);
    operation(`send_${draft.id}`, draft, {
      action: 'send',
      title: `Publish to ${draft.address}`,
      summary: 'The service publishes messages to this queue.',
      ...(description === undefined ? {} : { description }),
    });
  }

  return {
    asyncapi: '3.0.0',
    info: {
      title: options.title ?? 'tablequeue queues',
      version: options.version ?? '1.0.0',
      ...(options.description === undefined ? {} : { description: options.description }),
    },
    defaultContentType: 'application/json',
    servers: { [SERVER]: databaseServer(declarations.database) },
    channels: Object.fromEntries([...channels.values()].map((draft) => [draft.id, channelObject(draft)])),
    operations,
  };
}

const FORM_WORDS: Record<TableSpec['form'], string> = {
  rowLock: 'row locks held through the handler',
  lease: 'leases',
  advisory: 'advisory locks',
};

function channelObject(draft: ChannelDraft): AsyncApiChannel {
  const { table, group } = draft.table;
  const rows =
    group === undefined
      ? `The rows of table ${table}`
      : `The rows of table ${table} whose ${draft.table.groupColumn} column is ${JSON.stringify(group)}`;
  return {
    address: draft.address,
    title: draft.address,
    description: `${rows}${fifoWords(draft.table)}.`,
    messages: { [draft.id]: messageOf(draft) },
    'x-tablequeue': draft.table,
  };
}

/** A FIFO group is handled in order, one message at a time; a channel of the whole table, in order per group. */
function fifoWords(table: ChannelTableDescription): string {
  if (table.fifo !== true) return '';
  return table.group === undefined ? `, handled in order per ${table.groupColumn} value` : ', handled in order, one at a time';
}

function messageOf(draft: ChannelDraft): AsyncApiMessage {
  const { spec } = draft;
  const headers: JsonSchema | undefined =
    spec.headers === undefined
      ? undefined
      : {
          type: 'object',
          description: `The ${spec.headers} column: a JSON object of text values.`,
          properties: Object.fromEntries([...draft.headers].map(([name, description]) => [name, { type: 'string', description }])),
          additionalProperties: { type: 'string' },
        };
  const pointer = `#/channels/${draft.id}/messages/${draft.id}/payload`;
  const payload = spec.payload === undefined ? undefined : draft.payload?.schema;
  return {
    name: draft.id,
    title: `A message of ${draft.address}`,
    summary: payloadSummary(draft),
    ...(draft.customDecoder ? { contentType: 'application/octet-stream' } : {}),
    ...(headers === undefined ? {} : { headers }),
    ...(payload === undefined ? {} : { payload: rebasedAt(payload, pointer) }),
  };
}

function payloadSummary(draft: ChannelDraft): string {
  const column = draft.spec.payload;
  if (column === undefined) return 'The table has no payload column: a message is its row alone.';
  if (draft.payload?.schema !== undefined) return `The ${column} column holds the payload as JSON, of the schema below.`;
  if (draft.payload?.problem !== undefined) return `The ${column} column holds the payload as JSON; no schema: ${draft.payload.problem}.`;
  if (draft.customDecoder) return `The ${column} column holds the payload's bytes, read by the subscription's own decode function.`;
  return `The ${column} column holds the payload as JSON; no validator describes it.`;
}

function qualifiedNameOf(name: { schema: string | undefined; name: string }): string {
  return name.schema === undefined ? name.name : `${name.schema}.${name.name}`;
}

/**
 * A key for `channels` or `operations`: letters, digits, `.`, `_` and `-` (what AsyncAPI allows in
 * component names, and what a `$ref` can carry without escapes), made unique with a number.
 */
function uniqueId(text: string, taken: Set<string>): string {
  const base = text.replace(/[^A-Za-z0-9._-]+/g, '_').replace(/^_+|_+$/g, '') || 'queue';
  let id = base;
  for (let n = 2; taken.has(id); n += 1) id = `${base}-${n}`;
  taken.add(id);
  return id;
}

function checkOptions(options: AsyncApiOptions): void {
  if (options === null || typeof options !== 'object') throw new DeclarationError('broker.asyncapi takes an options object, such as { title: "Billing" }');
  for (const key of Object.keys(options)) {
    if (!OPTION_KEYS.has(key)) {
      throw new DeclarationError(`broker.asyncapi: unknown option "${key}"; the options are ${[...OPTION_KEYS].join(', ')}`);
    }
  }
  for (const key of ['title', 'version', 'description'] as const) {
    if (options[key] !== undefined && typeof options[key] !== 'string') {
      throw new DeclarationError(`broker.asyncapi: ${key} must be text`);
    }
  }
  if (options.toJsonSchema !== undefined && typeof options.toJsonSchema !== 'function') {
    throw new DeclarationError('broker.asyncapi: toJsonSchema must be a function of a validator, such as z.toJSONSchema');
  }
  if (options.publishes === undefined) return;
  if (!Array.isArray(options.publishes)) {
    throw new DeclarationError('broker.asyncapi: publishes must be an array of queues, or of { queue, payload } with a Standard Schema validator');
  }
  for (const item of options.publishes as unknown[]) {
    const queue = item instanceof Queue ? item : (item as { queue?: unknown } | null)?.queue;
    if (!(queue instanceof Queue)) {
      throw new DeclarationError('broker.asyncapi: each of publishes is a queue (table.queue(name)) or { queue, payload }');
    }
    const payload = item instanceof Queue ? undefined : (item as { payload?: unknown }).payload;
    if (payload !== undefined && !isStandardSchema(payload)) {
      throw new DeclarationError(`broker.asyncapi: the payload of published queue "${queue.label}" must be a Standard Schema validator`);
    }
  }
}
