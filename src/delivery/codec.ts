import { DecodeError, EncodeError } from '../errors.js';
import { describeLossyJson, isLosslessJson } from './lossless-json.js';

/**
 * The default codec: JSON in UTF-8, refused when JSON would change the value (`isLosslessJson`).
 * Bytes (`Buffer`/`Uint8Array`) are stored as they are, whatever they hold, so a service can
 * publish its own encoding (protobuf, MessagePack: rarely valid UTF-8) and decode it with a custom
 * `decode`; the default decoder reports bytes that are not UTF-8 JSON as a decode failure.
 */
export function encodePayload(payload: unknown, where: string): Buffer {
  if (payload instanceof Uint8Array) return Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength);
  let text: string | undefined;
  try {
    text = JSON.stringify(payload);
  } catch (error) {
    throw new EncodeError(`${where}: the payload cannot be encoded as JSON (${(error as Error).message}); nothing was written`, {
      cause: error,
    });
  }
  if (text === undefined) {
    throw new EncodeError(`${where}: the payload ${typeof payload} has no JSON form; nothing was written`);
  }
  if (!isLosslessJson(payload)) {
    throw new EncodeError(
      `${where}: the payload would not come back as it was sent, since JSON changes ${describeLossyJson(payload, 'payload') ?? 'it'}; ` +
        'send plain objects, arrays, strings, finite numbers, booleans and null (or bytes with a decoder of your own); nothing was written',
    );
  }
  return Buffer.from(text, 'utf8');
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

export function decodeJsonPayload(raw: Buffer): unknown {
  try {
    return JSON.parse(utf8.decode(raw));
  } catch (error) {
    throw new DecodeError(`payload is not UTF-8 JSON: ${(error as Error).message}`, { cause: error });
  }
}

/** Reads a headers column (JSON object from the driver, or JSON text) into a string map. */
export function decodeHeaders(value: unknown): Record<string, string> {
  if (value === null || value === undefined) return {};
  const parsed: unknown = typeof value === 'string' || Buffer.isBuffer(value) ? JSON.parse(String(value)) : value;
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new DecodeError('headers column does not hold a JSON object');
  }
  // fromEntries defines own properties, so a header named "__proto__" stays a header.
  return Object.fromEntries(
    Object.entries(parsed).map(([key, item]) => [key, typeof item === 'string' ? item : JSON.stringify(item)]),
  );
}

export function encodeHeaders(headers: Readonly<Record<string, string>>, where: string): string {
  if (!isPlainObject(headers)) {
    throw new EncodeError(
      `${where}: headers must be a plain object of strings such as { trace: 'abc' } (a Map, an array or a class instance would be stored as something else); nothing was written`,
    );
  }
  for (const [key, value] of Object.entries(headers)) {
    if (typeof value !== 'string') {
      throw new EncodeError(`${where}: header ${JSON.stringify(key)} must be a string, got ${typeof value}; nothing was written`);
    }
    requireStorableText(key, `header name ${JSON.stringify(key)}`, where);
    requireStorableText(value, `header ${JSON.stringify(key)}`, where);
  }
  return JSON.stringify(headers);
}

/** An object literal or `Object.create(null)`: what JSON stores property by property and reads back the same. */
function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== 'object') return false;
  const prototype: unknown = Object.getPrototypeOf(value);
  return prototype === Object.prototype || prototype === null;
}

/** An unpaired UTF-16 surrogate: text UTF-8 cannot carry. */
const UNPAIRED_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Whether a text column stores `text` unchanged on every database: no NUL, no unpaired surrogate. */
export function isStorableText(text: string): boolean {
  return !text.includes('\u0000') && !UNPAIRED_SURROGATE.test(text);
}

/**
 * Text that goes into a text or JSON column must come back as it went in. PostgreSQL refuses NUL
 * in text and JSONB, and UTF-8 cannot carry an unpaired surrogate (it would come back as U+FFFD),
 * so both are refused before anything is written instead of failing or changing on the way.
 */
export function requireStorableText(text: string, what: string, where: string): void {
  if (!isStorableText(text)) {
    throw new EncodeError(
      `${where}: ${what} contains a NUL character or an unpaired surrogate, which a database text column cannot store unchanged; nothing was written`,
    );
  }
}

const UNSTORABLE_CHARACTERS = new RegExp(`\\u0000|${UNPAIRED_SURROGATE.source}`, 'g');

/**
 * Text the library writes itself (a dead letter's last error), made storable by the rules of
 * `requireStorableText`: each NUL and unpaired surrogate becomes U+FFFD instead of a refusal.
 */
export function toStorableText(text: string): string {
  return text.replace(UNSTORABLE_CHARACTERS, '\uFFFD');
}

/** Bytes the default payload limit allows: under MySQL's and MariaDB's default 16 MiB packet. */
export const DEFAULT_MAX_PAYLOAD_BYTES = 8 * 1024 * 1024;

/**
 * The value bound into the payload column: the encoded bytes, or for a column of the JSON type
 * (`payloadHolds: 'json'`) their text. `encodePayload` wrote JSON text unless the payload was given
 * as bytes (`isBytes`); those must be UTF-8 JSON, or the database would refuse them, or a JSON
 * column would hand back other bytes.
 */
export function payloadColumnValue(encoded: Buffer, holds: 'bytes' | 'json', isBytes: boolean, where: string): Buffer | string {
  if (holds === 'bytes') return encoded;
  if (!isBytes) return encoded.toString('utf8');
  const text = jsonTextOf(encoded);
  if (text === undefined) {
    throw new EncodeError(`${where}: the payload column holds JSON, and these payload bytes are not UTF-8 JSON; nothing was written`);
  }
  requireStorableText(text, 'the payload', where);
  return text;
}

/** The bytes as text when they are UTF-8 JSON, else undefined. */
export function jsonTextOf(bytes: Buffer): string | undefined {
  try {
    const text = utf8.decode(bytes);
    JSON.parse(text);
    return text;
  } catch {
    return undefined;
  }
}

export function requirePayloadSize(payload: Buffer, maxBytes: number, where: string): Buffer {
  if (payload.byteLength > maxBytes) {
    throw new EncodeError(
      `${where}: the payload is ${payload.byteLength} bytes, over the limit of ${maxBytes} (broker option maxPayloadBytes); nothing was written`,
    );
  }
  return payload;
}
