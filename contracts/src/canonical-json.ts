import { createHash } from 'node:crypto';
import canonicalize from 'canonicalize';
import { NonSerializableValueError } from './errors';
import { MAX_JSON_DEPTH } from './json-limits';

/**
 * How deep a value canonical JSON takes: twice what the edges let in ({@link MAX_JSON_DEPTH}), so
 * the arrays Toolgate wraps around an input to hash it always fit, and far below the depth at which
 * a recursive walk would overflow the stack. Deeper values are refused, never crash.
 */
export const CANONICAL_JSON_MAX_DEPTH = 2 * MAX_JSON_DEPTH;

/**
 * RFC 8785 (JCS) canonical JSON of `value`: keys sorted by UTF-16 code units, numbers in their
 * shortest ECMAScript form, no insignificant whitespace. Two values that are equal as JSON have
 * byte-identical canonical forms, whatever their key order.
 *
 * Throws {@link NonSerializableValueError} for anything JSON cannot represent faithfully:
 * `undefined` at the top, functions, symbols, bigints, non-finite numbers and cycles, and for
 * values nested deeper than {@link CANONICAL_JSON_MAX_DEPTH}.
 */
export function canonicalJson(value: unknown): string {
  assertJsonValue(value, new Set(), '$', 0);
  const out = canonicalize(value);
  if (out === undefined) throw new NonSerializableValueError('value is not JSON-serialisable');
  return out;
}

/** sha256 (lowercase hex) of the canonical JSON of `value`. */
export function canonicalDigest(value: unknown): string {
  return sha256Hex(canonicalJson(value));
}

/** sha256 (lowercase hex) of a UTF-8 string. */
export function sha256Hex(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

/** Whether `value` survives JSON unchanged (see {@link canonicalJson}). */
export function isJsonValue(value: unknown): boolean {
  try {
    assertJsonValue(value, new Set(), '$', 0);
    return true;
  } catch {
    return false;
  }
}

function assertJsonValue(value: unknown, seen: Set<object>, path: string, depth: number): void {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return;
    case 'number':
      if (!Number.isFinite(value)) {
        throw new NonSerializableValueError(`non-finite number at ${path}`, { path });
      }
      return;
    case 'object': {
      if (value === null) return;
      if (seen.has(value)) throw new NonSerializableValueError(`cycle at ${path}`, { path });
      if (depth >= CANONICAL_JSON_MAX_DEPTH) {
        throw new NonSerializableValueError(
          `nests deeper than ${CANONICAL_JSON_MAX_DEPTH} levels of objects and arrays`,
          { maxDepth: CANONICAL_JSON_MAX_DEPTH },
        );
      }
      const proto = Object.getPrototypeOf(value) as unknown;
      if (!Array.isArray(value) && proto !== Object.prototype && proto !== null) {
        const kind = (value as { constructor?: { name?: string } }).constructor?.name ?? 'object';
        throw new NonSerializableValueError(`${kind} at ${path} is not plain JSON`, { path });
      }
      seen.add(value);
      if (Array.isArray(value)) {
        value.forEach((item, i) => assertJsonValue(item, seen, `${path}[${i}]`, depth + 1));
      } else {
        for (const [k, v] of Object.entries(value)) {
          if (v === undefined) continue; // dropped by JSON, as JSON.stringify does
          assertJsonValue(v, seen, `${path}.${k}`, depth + 1);
        }
      }
      seen.delete(value);
      return;
    }
    default:
      throw new NonSerializableValueError(`${typeof value} at ${path} is not JSON`, { path });
  }
}
