import { QueueTable as QueueTableClass } from '../definition/define-table.js';
import { DeclarationError } from '../errors.js';
import type { Observability } from '../observability/observability.js';
import { resolveRetentionDeclaration, type RetainOptions, type RetentionDeclaration } from '../retention/retention-options.js';
import { Retainer, type RetainerRuntime, type RetentionStats } from '../retention/retainer.js';
import type { BrokerState } from './broker-lifecycle.js';

/**
 * A broker's `retain(...)` declarations, one per table, and the retainer that prunes them all,
 * opened, started and stopped with the broker.
 */
export class BrokerRetention {
  readonly #declarations: RetentionDeclaration[] = [];
  #retainer: Retainer | undefined;

  /** The retainer of every declaration so far; undefined before the first. */
  get retainer(): Retainer | undefined {
    return this.#retainer;
  }

  declare(table: QueueTableClass, options: RetainOptions, state: BrokerState): void {
    if (!(table instanceof QueueTableClass)) {
      throw new DeclarationError('broker.retain needs a table from defineTable, such as broker.retain(jobs, { processedForMs: 7 * 86_400_000 })');
    }
    if (state !== 'new') {
      throw new DeclarationError(`broker.retain(${table.spec.qualifiedName}): declare retention before broker.start()`);
    }
    const declaration = resolveRetentionDeclaration(table, options);
    if (this.#declarations.some((declared) => declared.table.spec.qualifiedName === table.spec.qualifiedName)) {
      throw new DeclarationError(
        `broker.retain(${table.spec.qualifiedName}) is already declared on this broker; give one retain call both ages (processedForMs and deadLettersForMs)`,
      );
    }
    this.#declarations.push(declaration);
    this.#retainer = new Retainer(this.#declarations);
  }

  /** At start, with retention declared: each maintenance table created; deleted rows go to metrics. */
  async open(runtime: Omit<RetainerRuntime, 'onPruned'> & { readonly observability: Observability }): Promise<void> {
    const { observability, ...rest } = runtime;
    await this.#retainer?.open({ ...rest, onPruned: (table, kind, rowCount) => observability.pruned(table, kind, rowCount) });
  }

  start(): void {
    this.#retainer?.start();
  }

  async stop(): Promise<void> {
    await this.#retainer?.stop();
  }

  stats(): RetentionStats[] {
    return this.#retainer?.stats() ?? [];
  }
}
