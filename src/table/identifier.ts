import { DeclarationError } from '../errors.js';

/** MySQL and MariaDB limit identifiers to 64 characters; Postgres to 63 bytes (see postgres dialect). */
export const MAX_IDENTIFIER_CHARACTERS = 64;
export const POSTGRES_MAX_IDENTIFIER_BYTES = 63;

/**
 * Letters (any script), digits, `_` and `$`, starting with a letter or `_`. Quoting would make any
 * text safe, but a name with quotes, spaces or semicolons in a queue declaration is far more
 * likely an injection attempt or a bug than a real column, so it is refused with a clear error.
 */
const IDENTIFIER_PATTERN = /^[\p{L}_][\p{L}\p{N}_$]*$/u;

export function validateIdentifier(value: unknown, what: string): string {
  if (typeof value !== 'string' || value.length === 0) {
    throw new DeclarationError(`${what} must be a non-empty string, got ${describe(value)}`);
  }
  if (!IDENTIFIER_PATTERN.test(value)) {
    throw new DeclarationError(
      `${what} ${JSON.stringify(value)} is not a plain SQL identifier: use letters, digits, "_" or "$", starting with a letter or "_"`,
    );
  }
  const characters = [...value].length;
  if (characters > MAX_IDENTIFIER_CHARACTERS) {
    throw new DeclarationError(
      `${what} ${JSON.stringify(value)} is ${characters} characters long; MySQL and MariaDB allow at most ${MAX_IDENTIFIER_CHARACTERS} and tablequeue never truncates a name`,
    );
  }
  return value;
}

/** Postgres counts bytes and silently truncates longer names; we refuse them instead. */
export function validatePostgresIdentifier(value: string, what: string): string {
  const bytes = Buffer.byteLength(value, 'utf8');
  if (bytes > POSTGRES_MAX_IDENTIFIER_BYTES) {
    throw new DeclarationError(
      `${what} ${JSON.stringify(value)} is ${bytes} bytes long; PostgreSQL allows at most ${POSTGRES_MAX_IDENTIFIER_BYTES} and tablequeue never truncates a name`,
    );
  }
  return value;
}

/** Parses `name` or `schema.name` (a dead-letter table, say) into validated parts. */
export function parseQualifiedName(value: unknown, what: string): { schema?: string; name: string } {
  if (typeof value !== 'string') {
    throw new DeclarationError(`${what} must be a string, got ${describe(value)}`);
  }
  const parts = value.split('.');
  if (parts.length === 1) return { name: validateIdentifier(parts[0], what) };
  if (parts.length === 2) {
    return { schema: validateIdentifier(parts[0], `schema of ${what}`), name: validateIdentifier(parts[1], what) };
  }
  throw new DeclarationError(`${what} ${JSON.stringify(value)} must be "table" or "schema.table"`);
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (typeof value === 'string') return JSON.stringify(value);
  return typeof value;
}
