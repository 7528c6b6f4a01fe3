import type { StandardSchemaV1 } from '../delivery/standard-schema.js';
import type { JsonSchema } from './asyncapi-document.js';

/**
 * A converter the service passes for validators that carry no JSON Schema of their own, such as
 * zod 4's `z.toJSONSchema`. Undefined: it does not know this validator, and the next way is tried.
 */
export type JsonSchemaConverter = (validator: StandardSchemaV1<unknown, unknown>) => object | undefined;

export type PayloadSchema =
  | { readonly schema: JsonSchema; readonly problem?: undefined }
  | { readonly schema?: undefined; readonly problem: string };

/**
 * AsyncAPI's default schema format is JSON Schema draft-07 with a few keywords added, so that is
 * the target asked for.
 */
const TARGET = 'draft-07';

/**
 * The JSON Schema of a payload validator, tried in this order: the service's `converter`; the
 * Standard JSON Schema interface (`'~standard'.jsonSchema.input`, standardschema.dev/json-schema),
 * whose input side is what rows hold before the validator transforms them; then a
 * `toJSONSchema()` or `toJsonSchema()` method of the validator (arktype has the latter). A
 * validator none of these describes, or one whose conversion throws, gives a `problem` to show
 * instead of a schema: a document is still worth having without it.
 */
export function payloadSchemaOf(validator: StandardSchemaV1<unknown, unknown>, converter: JsonSchemaConverter | undefined): PayloadSchema {
  const vendor = validator['~standard'].vendor;
  const ways: Array<[string, () => unknown]> = [];
  if (converter !== undefined) ways.push(['the toJsonSchema option', () => converter(validator)]);
  const standard = (validator['~standard'] as { jsonSchema?: { input?: unknown } }).jsonSchema;
  if (typeof standard?.input === 'function') {
    const input = standard.input as (options: { target: string }) => unknown;
    ways.push(["'~standard'.jsonSchema.input", () => input.call(standard, { target: TARGET })]);
  }
  for (const method of ['toJSONSchema', 'toJsonSchema'] as const) {
    const convert = (validator as unknown as Record<string, unknown>)[method];
    if (typeof convert === 'function') ways.push([`${method}()`, () => (convert as () => unknown).call(validator)]);
  }
  for (const [way, convert] of ways) {
    let converted: unknown;
    try {
      converted = convert();
    } catch (error) {
      return { problem: `${way} of the ${vendor} validator failed: ${error instanceof Error ? error.message : String(error)}` };
    }
    if (converted === undefined) continue;
    if (converted === null || typeof converted !== 'object' || Array.isArray(converted)) {
      return { problem: `${way} of the ${vendor} validator gave ${Array.isArray(converted) ? 'an array' : String(converted)}, not a JSON Schema object` };
    }
    return { schema: plainJsonSchema(converted) };
  }
  return {
    problem: `the ${vendor} validator offers no JSON Schema (neither '~standard'.jsonSchema nor toJSONSchema()); pass toJsonSchema to asyncapi()`,
  };
}

/**
 * A copy that survives `JSON.stringify` unchanged (functions and undefined dropped), without the
 * `$schema` keyword: the document says the format once for every schema in it.
 */
function plainJsonSchema(converted: object): JsonSchema {
  const copy = JSON.parse(JSON.stringify(converted)) as Record<string, unknown>;
  delete copy.$schema;
  return copy;
}

/**
 * A schema placed at `pointer` inside the document, its local references (`#/definitions/…`,
 * `#/$defs/…`, `#` itself for a recursive type) made relative to that place: a `$ref` resolves
 * against the whole document, where `#/definitions` would name nothing.
 */
export function rebasedAt(schema: JsonSchema, pointer: string): JsonSchema {
  const rebase = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(rebase);
    if (value === null || typeof value !== 'object') return value;
    return Object.fromEntries(
      Object.entries(value).map(([key, item]) =>
        key === '$ref' && typeof item === 'string' && item.startsWith('#') ? [key, `${pointer}${item.slice(1)}`] : [key, rebase(item)],
      ),
    );
  };
  return rebase(schema) as JsonSchema;
}
