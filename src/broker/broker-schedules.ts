import { requireQueue, type Queue } from '../definition/define-table.js';
import { DeclarationError } from '../errors.js';
import type { Observability } from '../observability/observability.js';
import { resolveScheduleDeclaration, type ScheduleDeclaration, type ScheduleOptions } from '../schedule/schedule-options.js';
import { Scheduler, type ScheduleStats, type SchedulerRuntime } from '../schedule/scheduler.js';
import type { BrokerState } from './broker-lifecycle.js';

/**
 * A broker's `schedule(...)` declarations and the one scheduler that fires them all, opened,
 * started and stopped with the broker.
 */
export class BrokerSchedules {
  readonly #declarations: ScheduleDeclaration[] = [];
  #scheduler: Scheduler | undefined;

  /** The scheduler of every declaration so far; undefined before the first. */
  get scheduler(): Scheduler | undefined {
    return this.#scheduler;
  }

  declare<Payload>(
    name: string,
    queue: Queue<Payload>,
    options: ScheduleOptions<Payload>,
    broker: { readonly state: BrokerState; readonly maxPayloadBytes: number },
  ): void {
    requireQueue(queue, `schedule ${JSON.stringify(name)}`);
    if (broker.state !== 'new') {
      throw new DeclarationError(`schedule ${JSON.stringify(name)}: declare schedules before broker.start()`);
    }
    const declaration = resolveScheduleDeclaration(name, queue as Queue<unknown>, options, { maxPayloadBytes: broker.maxPayloadBytes });
    if (this.#declarations.some((declared) => declared.name === declaration.name)) {
      throw new DeclarationError(`schedule "${declaration.name}" is already declared on this broker; give each schedule its own name`);
    }
    this.#declarations.push(declaration);
    this.#scheduler = new Scheduler(this.#declarations);
  }

  /** At start, with schedules declared: the schedules table created and each schedule registered; counts go to metrics. */
  async open(runtime: Omit<SchedulerRuntime, 'onCounted'> & { readonly observability: Observability }): Promise<void> {
    const { observability, ...rest } = runtime;
    await this.#scheduler?.open({ ...rest, onCounted: (schedule, counts) => observability.scheduleCounted(schedule, counts) });
  }

  start(): void {
    this.#scheduler?.start();
  }

  async stop(): Promise<void> {
    await this.#scheduler?.stop();
  }

  stats(): ScheduleStats[] {
    return this.#scheduler?.stats() ?? [];
  }
}
