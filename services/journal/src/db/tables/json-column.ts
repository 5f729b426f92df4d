/**
 * What a `jsonb` column holds once read. Writes always go through `toJsonb` (a text parameter cast
 * to jsonb), because node-postgres would turn a JS array into a Postgres array literal.
 */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
