import { requireQueue, type Queue } from '../definition/define-table.js';
import { DeclarationError, NoRouteError } from '../errors.js';
import { closestRouteNames } from './closest-routes.js';
import { checkMessageName, parseRouteName, type ParsedRouteName } from './route-name.js';

/** Every route name listed in a NoRouteError when none is near and there are no more than these. */
const LISTED_ROUTES = 5;

interface Route extends ParsedRouteName {
  readonly queue: Queue<unknown>;
}

/**
 * Message names mapped to queues. A name ending in `*` is a prefix route. Resolving a name takes
 * its exact route first, then the longest prefix route that starts it: one map lookup, then one
 * per distinct prefix length (longest first), so the cost grows with how many lengths the
 * prefixes have, not with how many routes there are.
 */
export class RouteTable {
  readonly #exact = new Map<string, Route>();
  readonly #prefixes = new Map<string, Route>();
  /** The distinct lengths of the declared prefixes, longest first. */
  #prefixLengths: number[] = [];

  /**
   * Declares `name` → `queue`. The same name to the same queue again changes nothing; to another
   * queue it is a DeclarationError naming both.
   */
  declare(name: unknown, queue: unknown, where = 'broker.route'): void {
    const route = this.#check(name, queue, where);
    if (route !== undefined) this.#add(route);
  }

  /** Declares every route of `routes`, or none of them when one is refused. */
  declareAll(routes: Iterable<readonly [unknown, unknown]>, where: string): void {
    const checked = [...routes].map(([name, queue]) => this.#check(name, queue, where));
    for (const route of checked) if (route !== undefined) this.#add(route);
  }

  /** The route to add, undefined when the same one is declared already, or a DeclarationError. */
  #check(name: unknown, queue: unknown, where: string): Route | undefined {
    const parsed = parseRouteName(name, where);
    requireQueue(queue, `${where}(${JSON.stringify(parsed.name)}, …)`);
    const declared = (parsed.prefix === undefined ? this.#exact : this.#prefixes).get(parsed.prefix ?? parsed.name);
    if (declared === undefined) return { ...parsed, queue };
    if (sameQueue(declared.queue, queue)) return undefined;
    throw new DeclarationError(
      `${where}: ${JSON.stringify(parsed.name)} already routes to queue "${declared.queue.label}"; it cannot route to "${queue.label}" too ` +
        '(one name, one queue: give the second one a name of its own)',
    );
  }

  #add(route: Route): void {
    if (route.prefix === undefined) {
      this.#exact.set(route.name, route);
      return;
    }
    this.#prefixes.set(route.prefix, route);
    if (!this.#prefixLengths.includes(route.prefix.length)) {
      this.#prefixLengths = [...this.#prefixLengths, route.prefix.length].sort((a, b) => b - a);
    }
  }

  /** The queue `name` routes to, or undefined: its exact route, else the longest prefix that starts it. */
  find(name: string): Queue<unknown> | undefined {
    const exact = this.#exact.get(name);
    if (exact !== undefined) return exact.queue;
    for (const length of this.#prefixLengths) {
      if (length > name.length) continue;
      const route = this.#prefixes.get(name.slice(0, length));
      if (route !== undefined) return route.queue;
    }
    return undefined;
  }

  /** As `find`, or a NoRouteError naming the closest declared routes. */
  resolve(name: unknown, where: string): Queue<unknown> {
    const checked = checkMessageName(name, where);
    const queue = this.find(checked);
    if (queue !== undefined) return queue;
    throw this.#noRoute(checked, where);
  }

  /** Every declared route name, exact ones first, each group in declaration order. */
  get names(): string[] {
    return [...this.#exact.values(), ...this.#prefixes.values()].map((route) => route.name);
  }

  #noRoute(name: string, where: string): NoRouteError {
    const routes = [...this.#exact.values(), ...this.#prefixes.values()];
    const closest = closestRouteNames(name, routes);
    const quoted = (names: readonly string[]) => names.map((each) => JSON.stringify(each)).join(', ');
    const shown = name.length > 80 ? `${name.slice(0, 80)}…` : name;
    let hint: string;
    if (routes.length === 0) {
      hint = 'no route is declared; declare one with broker.route(name, queue) or broker.routes(defineRoutes({ … }))';
    } else if (closest.length > 0) {
      hint = `the closest declared ${closest.length === 1 ? 'route is' : 'routes are'} ${quoted(closest)}; fix the name or declare a route for it with broker.route(name, queue)`;
    } else if (routes.length <= LISTED_ROUTES) {
      hint = `the declared routes are ${quoted(routes.map((route) => route.name))}; declare a route for it with broker.route(name, queue)`;
    } else {
      hint = `none of its ${routes.length} declared routes is close; declare a route for it with broker.route(name, queue)`;
    }
    return new NoRouteError({ routeName: name, closest, message: `${where}: no route for ${JSON.stringify(shown)}: ${hint}` });
  }
}

/** Two queue objects for the same rows: the same table and group (a table without groups is one queue). */
function sameQueue(a: Queue<unknown>, b: Queue<unknown>): boolean {
  return a.table.spec.qualifiedName === b.table.spec.qualifiedName && a.group === b.group;
}
