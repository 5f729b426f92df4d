import type { Db } from '../db/database';

/**
 * The highest sequence of `stream` the projection has applied (0 before any). The consumer folds
 * in stream order, so everything below it is applied too, apart from dead-lettered events.
 */
export async function appliedSequence(db: Db, stream: string): Promise<number> {
  const row = await db
    .selectFrom('audit_log')
    .select((eb) => eb.fn.max('seq').as('seq'))
    .where('stream', '=', stream)
    .executeTakeFirst();
  return Number(row?.seq ?? 0);
}
