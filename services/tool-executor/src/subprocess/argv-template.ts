import type { ArgvElement, ValidationIssue } from '@toolgate/contracts';

/** The argv of one call, or why the input cannot fill the template. */
export type FilledArgv = { ok: true; argv: string[] } | { ok: false; issues: ValidationIssue[] };

/**
 * Fills a command's argv template from a call's input (already validated against the contract).
 * Each placeholder becomes exactly one argv element — there is no shell, so no splitting,
 * globbing or quoting to get wrong. A placeholder's field must be a string, a finite number or a
 * boolean; a value starting with `-` is refused unless the element allows it, so input cannot
 * turn into an option of the program. Pure.
 */
export function fillArgv(template: readonly ArgvElement[], input: unknown): FilledArgv {
  const fields =
    typeof input === 'object' && input !== null && !Array.isArray(input)
      ? (input as Record<string, unknown>)
      : {};
  const argv: string[] = [];
  const issues: ValidationIssue[] = [];
  for (const element of template) {
    if (typeof element === 'string') {
      argv.push(element);
      continue;
    }
    const field = element.input;
    const value = Object.prototype.hasOwnProperty.call(fields, field) ? fields[field] : undefined;
    let text: string | undefined;
    if (typeof value === 'string') text = value;
    else if (typeof value === 'number' && Number.isFinite(value)) text = String(value);
    else if (typeof value === 'boolean') text = String(value);
    if (text === undefined) {
      issues.push({
        path: [field],
        message:
          value === undefined
            ? 'is required by the command'
            : 'must be a string, number or boolean to be a command argument',
      });
    } else if (text.includes('\0')) {
      issues.push({ path: [field], message: 'must not contain a NUL byte' });
    } else if (text.startsWith('-') && !element.allowLeadingDash) {
      issues.push({ path: [field], message: 'must not start with "-" (it would be an option)' });
    } else {
      argv.push(text);
    }
  }
  return issues.length ? { ok: false, issues } : { ok: true, argv };
}
