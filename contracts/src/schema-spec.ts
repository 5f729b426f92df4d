import Ajv2020, { type ErrorObject, type ValidateFunction } from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { canonicalDigest } from './canonical-json';
import { ConfigError, type ValidationIssue } from './errors';

/** A JSON Schema document (draft 2020-12). */
export type JsonSchema = { [key: string]: unknown };

/**
 * The slice of the Standard Schema v1 + Standard JSON Schema interfaces Toolgate relies on
 * (https://standardschema.dev). Zod 4, Valibot and ArkType values implement it.
 */
export interface StandardSchemaV1<Input = unknown, Output = Input> {
  readonly '~standard': {
    readonly version: 1;
    readonly vendor: string;
    readonly validate: (value: unknown) => StandardResult<Output> | Promise<StandardResult<Output>>;
    readonly jsonSchema?: {
      readonly input: (options: { target: string }) => Record<string, unknown>;
    };
    readonly types?: { readonly input: Input; readonly output: Output } | undefined;
  };
}

type StandardResult<Output> =
  | { readonly value: Output; readonly issues?: undefined }
  | {
      readonly issues: ReadonlyArray<{
        readonly message: string;
        readonly path?: ReadonlyArray<PropertyKey | { readonly key: PropertyKey }> | undefined;
      }>;
    };

/** Form 2: an explicit JSON Schema plus a type guard (or a validator returning issues). */
export interface JsonSchemaPair<T> {
  jsonSchema: JsonSchema;
  validate: ((value: unknown) => value is T) | ((value: unknown) => ValidationIssue[] | boolean);
}

/** The three accepted forms of a parameters schema. */
export type SchemaSpec = StandardSchemaV1<unknown, unknown> | JsonSchemaPair<unknown> | JsonSchema;

/** The input type `execute` receives for a given schema form. */
export type Out<S> =
  S extends StandardSchemaV1<unknown, infer O>
    ? O
    : S extends { validate: (value: unknown) => value is infer T }
      ? T
      : unknown;

export type ValidationResult<T> = { ok: true; value: T } | { ok: false; issues: ValidationIssue[] };

/** A schema checked at definition time: its JSON Schema projection and a validator. */
export interface CompiledSchema<T = unknown> {
  readonly form: 'standard' | 'pair' | 'literal';
  readonly jsonSchema: JsonSchema;
  /** Validates a call's arguments. Never throws: problems come back as issues. */
  validate(input: unknown): Promise<ValidationResult<T>>;
}

const DRAFT_2020_12 = 'https://json-schema.org/draft/2020-12/schema';

const ajv = new Ajv2020({
  strict: true,
  allErrors: true,
  validateSchema: true,
  // Remote references are refused before compilation; this makes sure nothing is ever fetched.
  loadSchema: undefined,
  // Each tool's schema stands alone: registering it under its `$id` would make a second, different
  // schema with the same `$id` fail to compile ("already exists") depending on what came first.
  addUsedSchema: false,
});
addFormats(ajv);
const compiled = new Map<string, ValidateFunction>();

/**
 * Checks a schema spec at definition time and returns its JSON Schema projection and validator.
 * Throws {@link ConfigError} for a library value without a JSON Schema projection, a schema outside
 * the supported draft 2020-12 subset (remote or dynamic `$ref`, unknown keywords, a non-object
 * root), or anything that is none of the three forms.
 */
export function compileSchema<S extends SchemaSpec>(
  spec: S,
  label = 'parameters',
): CompiledSchema<Out<S>> {
  if (isStandardSchema(spec)) return compileStandard(spec, label) as CompiledSchema<Out<S>>;
  if (isPair(spec)) return compilePair(spec, label) as CompiledSchema<Out<S>>;
  if (isPlainObject(spec)) return compileLiteral(spec, label) as CompiledSchema<Out<S>>;
  throw new ConfigError(
    `${label}: expected a Standard Schema, a { jsonSchema, validate } pair or a JSON Schema object`,
  );
}

