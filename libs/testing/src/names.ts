import { randomBytes } from 'node:crypto';

/** Where integration tests find NATS; overridable for other machines. */
export const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
/** Where integration tests find PostgreSQL (the local `test` database by default). */
export const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/**
 * A name no other test file (or concurrent run) uses: `t<label><random>`, lowercase letters,
 * digits and `_` only, so it is valid as a subject token, a stream prefix and a SQL identifier.
 */
export function uniqueName(label: string): string {
  const clean = label
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '_')
    .slice(0, 12);
  return `t_${clean}_${randomBytes(4).toString('hex')}`;
}
