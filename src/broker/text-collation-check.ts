import type { Dialect } from '../dialect/dialect.js';
import type { Driver } from '../driver/driver.js';
import { bindStatement } from '../statement.js';
import type { TableSpec } from '../table/table-spec.js';

export interface TextCollationCheckOptions {
  readonly driver: Driver;
  readonly dialect: Dialect;
  /** The tables the broker reads; a table listed twice is read once. */
  readonly tables: readonly TableSpec[];
  readonly onWarning: (message: string) => void;
}

/**
 * Warns, once per table and column, when a column that names rows (group, partition key, a
 * supplied id) compares loosely: on a MySQL or MariaDB table made by hand under the default
 * `utf8mb4_general_ci`, a subscriber of "welcome" also takes the rows of "Welcome", "wélcome"
 * and "welcome ". The tables `createTableSql` renders compare exactly; a database without
 * `textCollation` statements has nothing to check.
 */
export async function warnOfLooseTextCollations(options: TextCollationCheckOptions): Promise<void> {
  const statements = options.dialect.schema.textCollation;
  if (statements === undefined) return;
  const read = new Set<string>();
  for (const spec of options.tables) {
    if (read.has(spec.qualifiedName)) continue;
    read.add(spec.qualifiedName);
    const statement = statements.read(spec);
    if (statement === undefined) continue;
    const { rows } = await options.driver.execute(bindStatement(statement, {}));
    for (const row of rows) {
      const column = String(row['column']);
      const collation = String(row['collation']);
      const ignored = statements.ignoredBy(collation);
      if (ignored.length === 0) continue;
      const fix = statements.renderFix(spec, { name: column, type: String(row['type']), isNullable: row['nullable'] === 'YES' });
      options.onWarning(
        `table "${spec.qualifiedName}": column "${column}" has collation ${collation}, which ignores ${listOf(ignored)} when it compares, so values that differ only in those select each other's rows; make it compare exactly with: ${fix}`,
      );
    }
  }
}

/** `a`, `a and b`, `a, b and c`. */
function listOf(items: readonly string[]): string {
  return items.length <= 1 ? items.join('') : `${items.slice(0, -1).join(', ')} and ${items.at(-1)}`;
}
