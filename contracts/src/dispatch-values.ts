import { z } from 'zod';
import { inputPreview, type InputPreview } from './list-paging';
import { SubjectTokenSchema as Token } from './subjects';

/**
 * How `dispatch.get` stays bounded whatever a call carries. Its reply travels over NATS (journal →
 * gateway → a team's client), whose broker refuses a message over `max_payload` (1 MiB by default),
 * and a call's input, post-hook input and result may each be nearly that large — each is in the
 * dispatch and again in its events. So a reply that would pass {@link DISPATCH_REPLY_BUDGET_BYTES}
 * carries the largest of these values as an {@link ElidedValue} (a preview and its size) in every
 * place it appears, names them in `elided`, and the whole value is read in chunks with
 * `dispatch.value` ({@link GetDispatchValueRequestSchema}).
 */

/** The most bytes a `dispatch.get` reply's JSON may take (a quarter of the smallest `max_payload`). */
export const DISPATCH_REPLY_BUDGET_BYTES = 256 * 1024;

/**
 * Characters (Unicode code points) of a value's JSON text one `dispatch.value` reply carries: at
 * most 4 bytes each as UTF-8 and in a JSON string, so a chunk's reply stays within the budget.
 */
export const DISPATCH_VALUE_CHUNK_CHARS = 64 * 1024;

/**
 * The values a `dispatch.get` may elide, by the dispatch field that holds them; the events carry
 * the same value (`input`: `requested.input`; `effectiveInput`: `decided.input` and
 * `suspended.input`; `result`: `settled.result`).
 */
export const DispatchValuePartSchema = z.enum(['input', 'effectiveInput', 'result']);
export type DispatchValuePart = z.infer<typeof DispatchValuePartSchema>;

/** What stands in a `dispatch.get` reply for a value it names in `elided`. */
export interface ElidedValue {
  kind: 'elided';
  /** The value's preview, as lists show inputs. */
  preview: InputPreview;
}

/** The stand-in of an elided value. */
export function elidedValue(value: unknown): ElidedValue {
  return { kind: 'elided', preview: inputPreview(value) };
}

/** `dispatch.value`: one chunk of a dispatch value's JSON text, from `offset` (code points). */
export const GetDispatchValueRequestSchema = z.strictObject({
  dispatchId: Token,
  part: DispatchValuePartSchema,
  // Code points; at most what PostgreSQL's substr takes as a 32-bit start (offset + 1). A value
  // is far shorter: an offset past its end answers an empty chunk.
  offset: z
    .number()
    .int()
    .min(0)
    .max(2 ** 31 - 2)
    .default(0),
});
export type GetDispatchValueRequest = z.input<typeof GetDispatchValueRequestSchema>;

/**
 * One chunk of a value: `text` is its JSON text from `offset` on, at most
 * {@link DISPATCH_VALUE_CHUNK_CHARS} code points; `length` is the whole text's, and `nextOffset`
 * the offset of the next chunk (null after the last). The chunks joined in order are the value's
 * JSON text; a value the dispatch does not have (yet) is `null`.
 */
export const DispatchValueChunkSchema = z.object({
  dispatchId: z.string(),
  part: DispatchValuePartSchema,
  offset: z.number().int().min(0),
  length: z.number().int().min(0),
  text: z.string(),
  nextOffset: z.number().int().min(0).nullable(),
});
export type DispatchValueChunk = z.infer<typeof DispatchValueChunkSchema>;
