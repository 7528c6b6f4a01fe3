import { parseArgs } from 'node:util';
import { openDialect } from '../broker/open-dialect.js';
import { defineTable } from '../definition/define-table.js';
import type { DdlDialectName } from '../definition/define-table.js';
import type { Dialect } from '../dialect/dialect.js';
import { checkMysqlServerVersion } from '../dialect/mysql/mysql-dialect.js';
import { createDriver } from '../driver/create-driver.js';
import type { Driver, PoolerMode } from '../driver/driver.js';
import { parseDatabaseUrl } from '../driver/database-url.js';
import { bindStatement } from '../statement.js';
import { SchemaError, StatementError } from '../errors.js';
import { roleColumns, type TableDeclaration, type TableSpec } from '../table/table-spec.js';
import { DEFAULT_SCHEDULES_TABLE } from '../dialect/schedule-statements.js';
import { createSchedulesTableSql } from '../schedule/schedules-table.js';
import { INIT_FLAGS } from './command-flags.js';
import { sideTablesScript } from './side-table-catalogue.js';
import { DATABASE_FLAGS_HELP, databaseTargetOf } from './inspector-flags.js';
import { UsageError } from './usage-error.js';
import { writeLine, type CliIo } from './cli-io.js';

const INIT_USAGE = `usage: tablequeue init --database URL --table NAME [options]
       tablequeue init --database URL --schedules [--schedules-table NAME] [--print]
       tablequeue init --database URL --side-tables

Creates a queue table and its claim-order index. The default layout has an id, a queue (group)
column, retry_after, attempt, headers and payload; with --lease it is the README Quickstart's.
The options change it.

${DATABASE_FLAGS_HELP}
  --table NAME              the table to create
  --schema NAME             the schema (PostgreSQL) or database (MySQL) it goes in
  --lease                   add locked_until: the lease form (required on SQLite)
  --mark                    add processed_at: ack marks rows instead of deleting them
  --priority                add priority: smaller first
  --fifo                    make the queue column a FIFO group column
  --partition-key           add a partition_key column for keyed lanes
  --dedupe-key              add dedupe_key and its unique index: publish with { dedupeKey }
  --in-work-index           with --lease: index locked_until, for concurrency limits on deep
                            backlogs (each claim then counts rows in work through it)
  --no-group                no queue column: the whole table is one queue
  --row-mode                no payload column: handlers receive the row
  --if-not-exists           leave a table of that name as it is (exit 0); without it an existing
                            table is an error (exit 1) and nothing changes
  --schedules               create the schedules table of broker.schedule instead (if it does not
                            exist; a broker with schedules also creates it at start)
  --schedules-table NAME    its name (default ${DEFAULT_SCHEDULES_TABLE}, the brokers' schedulesTable)
  --side-tables             print the DDL of every side table brokers create if missing (heartbeat,
                            schedules, queue controls, cancellations, maintenance, rate limits,
                            dedupe windows, concurrency), under their default names, for a migration;
                            needs only the URL's scheme, as --print
  --print                   print the SQL instead of running it (needs only the URL's scheme:
                            mysql:// prints MySQL's spelling, mariadb:// MariaDB's)
  -h, --help                this help`;

/** The flags that shape the table. */
export interface InitLayoutFlags {
  readonly table: string;
  readonly schema?: string | undefined;
  readonly lease?: boolean | undefined;
  readonly mark?: boolean | undefined;
  readonly priority?: boolean | undefined;
  readonly fifo?: boolean | undefined;
  readonly 'partition-key'?: boolean | undefined;
  readonly 'dedupe-key'?: boolean | undefined;
  readonly 'no-group'?: boolean | undefined;
  readonly 'row-mode'?: boolean | undefined;
}

/** The table `init` creates for these flags, as a `defineTable` declaration. */
export function initDeclaration(flags: InitLayoutFlags): TableDeclaration {
  if (flags.fifo === true && flags['no-group'] === true) throw new UsageError('--fifo needs the queue column; drop --no-group');
  const declaration: TableDeclaration = { table: flags.table, id: 'id' };
  if (flags.schema !== undefined) declaration.schema = flags.schema;
  if (flags['no-group'] !== true) declaration.group = flags.fifo === true ? { column: 'queue', fifo: true } : 'queue';
  if (flags.priority === true) declaration.priority = 'priority';
  if (flags['partition-key'] === true) declaration.partitionKey = 'partition_key';
  declaration.retryAfter = 'retry_after';
  declaration.attempt = 'attempt';
  if (flags.mark === true) declaration.processedAt = 'processed_at';
  if (flags.lease === true) declaration.lockedUntil = 'locked_until';
  declaration.headers = 'headers';
  if (flags['row-mode'] !== true) declaration.payload = 'payload';
  if (flags['dedupe-key'] === true) declaration.dedupeKey = 'dedupe_key';
  return declaration;
}

