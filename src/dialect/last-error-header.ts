/**
 * The header a dead letter records its last failure in, and the three databases' spellings of
 * "the headers column with that header set" side by side; each dialect hands its own to the
 * settle statements. The failure's text is a parameter (`lastError`); only the fixed header name
 * is written into the SQL. The operator tools tell dead letters by the header and take it off
 * again when they requeue one (the spellings at the end).
 *
 * Headers that are NULL or empty become an object of that one header; an object gains it (in
 * place of an earlier one) and keeps every other header's value; anything else (text that is not
 * a JSON object, which the codec cannot read either) stays as it was. MySQL, MariaDB and SQLite
 * test the text before reading it; Postgres can only read it, so on a text column holding text
 * that is not JSON the dead letter fails there (JSON and JSONB columns always hold JSON).
 */
import { param, sql, textLiteral, type SqlText } from './quoting.js';

/** Read by the operator tools (`peek`'s `lastError`, the dashboard); written by dead letters. */
export const LAST_ERROR_HEADER = 'tablequeue-last-error';

/** The headers value (a column, as its statement names it) with `LAST_ERROR_HEADER` set to `lastError`. */
export type HeadersWithLastError = (headers: SqlText) => SqlText;

/**
 * `jsonb ||`, which keeps the left side's keys and takes the right side's. Reading the column
 * through `::text` serves JSONB, JSON and text columns alike, and the JSONB result is assigned
 * back as the column's own type.
 */
export const POSTGRES_HEADERS_WITH_LAST_ERROR: HeadersWithLastError = (headers) => {
  const stored = sql`COALESCE(NULLIF(${headers}::text, ''), '{}')::jsonb`;
  const header = sql`jsonb_build_object(${textLiteral(LAST_ERROR_HEADER)}, ${param('lastError')}::text)`;
  return sql`CASE jsonb_typeof(${stored}) WHEN 'object' THEN ${stored} || ${header} ELSE ${stored} END`;
};

/** The header's JSON path; quoted, since the name has hyphens. */
const LAST_ERROR_PATH = textLiteral(`$."${LAST_ERROR_HEADER}"`);

/** `JSON_SET` on MySQL and MariaDB (whose JSON is text with a validity check). */
export const MYSQL_HEADERS_WITH_LAST_ERROR: HeadersWithLastError = (headers) => {
  const stored = sql`COALESCE(NULLIF(${headers}, ''), '{}')`;
  // Nested, so JSON_TYPE never reads text JSON_VALID refused: MySQL would fail the statement.
  return sql`CASE WHEN JSON_VALID(${stored}) THEN CASE JSON_TYPE(${stored}) WHEN 'OBJECT' THEN JSON_SET(${stored}, ${LAST_ERROR_PATH}, ${param('lastError')}) ELSE ${headers} END ELSE ${headers} END`;
};

/** `json_set` on SQLite's text column. */
export const SQLITE_HEADERS_WITH_LAST_ERROR: HeadersWithLastError = (headers) => {
  const stored = sql`COALESCE(NULLIF(${headers}, ''), '{}')`;
  // Nested, so json_type never reads malformed text: it would fail the statement.
  return sql`CASE WHEN json_valid(${stored}) THEN CASE json_type(${stored}) WHEN 'object' THEN json_set(${stored}, ${LAST_ERROR_PATH}, ${param('lastError')}) ELSE ${headers} END ELSE ${headers} END`;
};

/**
 * How the operator tools tell a dead letter from a live row: a dead-letter move set the header.
 * The headers are matched as text for the key followed by its colon, which every JSON writer
 * puts there and which a header's value cannot hold unescaped: reading them as JSON would fail on
 * Postgres for a text column holding something else, and a count must never fail on one bad row.
 */
const LAST_ERROR_KEY_PATTERN = textLiteral(`%"${LAST_ERROR_HEADER}":%`);

/** Whether the headers (a column, as its statement names it) carry `LAST_ERROR_HEADER`; never NULL, never parenthesized. */
export type HeadersHaveLastError = (headers: SqlText) => SqlText;

/** The headers without `LAST_ERROR_HEADER`, for rows that have it (a requeued dead letter starts afresh). */
export type HeadersWithoutLastError = (headers: SqlText) => SqlText;

/** JSONB, JSON and text columns read alike through `::text`. */
export const POSTGRES_HEADERS_HAVE_LAST_ERROR: HeadersHaveLastError = (headers) =>
  sql`${headers} IS NOT NULL AND ${headers}::text LIKE ${LAST_ERROR_KEY_PATTERN}`;

/** MySQL and MariaDB compare a JSON column as its text, case-sensitively (its collation is binary). */
export const MYSQL_HEADERS_HAVE_LAST_ERROR: HeadersHaveLastError = (headers) =>
  sql`${headers} IS NOT NULL AND ${headers} LIKE ${LAST_ERROR_KEY_PATTERN}`;

/** `GLOB`, since SQLite's `LIKE` ignores case. */
export const SQLITE_HEADERS_HAVE_LAST_ERROR: HeadersHaveLastError = (headers) =>
  sql`${headers} IS NOT NULL AND ${headers} GLOB ${textLiteral(`*"${LAST_ERROR_HEADER}":*`)}`;

/** `jsonb -`: run only on rows that have the header, whose headers a dead-letter move wrote as JSON. */
export const POSTGRES_HEADERS_WITHOUT_LAST_ERROR: HeadersWithoutLastError = (headers) =>
  sql`${headers}::text::jsonb - ${textLiteral(LAST_ERROR_HEADER)}`;

/** `JSON_REMOVE`, on text `JSON_VALID` accepted: MySQL would fail the statement on other text. */
export const MYSQL_HEADERS_WITHOUT_LAST_ERROR: HeadersWithoutLastError = (headers) =>
  sql`CASE WHEN JSON_VALID(${headers}) THEN JSON_REMOVE(${headers}, ${LAST_ERROR_PATH}) ELSE ${headers} END`;

/** `json_remove`, on text `json_valid` accepted: it would fail the statement on malformed text. */
export const SQLITE_HEADERS_WITHOUT_LAST_ERROR: HeadersWithoutLastError = (headers) =>
  sql`CASE WHEN json_valid(${headers}) THEN json_remove(${headers}, ${LAST_ERROR_PATH}) ELSE ${headers} END`;
