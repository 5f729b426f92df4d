import { ErrorCode, ToolgateError } from '@toolgate/contracts';
import type { z } from 'zod';

/** Parses a request body; a malformed one is an `invalid-request` error listing every issue. */
export function parseRequest<S extends z.ZodType>(schema: S, body: unknown): z.output<S> {
  const parsed = schema.safeParse(body ?? {});
  if (parsed.success) return parsed.data;
  const issues = parsed.error.issues.map((i) => ({
    path: i.path.map((p) => (typeof p === 'number' ? p : String(p))),
    message: i.message,
  }));
  throw new ToolgateError(
    ErrorCode.InvalidRequest,
    `invalid request: ${issues.map((i) => `${i.path.join('.') || '(body)'}: ${i.message}`).join('; ')}`,
    { details: { issues } },
  );
}
