import type { TableInspection } from '../admin/inspection.js';
import { openQueueInspector, type QueueInspectorOptions } from '../admin/open-queue-inspector.js';
import { openDialect } from '../broker/open-dialect.js';
import { BrokerDirectory } from '../dashboard/broker-directory.js';
import { queueReadersOf, type QueueReaders } from '../dashboard/queue-readers.js';
import { createDriver } from '../driver/create-driver.js';

/** An inspection with what the brokers' heartbeats say of its queues. */
export interface InspectionWithReaders extends TableInspection {
  readonly heartbeatTable: string;
  /** Null when the heartbeats cannot tell: no heartbeat table, or no live broker reads the table. */
  readonly readers: QueueReaders | null;
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
export async function openQueueReadersInspector(options: QueueInspectorOptions, heartbeatTable: string): Promise<QueueReadersInspector> {
  const ownsDriver = typeof options.database === 'string';
  const driver = typeof options.database === 'string' ? createDriver(options.database, { poolSize: 2 }) : options.database;
  if (ownsDriver) await driver.open();
  try {
    const inspector = await openQueueInspector({ ...options, database: driver });
    const directory = new BrokerDirectory({ driver, database: (await openDialect(driver)).name, table: heartbeatTable });
    return {
      inspect: async () => {
        const [inspection, brokers] = await Promise.all([inspector.inspect(), directory.list()]);
        const readers = queueReadersOf(brokers, inspector.spec, inspection.groups, inspector.deadLetter);
        return { ...inspection, heartbeatTable, readers };
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
