import type { Dialect } from '../dialect/dialect.js';
import type { Driver } from '../driver/driver.js';
import { UnsupportedError } from '../errors.js';
import type { ResolvedBrokerOptions } from './broker-options.js';
import type { NotifyListenerOptions } from './notify-listener.js';

/** What wake-ups across processes need from the dialect and the driver. */
export type ListenSupport = Pick<NotifyListenerOptions, 'statements' | 'openSession'>;

/**
 * Whether `listen` is on, and what it needs: on by default for a pool opened from a URL on a
 * database with LISTEN/NOTIFY, on for the service's pool only when asked. `listen: true`
 * elsewhere is refused, since it would silently change nothing.
 */
export function listenSupportOf(
  options: Pick<ResolvedBrokerOptions, 'listen' | 'database'>,
  driver: Driver,
  dialect: Dialect,
): ListenSupport | undefined {
  const { listen, database } = options;
  const isOn = listen ?? (typeof database === 'string' && dialect.capabilities.supportsListenNotify);
  if (!isOn) return undefined;
  const openSession = driver.openNotificationClient?.bind(driver);
  if (dialect.notify === undefined || openSession === undefined) {
    throw new UnsupportedError({
      database: dialect.name,
      feature: 'listen',
      message:
        `listen: true is PostgreSQL-only (LISTEN/NOTIFY) and the database is ${driver.description}; remove the option: ` +
        'rows that other processes publish are found by polling every pollIntervalMs',
    });
  }
  return { statements: dialect.notify, openSession };
}
