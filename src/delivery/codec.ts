import { DecodeError, EncodeError } from '../errors.js';

/**
 * The default codec: JSON in UTF-8. Bytes (`Buffer`/`Uint8Array`) are stored as they are, so a
 * service can publish its own encoding and decode it with a custom `decode`.
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
  const headers: Record<string, string> = {};
  for (const [key, item] of Object.entries(parsed)) {
    headers[key] = typeof item === 'string' ? item : JSON.stringify(item);
  }
  return headers;
}

export function encodeHeaders(headers: Readonly<Record<string, string>>, where: string): string {
  for (const [key, value] of Object.entries(headers)) {
    if (typeof value !== 'string') {
      throw new EncodeError(`${where}: header "${key}" must be a string, got ${typeof value}; nothing was written`);
    }
  }
  return JSON.stringify(headers);
}
