/**
 * What a `jsonb` column holds once read. Writes go through a record set (`db/recordset.ts`: the rows
 * as one JSON text parameter), never as bind parameters per value: node-postgres would turn a JS
 * array into a Postgres array literal.
 */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
