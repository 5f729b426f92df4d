import { z } from 'zod';

/**
 * Limits on JSON that comes from outside (tool input, tool parameters schemas, policy documents,
 * tool results), checked where it enters, so that nothing further in — canonical JSON, hashing,
 * validation, a fold — ever meets a value it cannot handle.
 */

/**
 * How deeply JSON from outside may nest: 100 levels of objects and arrays (`{}` is one level,
 * `{"a":[1]}` two). Deeper input is refused at the edge (`invalid-request`): a recursive walk over
 * ~3,000 levels overflows the stack, and no tool call needs more than a few dozen.
 */
export const MAX_JSON_DEPTH = 100;

/**
 * Keys refused in JSON documents that are merged into objects (policy documents, tool parameters
 * schemas): written into a plain object they reach its prototype instead of the object itself.
 */
export const FORBIDDEN_JSON_KEYS: ReadonlySet<string> = new Set([
  '__proto__',
  'constructor',
  'prototype',
]);

/**
 * Whether `value` nests no deeper than `maxDepth` levels of objects and arrays. Iterative and
 * stops at the first level too deep, so it is safe on any input, however deep.
 */
export function withinJsonDepth(value: unknown, maxDepth: number = MAX_JSON_DEPTH): boolean {
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length > 0) {
    const [current, depth] = stack.pop()!;
    if (typeof current !== 'object' || current === null) continue;
    if (depth + 1 > maxDepth) return false;
    const children = Array.isArray(current) ? current : Object.values(current);
    for (const child of children) stack.push([child, depth + 1]);
  }
  return true;
}

/**
 * The path to the first key of `value` (at any depth) that is in {@link FORBIDDEN_JSON_KEYS}, or
 * undefined when there is none. Iterative; looks at own keys only, as JSON.parse makes them.
 * Linear in the size of `value`: each node keeps a link to its parent, and the path is built only
 * for the key found (copying the path at every level made a deep document cost depth² — 50,000
 * levels took minutes — at an edge that sees untrusted documents).
 */
export function findForbiddenKey(value: unknown): (string | number)[] | undefined {
  interface Node {
    readonly value: unknown;
    readonly parent: Node | undefined;
    readonly key: string | number | undefined;
  }
  const pathTo = (node: Node | undefined, last: string): (string | number)[] => {
    const path: (string | number)[] = [last];
    for (let n = node; n?.parent !== undefined; n = n.parent) path.push(n.key!);
    return path.reverse();
  };
  const stack: Node[] = [{ value, parent: undefined, key: undefined }];
  while (stack.length > 0) {
    const node = stack.pop()!;
    const current = node.value;
    if (typeof current !== 'object' || current === null) continue;
    if (Array.isArray(current)) {
      current.forEach((child, i) => stack.push({ value: child, parent: node, key: i }));
      continue;
    }
    for (const key of Object.keys(current)) {
      if (FORBIDDEN_JSON_KEYS.has(key)) return pathTo(node, key);
      stack.push({ value: (current as Record<string, unknown>)[key], parent: node, key });
    }
  }
  return undefined;
}

const tooDeep = `nests deeper than ${MAX_JSON_DEPTH} levels of objects and arrays`;

/**
 * `schema`, refusing first a value that nests deeper than {@link MAX_JSON_DEPTH} levels: checked on
 * the raw input, before `schema` walks it. Input and output types are `schema`'s.
 */
export function boundedJson<T extends z.ZodType>(schema: T): z.ZodType<z.output<T>, z.input<T>> {
  return z.preprocess((value, ctx) => {
    if (!withinJsonDepth(value)) ctx.addIssue({ code: 'custom', message: tooDeep });
    return value;
  }, schema) as unknown as z.ZodType<z.output<T>, z.input<T>>;
}

/**
 * `schema` for a JSON document that will be merged into objects: bounded as {@link boundedJson},
 * and refused when any key at any depth is one of {@link FORBIDDEN_JSON_KEYS}. Checked on the raw
 * input: once parsed into a record, a `__proto__` key is already gone into the prototype.
 */
export function mergeableJson<T extends z.ZodType>(schema: T): z.ZodType<z.output<T>, z.input<T>> {
  return z.preprocess((value, ctx) => {
    if (!withinJsonDepth(value)) {
      ctx.addIssue({ code: 'custom', message: tooDeep });
      return value;
    }
    const path = findForbiddenKey(value);
    if (path) {
      const key = JSON.stringify(path[path.length - 1]);
      ctx.addIssue({
        code: 'custom',
        path,
        message: `the key ${key} is not allowed in this document (${[...FORBIDDEN_JSON_KEYS].join(', ')} never are)`,
      });
    }
    return value;
  }, schema) as unknown as z.ZodType<z.output<T>, z.input<T>>;
}
