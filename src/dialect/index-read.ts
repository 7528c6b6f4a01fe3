/**
 * The result columns of the statements that read a table's indexes (`schema.indexes.read`, and
 * on MySQL and MariaDB `dedupe.uniqueIndexes`): a row per key column, in index order, with the
 * index's name and the column's (null for an expression).
 */
export const INDEX_COLUMN = 'index_name';
export const COLUMN_COLUMN = 'column_name';

/** Each index's key columns in order (null for an expression), from those rows. */
export function indexColumnsOf(rows: readonly Record<string, unknown>[]): Map<string, (string | null)[]> {
  const indexes = new Map<string, (string | null)[]>();
  for (const row of rows) {
    const name = String(row[INDEX_COLUMN]);
    const column = row[COLUMN_COLUMN];
    const columns = indexes.get(name) ?? [];
    columns.push(column === null || column === undefined ? null : String(column));
    indexes.set(name, columns);
  }
  return indexes;
}