/**
 * Compiles a bare JSON Schema into an ajv validator, enforcing the supported subset. Used for
 * the literal form and, server-side, for every registered contract (only JSON crosses the bus).
 */
export function compileJsonSchema(
  schema: JsonSchema,
  label = 'parameters',
): (input: unknown) => ValidationIssue[] {
  assertSupportedSubset(schema, label);
  const key = canonicalDigest(schema);
  let validate = compiled.get(key);
  if (!validate) {
    try {
      validate = ajv.compile(stripSchemaUri(schema));
    } catch (cause) {
      throw new ConfigError(
        `${label}: schema is outside the supported draft 2020-12 subset: ${(cause as Error).message}`,
        { cause },
      );
    }
    compiled.set(key, validate);
  }
  const fn = validate;
  return (input) => (fn(input) ? [] : (fn.errors ?? []).map(ajvIssue));
}

function compileStandard(spec: StandardSchemaV1, label: string): CompiledSchema {
  const std = spec['~standard'];
  if (!std.jsonSchema || typeof std.jsonSchema.input !== 'function') {
    throw new ConfigError(
      `${label}: the ${std.vendor} schema has no JSON Schema projection (Standard JSON Schema); use a { jsonSchema, validate } pair`,
      { details: { vendor: std.vendor } },
    );
  }
  let jsonSchema: JsonSchema;
  try {
    jsonSchema = std.jsonSchema.input({ target: 'draft-2020-12' });
  } catch (cause) {
    throw new ConfigError(
      `${label}: the ${std.vendor} schema cannot be projected to JSON Schema: ${(cause as Error).message}`,
      { cause },
    );
  }
  compileJsonSchema(jsonSchema, label);
  return {
    form: 'standard',
    jsonSchema,
    async validate(input) {
      try {
        const result = await std.validate(input);
        if (result.issues) return { ok: false, issues: result.issues.map(standardIssue) };
        return { ok: true, value: result.value };
      } catch (cause) {
        return validatorFailed(cause);
      }
    },
  };
}

function compilePair(spec: JsonSchemaPair<unknown>, label: string): CompiledSchema {
  const structural = compileJsonSchema(spec.jsonSchema, label);
  return {
    form: 'pair',
    jsonSchema: spec.jsonSchema,
    async validate(input) {
      try {
        const verdict = spec.validate(input);
        if (verdict === true) return { ok: true, value: input };
        if (Array.isArray(verdict) && verdict.length === 0) return { ok: true, value: input };
        if (Array.isArray(verdict)) return { ok: false, issues: verdict };
        const issues = structural(input);
        return {
          ok: false,
          issues: issues.length
            ? issues
            : [{ path: [], message: 'rejected by the validate function' }],
        };
      } catch (cause) {
        return validatorFailed(cause);
      }
    },
  };
}

/** A library or user validator that threw or rejected: one root issue, never a throw. */
function validatorFailed(cause: unknown): ValidationResult<never> {
  return {
    ok: false,
    issues: [
      { path: [], message: `validator failed: ${(cause as Error)?.message ?? String(cause)}` },
    ],
  };
}

function compileLiteral(schema: JsonSchema, label: string): CompiledSchema {
  const check = compileJsonSchema(schema, label);
  return {
    form: 'literal',
    jsonSchema: schema,
    async validate(input) {
      const issues = check(input);
      return issues.length ? { ok: false, issues } : { ok: true, value: input };
    },
  };
}

