import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { JsonSchema } from '../../src/schema-spec';

/** One group of the official JSON Schema Test Suite: a schema and the instances tried on it. */
export interface SuiteGroup {
  description: string;
  schema: unknown;
  tests: { description: string; data: unknown; valid: boolean }[];
}

/** A group's schema as a tool's parameters, and how a test's instance becomes the tool's input. */
export interface Registration {
  parameters: JsonSchema;
  input(data: unknown): unknown;
}

/** The property a non-object schema is wrapped in. */
const WRAPPED = 'value';

/**
 * Turns a suite schema into tool parameters. A schema whose root is an object schema is
 * registered as it is. Any other (no `type`, another type, a boolean schema) becomes the one
 * required property of an object, and each instance is passed as that property. The wrapped
 * schema keeps its meaning: when it has no `$id` of its own it gets a URN base, so its `#...`
 * references still resolve inside it rather than against the wrapper.
 */
export function registrationOf(schema: unknown, n: number): Registration {
  if (isObject(schema) && schema.type === 'object') {
    return { parameters: schema, input: (data) => data };
  }
  let inner: unknown = schema;
  if (isObject(schema) && typeof schema.$id !== 'string') {
    inner = { $id: `urn:toolgate:suite:${n}`, ...schema };
  }
  return {
    parameters: {
      $schema: 'https://json-schema.org/draft/2020-12/schema',
      type: 'object',
      properties: { [WRAPPED]: inner },
      required: [WRAPPED],
    },
    input: (data) => ({ [WRAPPED]: data }),
  };
}

/** The groups of every `*.json` file directly in `dir` (optional tests live in a subdirectory). */
export function loadSuite(dir: string): { file: string; groups: SuiteGroup[] }[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((file) => ({
      file,
      groups: JSON.parse(readFileSync(join(dir, file), 'utf8')) as SuiteGroup[],
    }));
}

const META_2020_12 = 'https://json-schema.org/draft/2020-12/';
/** Keywords whose value is instance data: a `$ref` key in there is no reference. */
const DATA = new Set(['const', 'enum', 'examples', 'default']);

/**
 * Whether a group's schema needs a document it does not contain (one the suite serves on
 * localhost:1234, or another dialect's meta-schema): some `$ref`, `$dynamicRef` or `$schema`
 * resolves, against the base URI in scope, to a document that is neither one of the schema's own
 * `$id`s nor part of the draft 2020-12 meta-schema. Worked out from the schema alone, so it does
 * not depend on what the compiler under test accepts.
 */
export function needsRemote(file: string, group: SuiteGroup): boolean {
  if (file === 'refRemote.json') return true;
  const defined = new Set<string>();
  const targets: string[] = [];
  const visit = (node: unknown, base: string): void => {
    if (Array.isArray(node)) return node.forEach((item) => visit(item, base));
    if (!isObject(node)) return;
    const here = typeof node.$id === 'string' ? resolve(node.$id, base) : base;
    if (here !== base) defined.add(documentOf(here));
    for (const key of ['$ref', '$dynamicRef'] as const) {
      const ref = node[key];
      if (typeof ref === 'string') targets.push(resolve(ref, here));
    }
    if (typeof node.$schema === 'string') targets.push(node.$schema);
    for (const [key, value] of Object.entries(node)) if (!DATA.has(key)) visit(value, here);
  };
  visit(group.schema, '');
  return targets.some((target) => {
    const doc = documentOf(target);
    return doc !== '' && !defined.has(doc) && !doc.startsWith(META_2020_12);
  });
}

function resolve(ref: string, base: string): string {
  if (base === '') return ref;
  try {
    return new URL(ref, base).href;
  } catch {
    return ref;
  }
}

function documentOf(uri: string): string {
  const hash = uri.indexOf('#');
  return hash === -1 ? uri : uri.slice(0, hash);
}

/**
 * A draft-07 schema in draft 2020-12 terms, with the same verdicts: array `items` becomes
 * `prefixItems` (and `additionalItems` becomes `items`), `dependencies` splits into
 * `dependentRequired` and `dependentSchemas`, a plain-name `$id` (`"#foo"`) becomes `$anchor`,
 * the keywords beside a `$ref` are dropped (draft-07 ignores them; only `definitions`, which
 * holds reference targets, stays), and a reference to the draft-07 meta-schema names the 2020-12
 * one (the suite's tests on it have the same verdict under both).
 */
export function fromDraft7(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(fromDraft7);
  if (!isObject(node)) return node;
  if (typeof node.$ref === 'string') {
    const ref =
      node.$ref === 'http://json-schema.org/draft-07/schema#'
        ? 'https://json-schema.org/draft/2020-12/schema'
        : node.$ref.startsWith('#')
          ? node.$ref.replace(/\/items\/(\d+)/g, '/prefixItems/$1')
          : node.$ref;
    return node.definitions === undefined
      ? { $ref: ref }
      : { $ref: ref, definitions: fromDraft7(node.definitions) };
  }
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(node)) {
    if (key === '$schema') continue;
    if (DATA.has(key)) out[key] = value;
    else if (key === '$id' && typeof value === 'string' && value.startsWith('#')) {
      out.$anchor = value.slice(1);
    } else if (key === 'items' && Array.isArray(value)) {
      out.prefixItems = value.map(fromDraft7);
      if (node.additionalItems !== undefined) out.items = fromDraft7(node.additionalItems);
    } else if (key === 'additionalItems') {
      // Only meaningful beside an array `items`, handled there.
    } else if (key === 'dependencies' && isObject(value)) {
      for (const [name, dep] of Object.entries(value)) {
        const target = Array.isArray(dep) ? 'dependentRequired' : 'dependentSchemas';
        const map = (out[target] ??= {}) as Record<string, unknown>;
        Object.defineProperty(map, name, {
          value: Array.isArray(dep) ? dep : fromDraft7(dep),
          enumerable: true,
          writable: true,
          configurable: true,
        });
      }
    } else {
      Object.defineProperty(out, key, {
        value: fromDraft7(value),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
  }
  return out;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
