import { createDialect } from '../dialect/create-dialect.js';
import type { Dialect } from '../dialect/dialect.js';
import { checkMysqlServerVersion } from '../dialect/mysql/mysql-dialect.js';
import { checkPostgresServerVersion } from '../dialect/postgres/postgres-dialect.js';
import { checkSqliteVersion } from '../dialect/sqlite/sqlite-dialect.js';
import type { Driver } from '../driver/driver.js';
import { bindStatement } from '../statement.js';

/**
 * Picks the dialect for the driver's database and checks the server against the floors
 * (PostgreSQL 11, MySQL 8.0.1, MariaDB 10.6, SQLite 3.35); the only place concrete dialects
 * are chosen at run time.
 */
export async function openDialect(driver: Driver): Promise<Dialect> {
  const probe = createDialect(driver.kind === 'mysql' ? 'mysql' : driver.kind);
  const result = await driver.execute(bindStatement(probe.session.serverVersion(), {}));
  const version = String(result.rows[0]?.['version'] ?? '');
  switch (driver.kind) {
    case 'postgres':
      checkPostgresServerVersion(version);
      return probe;
    case 'sqlite':
      checkSqliteVersion(version);
      return probe;
    case 'mysql':
      return createDialect(checkMysqlServerVersion(version).flavor === 'mariadb' ? 'mariadb' : 'mysql');
  }
}