/** Refuses what the eval-free subset leaves out: remote and dynamic references, other drafts, non-object roots. */
function assertSupportedSubset(schema: JsonSchema, label: string): void {
  if (schema.type !== 'object') {
    throw new ConfigError(`${label}: the root schema must have type "object"`);
  }
  const dialect = schema.$schema;
  if (dialect !== undefined && dialect !== DRAFT_2020_12 && dialect !== `${DRAFT_2020_12}#`) {
    throw new ConfigError(
      `${label}: only JSON Schema draft 2020-12 is supported, got ${String(dialect)}`,
    );
  }
  walk(schema, (node, path) => {
    if ('$dynamicRef' in node || '$dynamicAnchor' in node || '$recursiveRef' in node) {
      throw new ConfigError(`${label}: dynamic references are not supported (at ${path})`);
    }
    const ref = node.$ref;
    if (ref !== undefined && (typeof ref !== 'string' || !ref.startsWith('#'))) {
      throw new ConfigError(
        `${label}: only local $ref ("#...") is supported, got ${JSON.stringify(ref)} at ${path}`,
      );
    }
    if (path !== '#' && typeof node.$id === 'string') {
      throw new ConfigError(`${label}: nested $id is not supported (at ${path})`);
    }
  });
}

/** Keywords whose value is instance data, not a subschema: never inspected for `$ref` and co. */
const DATA_KEYWORDS: ReadonlySet<string> = new Set([
  'const',
  'enum',
  'default',
  'examples',
  'required',
  'dependentRequired',
]);
/** Keywords whose value maps user-chosen names (a property may be called `$ref`) to subschemas. */
const SCHEMA_MAP_KEYWORDS: ReadonlySet<string> = new Set([
  'properties',
  'patternProperties',
  '$defs',
  'definitions',
  'dependentSchemas',
]);

function walk(
  node: unknown,
  visit: (node: Record<string, unknown>, path: string) => void,
  path = '#',
): void {
  if (Array.isArray(node)) {
    node.forEach((item, i) => walk(item, visit, `${path}/${i}`));
    return;
  }
  if (!isPlainObject(node)) return;
  visit(node, path);
  for (const [key, value] of Object.entries(node)) {
    if (DATA_KEYWORDS.has(key)) continue;
    if (SCHEMA_MAP_KEYWORDS.has(key) && isPlainObject(value)) {
      for (const [name, sub] of Object.entries(value)) walk(sub, visit, `${path}/${key}/${name}`);
      continue;
    }
    walk(value, visit, `${path}/${key}`);
  }
}

function stripSchemaUri(schema: JsonSchema): JsonSchema {
  // ajv resolves $schema against its registered meta-schemas; the dialect was checked above.
  const { $schema: _dialect, ...rest } = schema;
  return rest;
}

function ajvIssue(e: ErrorObject): ValidationIssue {
  const path = e.instancePath
    .split('/')
    .slice(1)
    .map((seg) => seg.replace(/~1/g, '/').replace(/~0/g, '~'))
    .map((seg) => (/^\d+$/.test(seg) ? Number(seg) : seg));
  if (e.keyword === 'required')
    path.push(String((e.params as { missingProperty: string }).missingProperty));
  if (e.keyword === 'additionalProperties') {
    path.push(String((e.params as { additionalProperty: string }).additionalProperty));
  }
  return { path, message: e.message ?? e.keyword };
}

function standardIssue(issue: {
  readonly message: string;
  readonly path?: ReadonlyArray<PropertyKey | { readonly key: PropertyKey }> | undefined;
}): ValidationIssue {
  const path = (issue.path ?? []).map((seg) => {
    const key = typeof seg === 'object' && seg !== null ? seg.key : seg;
    return typeof key === 'number' ? key : String(key);
  });
  return { path, message: issue.message };
}

function isStandardSchema(spec: unknown): spec is StandardSchemaV1 {
  return (
    (typeof spec === 'object' || typeof spec === 'function') &&
    spec !== null &&
    typeof (spec as { '~standard'?: { validate?: unknown } })['~standard']?.validate === 'function'
  );
}

function isPair(spec: unknown): spec is JsonSchemaPair<unknown> {
  return (
    isPlainObject(spec) &&
    typeof spec.validate === 'function' &&
    isPlainObject(spec.jsonSchema) &&
    Object.keys(spec).every((k) => k === 'validate' || k === 'jsonSchema')
  );
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}
