import {
  INPUT_PREVIEW_CHARS,
  INPUT_SUMMARY_CHARS,
  INPUT_SUMMARY_FIELDS,
  type InputPreview,
} from '@toolgate/contracts';
import { sql } from 'kysely';

/**
 * An approval's input as a list shows it, computed in the database so that a listing never loads
 * whole inputs: the head of its JSON (one character past the preview, to tell a cut one), its size
 * and its headline field (its command, path…). Spread into a select over `approvals`; read back
 * with {@link inputPreviewOf}.
 */
export const inputPreviewColumns = [
  sql<string>`left(coalesce(approvals.input::text, 'null'), ${INPUT_PREVIEW_CHARS + 1})`.as(
    'input_head',
  ),
  sql<string>`octet_length(coalesce(approvals.input::text, 'null'))`.as('input_bytes'),
  sql<string | null>`left(coalesce(${sql.join(
    INPUT_SUMMARY_FIELDS.map((f) => sql`approvals.input ->> ${f}`),
  )}), ${INPUT_SUMMARY_CHARS})`.as('input_summary'),
] as const;

/** The columns {@link inputPreviewColumns} selects. */
export interface InputPreviewRow {
  input_head: string;
  input_bytes: string;
  input_summary: string | null;
}

/** The preview a row's {@link inputPreviewColumns} make. */
export function inputPreviewOf(row: InputPreviewRow): InputPreview {
  return {
    json: row.input_head.slice(0, INPUT_PREVIEW_CHARS),
    truncated: row.input_head.length > INPUT_PREVIEW_CHARS,
    bytes: Number(row.input_bytes),
    summary: row.input_summary,
  };
}
