import type { Kysely } from 'kysely';

/**
 * A dispatch's trace (`requested.traceId`, the W3C trace the call was submitted in), for a link to
 * an operator's trace UI. Null for dispatches requested without one, and for those folded before
 * this column existed until a rebuild folds their events again. Frozen, like every migration.
 */

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- a frozen migration must not depend on today's Database type
type AnyDb = Kysely<any>;

export async function up(db: AnyDb): Promise<void> {
  await db.schema.alterTable('dispatches').addColumn('trace_id', 'text').execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.alterTable('dispatches').dropColumn('trace_id').execute();
}
