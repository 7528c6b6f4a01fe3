import type { TableInspection } from '../admin/inspection.js';
import { openQueueInspector, type QueueInspectorOptions } from '../admin/open-queue-inspector.js';
import { openDialect } from '../broker/open-dialect.js';
import { QueueControls } from '../broker/queue-controls.js';
import { WHOLE_TABLE_QUEUE_NAME } from '../dialect/queue-control-statements.js';
import { BrokerDirectory } from '../dashboard/broker-directory.js';
import {
  queueReadersOf,
  relaysOfTable,
  someReaderCountsRowsInWork,
  unindexedRowsInWorkOf,
  type QueueReaders,
  type ReportedRelay,
  type UnindexedRowsInWork,
} from '../dashboard/queue-readers.js';
import { createDriver } from '../driver/create-driver.js';

/** An inspection with what the brokers' heartbeats say of its queues. */
export interface InspectionWithReaders extends TableInspection {
  readonly heartbeatTable: string;
  /** Null when the heartbeats cannot tell: no heartbeat table, or no live broker reads the table. */
  readonly readers: QueueReaders | null;
  /** Queues the brokers report counting their rows in work while no index serves the count; null when none do, or when it cannot be told. */
  readonly unindexedRowsInWork: UnindexedRowsInWork | null;
  readonly queueControlsTable: string;
  /** What an operator paused (tablequeue pause); null when the queue controls table cannot be read. */
  readonly paused: PausedQueues | null;
  /** The outbox relays of this table that live brokers report (none unless it is an outbox); null when the heartbeat table cannot be read. */
  readonly relays: readonly ReportedRelay[] | null;
}

export interface PausedQueues {
  /** Every queue of the table is paused. */
  readonly wholeTable: boolean;
  /** Groups paused one by one, by name. */
  readonly groups: readonly string[];
}

export interface QueueReadersInspector {
  /** The table's counts and the heartbeat table, read together on one pool. */
  inspect(): Promise<InspectionWithReaders>;
  close(): Promise<void>;
}

/**
 * `stats`' inspector: the table by `options`, the brokers by `heartbeatTable`, over one pool of
 * two opened from the URL (or the caller's open driver, which it keeps and closes).
 */
export async function openQueueReadersInspector(
  options: QueueInspectorOptions,
  heartbeatTable: string,
  queueControlsTable: string,
): Promise<QueueReadersInspector> {
  const ownsDriver = typeof options.database === 'string';
  const driver = typeof options.database === 'string' ? createDriver(options.database, { poolSize: 2, pooler: options.pooler }) : options.database;
  if (ownsDriver) await driver.open();
  try {
    const inspector = await openQueueInspector({ ...options, database: driver });
    const database = (await openDialect(driver)).name;
    const directory = new BrokerDirectory({ driver, database, table: heartbeatTable });
    const controls = new QueueControls({ driver, database, table: queueControlsTable });
    const queueTable = inspector.spec.qualifiedName;
    // Missing until someone pauses a queue or a broker with subscriptions starts: nothing to show then.
    const paused = async (): Promise<PausedQueues | null> => {
      const list = await controls.listPaused().catch(() => null);
      if (list === null) return null;
      const ofTable = list.filter((queue) => queue.queueTable === queueTable).map((queue) => queue.queueName);
      return { wholeTable: ofTable.includes(WHOLE_TABLE_QUEUE_NAME), groups: ofTable.filter((name) => name !== WHOLE_TABLE_QUEUE_NAME) };
    };
    return {
      inspect: async () => {
        const [inspection, brokers, pausedQueues] = await Promise.all([inspector.inspect(), directory.list(), paused()]);
        const readers = queueReadersOf(brokers, inspector.spec, inspection.groups, inspector.deadLetter);
        // Like the heartbeats and the pauses, a read that fails tells nothing rather than failing the counts.
        const index = someReaderCountsRowsInWork(readers) ? await inspector.readInWorkIndex().catch(() => null) : null;
        return {
          ...inspection,
          heartbeatTable,
          readers,
          unindexedRowsInWork: unindexedRowsInWorkOf(readers, index),
          queueControlsTable,
          paused: pausedQueues,
          relays: relaysOfTable(brokers, inspector.spec),
        };
      },
      close: async () => {
        await inspector.close();
        if (ownsDriver) await driver.close();
      },
    };
  } catch (error) {
    if (ownsDriver) await driver.close();
    throw error;
  }
}
