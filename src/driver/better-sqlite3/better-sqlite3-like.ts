/**
 * The subset of better-sqlite3 tablequeue uses, described structurally so that better-sqlite3
 * stays an optional peer dependency and a service's own `Database` fits without type imports.
 */

export interface BetterSqlite3RunResultLike {
  readonly changes: number;
}

export interface BetterSqlite3StatementLike {
  /** Whether the statement returns rows (SELECT, and any statement with RETURNING). */
  readonly reader: boolean;
  all(values: readonly unknown[]): Record<string, unknown>[];
  run(values: readonly unknown[]): BetterSqlite3RunResultLike;
  columns(): readonly { readonly name: string }[];
}

export interface BetterSqlite3DatabaseLike {
  prepare(sql: string): BetterSqlite3StatementLike;
  pragma(source: string, options?: { simple?: boolean }): unknown;
  exec(sql: string): unknown;
  close(): unknown;
  /** The file path, or `:memory:`. */
  readonly name: string;
  readonly memory: boolean;
  readonly open: boolean;
  readonly inTransaction: boolean;
}

export interface BetterSqlite3OpenOptionsLike {
  /** SQLite's busy timeout in milliseconds. */
  readonly timeout: number;
}

export type BetterSqlite3ModuleLike = new (
  filename: string,
  options: BetterSqlite3OpenOptionsLike,
) => BetterSqlite3DatabaseLike;

/** A better-sqlite3 `Database`: it prepares statements and runs pragmas. */
export function isBetterSqlite3DatabaseLike(value: unknown): value is BetterSqlite3DatabaseLike {
  const candidate = value as Partial<Record<keyof BetterSqlite3DatabaseLike, unknown>> | null | undefined;
  return typeof candidate?.prepare === 'function' && typeof candidate.pragma === 'function';
}
