import type { Queue } from '../definition/define-table.js';
import { DeclarationError } from '../errors.js';
import { RouteTable } from './route-table.js';

/** A route table as written: message names, or prefixes ending in `*`, to the queues they go to. */
export type RouteMap = { readonly [name: string]: Queue<unknown> };

/** A prefix route's name without its `*`. */
type PrefixOf<Key> = Key extends `${infer Prefix}*` ? Prefix : never;

/**
 * The names a route table routes: each exact name, and for a prefix route `'mail.*'` every name
 * that starts with `'mail.'` (`` `mail.${string}` ``).
 */
export type RoutedName<Routes extends RouteMap> = {
  [Key in keyof Routes & string]: Key extends `${infer Prefix}*` ? `${Prefix}${string}` : Key;
}[keyof Routes & string];

/** The prefix routes of `Routes` whose prefix starts `Name`. */
type MatchingPrefixRoutes<Routes extends RouteMap, Name extends string> = {
  [Key in keyof Routes & `${string}*`]: Name extends `${PrefixOf<Key>}${string}` ? Key : never;
}[keyof Routes & `${string}*`];

/**
 * Of prefix routes that all start one name, the longest: the one whose prefix no other of them
 * extends (they all start the name, so of any two, one prefix extends the other).
 */
type LongestPrefixRoute<Keys extends string> = {
  [Key in Keys]: [Extract<Exclude<Keys, Key>, `${PrefixOf<Key>}${string}`>] extends [never] ? Key : never;
}[Keys];

/**
 * The route a literal `Name` takes, as the broker resolves it: its exact route, else the longest
 * prefix route that starts it. (A name typed only as `` `mail.${string}` `` takes `'mail.*'` here,
 * though at run time a longer prefix such as `'mail.urgent.*'` may take it: declare the
 * payloads of overlapping prefixes alike, or publish such names as literals.)
 */
export type RouteOf<Routes extends RouteMap, Name extends string> = Name extends keyof Routes
  ? Name
  : LongestPrefixRoute<MatchingPrefixRoutes<Routes, Name>>;

/** The payload type of the queue `Name` routes to. */
export type RoutedPayload<Routes extends RouteMap, Name extends string> =
  Routes[RouteOf<Routes, Name>] extends Queue<infer Payload> ? Payload : never;

/**
 * Declares a route table once, for `broker.routes(table)`: the names are checked here (a
 * DeclarationError says what to fix), and the table keeps each queue's payload type, so the
 * router `broker.routes` returns types `publishTo` and `subscribeTo` by name.
 *
 * ```ts
 * const routes = defineRoutes({ 'orders.created': orders, 'mail.*': mail });
 * ```
 */
export function defineRoutes<Routes extends RouteMap>(routes: Routes): Readonly<Routes> {
  if (routes === null || typeof routes !== 'object') {
    throw new DeclarationError("defineRoutes needs an object of names to queues, such as defineRoutes({ 'orders.created': orders })");
  }
  new RouteTable().declareAll(Object.entries(routes), 'defineRoutes');
  return Object.freeze({ ...routes });
}
