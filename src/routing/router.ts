import type { Queue } from '../definition/define-table.js';
import type { KeyedPublishOptions, KeyedPublishResult, PublishOptions } from '../publish/publish-options.js';
import type { BatchHandler, Handler } from '../subscription/subscription-options.js';
import { subscribeByName, type ByNameSubscribeOptions, type SubscribeQueue } from './by-name-subscription.js';
import type { RoutedName, RoutedPayload, RouteMap } from './define-routes.js';
import { RouteTable } from './route-table.js';

/** What a router publishes and subscribes through: the broker's own publish and subscribe. */
export interface RouterTarget {
  readonly publish: (
    queue: Queue<unknown>,
    payload: unknown,
    options: PublishOptions | KeyedPublishOptions | undefined,
  ) => Promise<string | KeyedPublishResult>;
  readonly subscribe: SubscribeQueue;
}

/**
 * A broker seen through one route table (`broker.routes(defineRoutes({ … }))`): `publishTo` and
 * `subscribeTo` by name, typed by the payload of the queue each name routes to. Names resolve in
 * this table alone, as its types do: the exact route, else the longest prefix route that starts
 * the name.
 */
export class Router<Routes extends RouteMap> {
  readonly #table = new RouteTable();
  readonly #target: RouterTarget;

  constructor(routes: Routes, target: RouterTarget) {
    this.#table.declareAll(Object.entries(routes), 'broker.routes');
    this.#target = target;
  }

  /** The queue `name` routes to; a NoRouteError naming the closest routes when none does. */
  queueOf<Name extends RoutedName<Routes>>(name: Name): Queue<RoutedPayload<Routes, Name>> {
    return this.#table.resolve(name, 'router.queueOf') as Queue<RoutedPayload<Routes, Name>>;
  }

  /** `broker.publish` with a dedupe key into the queue `name` routes to: which of published, duplicate or replaced happened. */
  publishTo<Name extends RoutedName<Routes>>(
    name: Name,
    payload: RoutedPayload<Routes, Name>,
    options: KeyedPublishOptions,
  ): Promise<KeyedPublishResult>;
  /** `broker.publish` into the queue `name` routes to: the row's id. A NoRouteError (rejected) when no route takes the name. */
  publishTo<Name extends RoutedName<Routes>>(name: Name, payload: RoutedPayload<Routes, Name>, options?: PublishOptions): Promise<string>;
  async publishTo(name: string, payload: unknown, options?: PublishOptions | KeyedPublishOptions): Promise<string | KeyedPublishResult> {
    return this.#target.publish(this.#table.resolve(name, 'router.publishTo'), payload, options);
  }

  /** As `broker.subscribeTo`, with `batch: n`: the handler receives the typed messages as an array. */
  subscribeTo<Name extends RoutedName<Routes>>(
    name: Name,
    handler: BatchHandler<RoutedPayload<Routes, Name>>,
    options: ByNameSubscribeOptions<RoutedPayload<Routes, Name>> & { batch: number },
  ): void;
  /**
   * Reads the queue `name` routes to, with the broker's poll interval and lease: every message
   * routed there, whatever name it was published under. Refuses maxAttempts and deadLetter
   * (subscribe to the queue itself for those); a NoRouteError when no route takes the name.
   */
  subscribeTo<Name extends RoutedName<Routes>>(
    name: Name,
    handler: Handler<RoutedPayload<Routes, Name>>,
    options?: ByNameSubscribeOptions<RoutedPayload<Routes, Name>>,
  ): void;
  subscribeTo(name: string, handler: unknown, options?: unknown): void {
    const queue = this.#table.resolve(name, 'router.subscribeTo');
    subscribeByName(this.#target.subscribe, { name, queue, handlerOrOptions: handler, options, where: 'router.subscribeTo' });
  }
}
