import type { BuiltInDialectName, Dialect } from './dialect.js';
import { createMysqlDialect } from './mysql/mysql-dialect.js';
import { createPostgresDialect } from './postgres/postgres-dialect.js';
import { createSqliteDialect } from './sqlite/sqlite-dialect.js';

export type DialectChoice = BuiltInDialectName;

/**
 * A built-in dialect, frozen: what the broker picks for the database it finds, and what a
 * service's own dialect extends. MariaDB's is the MySQL dialect with MariaDB's capabilities.
 */
export function createDialect(name: BuiltInDialectName): Dialect {
  switch (name) {
    case 'postgres':
      return createPostgresDialect();
    case 'mysql':
      return createMysqlDialect({ mariadb: false });
    case 'mariadb':
      return createMysqlDialect({ mariadb: true });
    case 'sqlite':
      return createSqliteDialect();
  }
}