export async function runInitCommand(args: string[], io: CliIo): Promise<number> {
  const { values } = parseArgs({ args, options: INIT_FLAGS, strict: true });
  if (values.help) {
    writeLine(io.stdout, INIT_USAGE);
    return 0;
  }
  const { url: database, pooler } = databaseTargetOf('init', values, INIT_USAGE, io.env);
  if (values['side-tables'] === true) return printSideTables(database, values, io);
  if (values.schedules === true) return initSchedulesTable(database, pooler, values, io);
  if (values['schedules-table'] !== undefined) throw new UsageError('--schedules-table names the table --schedules creates; add --schedules');
  if (values.table === undefined) throw new UsageError(`init needs --table\n\n${INIT_USAGE}`);
  const declaration = initDeclaration({ ...values, table: values.table });
  const table = defineTable(declaration);
  if (values['in-work-index'] === true && values.lease !== true) throw new UsageError('--in-work-index indexes locked_until, which only --lease adds');
  const tableOptions = { inWorkIndex: values['in-work-index'] === true };
  if (values.print) {
    writeLine(io.stdout, `${table.createTableSql(ddlDialectOf(database), tableOptions).join(';\n\n')};`);
    return 0;
  }
  const driver = createDriver(database, { pooler });
  await driver.open();
  try {
    // The server, not the URL's scheme, says MySQL or MariaDB: a mysql:// URL reaches either,
    // and their DDL differs (collations MariaDB does not have, say).
    const dialect = await openDialect(driver);
    const ddlDialect = await ddlDialectOfServer(driver, dialect);
    const existing = await existingColumns(driver, dialect, table.spec);
    if (existing !== undefined) {
      const missing = roleColumns(table.spec).filter((column) => !existing.includes(column));
      const found = `table "${table.spec.qualifiedName}" already exists on ${driver.description}${
        missing.length === 0 ? '' : ` without ${missing.map((column) => `"${column}"`).join(', ')}, which these flags would add`
      }`;
      if (values['if-not-exists'] !== true) {
        throw new SchemaError({
          table: table.spec.qualifiedName,
          statement: 'init.createTable',
          message: `${found}; nothing was changed (--if-not-exists leaves an existing table as it is and exits 0)`,
        });
      }
      writeLine(io.stdout, `${found}; left as it is`);
      return 0;
    }
    const statements = table.createTableSql(ddlDialect, tableOptions);
    for (const [index, sql] of statements.entries()) {
      await driver.execute({ name: `init.${index === 0 ? 'createTable' : 'createIndex'}`, sql, values: [] });
    }
    writeLine(io.stdout, `created ${table.spec.qualifiedName} (${statements.length} statements)`);
    return 0;
  } finally {
    await driver.close();
  }
}

/**
 * `init --schedules`: the schedules table, created if missing (its DDL says IF NOT EXISTS), on
 * the server's own flavour; no queue table flags apply.
 */
async function initSchedulesTable(database: string, pooler: PoolerMode | undefined, values: InitSchedulesFlags, io: CliIo): Promise<number> {
  const layoutFlags = LAYOUT_FLAG_NAMES.filter((name) => values[name] !== undefined);
  if (layoutFlags.length > 0) {
    throw new UsageError(`--schedules creates the schedules table only; drop ${layoutFlags.map((name) => `--${name}`).join(', ')}`);
  }
  const table = values['schedules-table'] ?? DEFAULT_SCHEDULES_TABLE;
  if (values.print) {
    writeLine(io.stdout, `${createSchedulesTableSql(ddlDialectOf(database), table)};`);
    return 0;
  }
  const driver = createDriver(database, { pooler });
  await driver.open();
  try {
    const ddlDialect = await ddlDialectOfServer(driver, await openDialect(driver));
    await driver.execute({ name: 'init.createSchedulesTable', sql: createSchedulesTableSql(ddlDialect, table), values: [] });
    writeLine(io.stdout, `created ${table} if it did not exist`);
    return 0;
  } finally {
    await driver.close();
  }
}

/** `init --side-tables`: every side table's DDL, printed; nothing runs. */
function printSideTables(database: string, values: InitSchedulesFlags & { readonly schedules?: boolean | undefined }, io: CliIo): number {
  const otherFlags = [...LAYOUT_FLAG_NAMES, 'schedules', 'schedules-table'] as const;
  const given = otherFlags.filter((name) => values[name] !== undefined);
  if (given.length > 0) {
    throw new UsageError(`--side-tables prints the side tables' DDL only; drop ${given.map((name) => `--${name}`).join(', ')}`);
  }
  writeLine(io.stdout, sideTablesScript(ddlDialectOf(database)));
  return 0;
}

/** The queue table's flags, which `--schedules` refuses. */
const LAYOUT_FLAG_NAMES = ['table', 'schema', 'lease', 'mark', 'priority', 'fifo', 'partition-key', 'dedupe-key', 'in-work-index', 'no-group', 'row-mode', 'if-not-exists'] as const;

type InitSchedulesFlags = Partial<Record<(typeof LAYOUT_FLAG_NAMES)[number], unknown>> & {
  readonly 'schedules-table'?: string | undefined;
  readonly print?: boolean | undefined;
};

/** The table's columns when it exists; undefined when it cannot be read (a create then says why). */
async function existingColumns(driver: Driver, dialect: Dialect, spec: TableSpec): Promise<readonly string[] | undefined> {
  const probe = dialect.schema.probeColumns(spec);
  try {
    return (await driver.execute(bindStatement(probe, {}))).columns;
  } catch (error) {
    if (error instanceof StatementError) return undefined;
    throw error;
  }
}

/** The server's own flavour (the dialect checked its version against the floors, as a broker's start does). */
async function ddlDialectOfServer(driver: Driver, dialect: Dialect): Promise<DdlDialectName> {
  if (dialect.name !== 'mysql') return dialect.name;
  const result = await driver.execute(bindStatement(dialect.session.serverVersion(), {}));
  return checkMysqlServerVersion(String(result.rows[0]?.['version'] ?? '')).flavor;
}

/** For --print, which connects to nothing: the URL's scheme picks the spelling (mysql:// MySQL's, mariadb:// MariaDB's). */
function ddlDialectOf(url: string): DdlDialectName {
  const parsed = parseDatabaseUrl(url);
  if (parsed.kind === 'mysql') return url.startsWith('mariadb:') ? 'mariadb' : 'mysql';
  return parsed.kind;
}
