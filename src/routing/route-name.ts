import { DeclarationError } from '../errors.js';

/**
 * The longest route name. Names are keys written in code, never stored, so the bound is not a
 * column's: it bounds each edit distance a NoRouteError's search computes (one per declared
 * route, quadratic in the lengths) to 255 × 340 cells, and 255 characters is far beyond any name
 * people write (the same bound as a queue name).
 */
export const MAX_ROUTE_NAME_CHARACTERS = 255;

/** The character that, last in a route name, makes the route a prefix. */
export const PREFIX_WILDCARD = '*';

/** A route name as declared: an exact name, or a prefix when it ends in `*`. */
export interface ParsedRouteName {
  readonly name: string;
  /** Where a prefix route's name stops before the `*`; undefined for an exact route. */
  readonly prefix: string | undefined;
}

/**
 * Checks a declared route name and says what to fix: text, not empty, at most
 * `MAX_ROUTE_NAME_CHARACTERS`, and `*` only as its last character. `*` alone is a prefix route
 * that every name matches (the route of last resort).
 */
export function parseRouteName(name: unknown, where: string): ParsedRouteName {
  if (typeof name !== 'string') {
    throw new DeclarationError(`${where}: a route name is text, such as 'orders.created' or 'mail.*', got ${describe(name)}`);
  }
  if (name.length === 0) {
    throw new DeclarationError(`${where}: a route name must not be empty; give the message name, such as 'orders.created', or a prefix such as 'orders.*'`);
  }
  // Characters, not UTF-16 units: an emoji is one character here as in an error message.
  if (name.length > MAX_ROUTE_NAME_CHARACTERS && [...name].length > MAX_ROUTE_NAME_CHARACTERS) {
    throw new DeclarationError(
      `${where}: the route name ${JSON.stringify(`${name.slice(0, 40)}…`)} is ${[...name].length} characters long; use at most ${MAX_ROUTE_NAME_CHARACTERS}`,
    );
  }
  const wildcard = name.indexOf(PREFIX_WILDCARD);
  if (wildcard !== -1 && wildcard !== name.length - 1) {
    throw new DeclarationError(
      `${where}: the route name ${JSON.stringify(name)} has a '*' before its end; '*' may only end a name, making it a prefix ` +
        `(${JSON.stringify(`${name.slice(0, wildcard)}*`)} routes every name that starts with ${JSON.stringify(name.slice(0, wildcard))})`,
    );
  }
  return { name, prefix: wildcard === -1 ? undefined : name.slice(0, wildcard) };
}

/** Checks the name a message is published or subscribed under: text, not empty. */
export function checkMessageName(name: unknown, where: string): string {
  if (typeof name !== 'string' || name.length === 0) {
    throw new DeclarationError(
      `${where} needs the message's name as non-empty text, such as 'orders.created', got ${typeof name === 'string' ? 'an empty one' : describe(name)}`,
    );
  }
  return name;
}

function describe(value: unknown): string {
  return value === null ? 'null' : typeof value;
}
