/** A claimed row as the handler sees it. */
export interface Message<Payload = unknown> {
  /** The row's id, as text whatever the column type. */
  readonly id: string;
  /** The decoded payload (or the row itself on a table without a payload column). */
  readonly payload: Payload;
  /** The payload column's bytes; undefined on a table without one. */
  readonly raw: Buffer | undefined;
  /** 1 on the first delivery. */
  readonly attempt: number;
  readonly partitionKey: string | null;
  readonly headers: Readonly<Record<string, string>>;
  /** The group (queue name) of a grouped table. */
  readonly group: string | undefined;
  /** Every column of the row as the driver read it. */
  readonly row: Readonly<Record<string, unknown>>;
}
