import type { HandlerTransaction } from '../delivery/delivery-transaction.js';
import { UnsupportedError } from '../errors.js';
import type { HandlerContext } from './subscription-options.js';

export interface TransactionalContextOptions {
  readonly subscription: string;
  readonly database: string;
  /**
   * The pool has one connection (SQLite's one handle, or a pool of size 1), which the delivery
   * holds through the handler: anything else that needs a connection would wait for it forever.
   */
  readonly isPoolOneConnection: boolean;
}

/**
 * The context of one transactional delivery: the subscription's context with `tx`. Where the
 * delivery holds the pool's only connection, `query` and a publish without `tx` are refused at
 * once, naming `context.tx`, instead of waiting for a connection that comes back only after the
 * handler returns.
 */
export function transactionalContext(
  context: HandlerContext,
  tx: HandlerTransaction,
  options: TransactionalContextOptions,
): HandlerContext {
  if (!options.isPoolOneConnection) return { ...context, tx };
  const refuse = (what: string, instead: string) =>
    new UnsupportedError({
      database: options.database,
      feature: `${what} in transactional mode`,
      message:
        `subscription "${options.subscription}": the delivery holds the pool's only connection through the handler, ` +
        `so ${what} would wait for it forever; use ${instead}`,
    });
  return {
    ...context,
    tx,
    query: () => Promise.reject(refuse('context.query', 'context.tx.query, which runs inside the delivery')),
    publish: (queue, payload, publishOptions) =>
      publishOptions?.tx === undefined
        ? Promise.reject(refuse('a publish without tx', 'context.publish(queue, payload, { tx: context.tx })'))
        : context.publish(queue, payload, publishOptions),
  };
}
