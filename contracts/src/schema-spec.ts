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

/** Warnings from the compile being run (ajv compiles synchronously, so one slot is enough). */
let compileWarnings: string[] | null = null;

/**
 * The one ajv instance, made on the first compile: building it (and ajv-formats) costs ~70 ms,
 * which every process importing the contracts paid whether it compiled a schema or not.
 */
let instance: { ajv: Ajv2020; knownFormats: ReadonlySet<string> } | undefined;

function validatorCompiler(): { ajv: Ajv2020; knownFormats: ReadonlySet<string> } {
  if (instance) return instance;
  const ajv = new Ajv2020({
    // Strict mode refuses ordinary schemas that zod, Pydantic and MCP servers emit ("missing type"
    // for `properties` without `type`, union types, `if` without `then`, `format` or `enum` without
    // `type`). What it catches that is a real mistake — an unknown keyword, usually a typo such as
    // `maxlenght` that silently checks nothing — is logged, and the log becomes a warning in the
    // registration reply. A schema the meta-schema rejects (`type: "text"`, `minLength: -1`) is
    // still refused: `validateSchema`.
    strict: false,
    strictSchema: 'log',
    allowUnionTypes: true,
    // `required: ["constructor"]` must not be met by Object.prototype, nor `properties` apply to it.
    ownProperties: true,
    allErrors: true,
    validateSchema: true,
    logger: {
      log: () => undefined,
      warn: (...args: unknown[]) => compileWarnings?.push(args.map(String).join(' ')),
      error: () => undefined,
    },
    // Nothing is ever fetched: compile is synchronous and there is no `loadSchema`, so a `$ref` to a
    // document that is neither this schema (its `$id`, nested `$id`s, anchors) nor the bundled
    // draft 2020-12 meta-schema fails with ajv's MissingRefError, refused below as `config`.
    loadSchema: undefined,
    // The schema being compiled is registered under its `$id` so that its nested resources can refer
    // back to it by that URI; `compileFresh` removes it again, so each tool's schema stands alone
    // (two tools may use one `$id` for different schemas).
    addUsedSchema: true,
  });
  addFormats(ajv);
  // Formats checked by ajv-formats; any other `format` is an annotation (draft 2020-12's default).
  instance = { ajv, knownFormats: new Set(Object.keys(ajv.formats)) };
  return instance;
}

/** A compiled JSON Schema: checks an input, and carries the warnings found at compile time. */
export interface JsonSchemaValidator {
  (input: unknown): ValidationIssue[];
  /** What the schema does that is probably a mistake but is accepted (unknown keywords, formats). */
  readonly warnings: readonly string[];
}

/** Validators by schema digest: a contract's schema is compiled once per process. */
const compiled = new Map<string, JsonSchemaValidator>();
/** Bound on {@link compiled}: the least recently compiled or used schema is evicted first. */
const MAX_COMPILED = 4096;

/**
 * Checks a schema spec at definition time and returns its JSON Schema projection and validator.
 * Throws {@link ConfigError} for a library value without a JSON Schema projection, a schema outside
 * the supported draft 2020-12 subset (a non-object root, another dialect, a `$ref` to a document
 * that would have to be fetched, a schema the meta-schema rejects), or anything that is none of the
 * three forms.
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
 * Compiles a bare JSON Schema into a validator, enforcing the supported subset. Used for the
 * literal form and, server-side, for every registered contract (only JSON crosses the bus): the
 * registry at registration, the tool-executor before any executor sees a call's input. Compiled
 * once per distinct schema and cached; the validator never throws.
 */
export function compileJsonSchema(schema: JsonSchema, label = 'parameters'): JsonSchemaValidator {
  assertSupportedSubset(schema, label);
  const key = canonicalDigest(schema);
  const hit = compiled.get(key);
  if (hit) {
    compiled.delete(key);
    compiled.set(key, hit);
    return hit;
  }
  const validator = compileFresh(schema, label);
  compiled.set(key, validator);
  if (compiled.size > MAX_COMPILED) compiled.delete(compiled.keys().next().value as string);
  return validator;
}

function compileFresh(schema: JsonSchema, label: string): JsonSchemaValidator {
  const { ajv, knownFormats } = validatorCompiler();
  const warnings: string[] = [];
  for (const format of formatsOf(schema)) {
    if (knownFormats.has(format)) continue;
    warnings.push(`unknown format "${format}" is not checked`);
    // Draft 2020-12 makes `format` an annotation: an unknown one accepts everything.
    if (!ajv.formats[format]) ajv.addFormat(format, true);
  }
  const body = forAjv(stripSchemaUri(schema), true) as JsonSchema;
  // The schema's `$id` and nested `$id`s are recorded in the instance's shared reference table
  // while compiling; put it back afterwards, so no schema ever resolves a reference through another
  // tool's schema.
  const refs = { ...ajv.refs };
  compileWarnings = warnings;
  let validate: ValidateFunction;
  try {
    validate = ajv.compile(body);
  } catch (cause) {
    throw compileError(label, cause);
  } finally {
    compileWarnings = null;
    for (const id of Object.keys(ajv.refs)) if (!(id in refs)) delete ajv.refs[id];
    Object.assign(ajv.refs, refs);
    ajv.removeSchema(body);
  }
  const unique = [...new Set(warnings.map((w) => w.replace(/^strict mode: /, '')))];
  const check = (input: unknown): ValidationIssue[] => {
    try {
      return validate(input) ? [] : (validate.errors ?? []).map(ajvIssue);
    } catch (cause) {
      // A pathological input (nesting past the stack) is an issue, never a crash.
      return [
        { path: [], message: `validator failed: ${(cause as Error)?.message ?? String(cause)}` },
      ];
    }
  };
  return Object.assign(check, { warnings: Object.freeze(unique) });
}

/**
 * The schema as ajv is given it: the same meaning, in a shape ajv handles. A subschema that opens
 * a resource of its own (`$id`) and also has a `$ref` makes ajv 8 recurse without end when a
 * pointer resolves through it; `$ref` is an in-place applicator, so `allOf: [{ $ref }]` means the
 * same (the `$ref` still resolves against that `$id`). The contract and its hash keep the original.
 */
function forAjv(node: unknown, root = false): unknown {
  if (Array.isArray(node)) return node;
  if (!isPlainObject(node)) return node;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(node)) {
    if (SCHEMA_KEYWORDS.has(key)) out[key] = forAjv(value);
    else if (SCHEMA_LIST_KEYWORDS.has(key) && Array.isArray(value))
      out[key] = value.map((sub) => forAjv(sub));
    else if (SCHEMA_MAP_KEYWORDS.has(key) && isPlainObject(value))
      out[key] = Object.fromEntries(Object.entries(value).map(([k, sub]) => [k, forAjv(sub)]));
    else out[key] = value;
  }
  if (!root && typeof out.$id === 'string' && typeof out.$ref === 'string') {
    const { $ref, ...rest } = out;
    const allOf = Array.isArray(rest.allOf) ? rest.allOf : [];
    return { ...rest, allOf: [...allOf, { $ref }] };
  }
  return out;
}

function compileError(label: string, cause: unknown): ConfigError {
  const missing = (cause as { missingRef?: unknown }).missingRef;
  if (typeof missing === 'string') {
    return new ConfigError(
      `${label}: $ref ${JSON.stringify(missing)} names a document that is not part of the schema; only references inside the schema (its $id, nested $id, anchors) and the draft 2020-12 meta-schema resolve, nothing is fetched`,
      { cause, details: { ref: missing } },
    );
  }
  return new ConfigError(
    `${label}: schema is outside the supported draft 2020-12 subset: ${(cause as Error)?.message ?? String(cause)}`,
    { cause },
  );
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

/**
 * Refuses what a tool's parameters cannot be: a root that is not an object schema, another
 * dialect, a `$dynamicRef`. Other references are ajv's to resolve (see `compileError`).
 */
function assertSupportedSubset(schema: JsonSchema, label: string): void {
  if (schema.type !== 'object') {
    throw new ConfigError(`${label}: the root schema must have type "object"`);
  }
  const dialect = schema.$schema;
  if (dialect !== undefined && !isDraft202012(dialect)) {
    throw new ConfigError(
      `${label}: only JSON Schema draft 2020-12 is supported, got ${String(dialect)}`,
    );
  }
  eachSubschema(schema, (node, path) => {
    if (path !== '#' && node.$schema !== undefined && !isDraft202012(node.$schema)) {
      throw new ConfigError(
        `${label}: only JSON Schema draft 2020-12 is supported, got ${String(node.$schema)} at ${path}`,
        { details: { path } },
      );
    }
    // ajv 8 gets `$dynamicRef` wrong both ways (the official suite: valid instances refused,
    // invalid ones accepted), and a worker must be able to rely on what passed.
    if ('$dynamicRef' in node) {
      throw new ConfigError(`${label}: $dynamicRef is not supported (at ${path})`, {
        details: { path },
      });
    }
  });
}

function isDraft202012(dialect: unknown): boolean {
  return dialect === DRAFT_2020_12 || dialect === `${DRAFT_2020_12}#`;
}

/** Keywords whose value is one subschema. */
const SCHEMA_KEYWORDS: ReadonlySet<string> = new Set([
  'additionalProperties',
  'unevaluatedProperties',
  'items',
  'unevaluatedItems',
  'contains',
  'propertyNames',
  'if',
  'then',
  'else',
  'not',
  'contentSchema',
]);
/** Keywords whose value is an array of subschemas. */
const SCHEMA_LIST_KEYWORDS: ReadonlySet<string> = new Set([
  'allOf',
  'anyOf',
  'oneOf',
  'prefixItems',
]);
/** Keywords whose value maps user-chosen names (a property may be called `format`) to subschemas. */
const SCHEMA_MAP_KEYWORDS: ReadonlySet<string> = new Set([
  'properties',
  'patternProperties',
  '$defs',
  'definitions',
  'dependentSchemas',
]);

/** Calls `visit` on the schema and each of its subschemas, found by following subschema keywords. */
function eachSubschema(
  node: unknown,
  visit: (node: Record<string, unknown>, path: string) => void,
  path = '#',
): void {
  if (!isPlainObject(node)) return;
  visit(node, path);
  for (const [key, value] of Object.entries(node)) {
    if (SCHEMA_KEYWORDS.has(key)) eachSubschema(value, visit, `${path}/${key}`);
    else if (SCHEMA_LIST_KEYWORDS.has(key) && Array.isArray(value))
      value.forEach((sub, i) => eachSubschema(sub, visit, `${path}/${key}/${i}`));
    else if (SCHEMA_MAP_KEYWORDS.has(key) && isPlainObject(value))
      for (const [name, sub] of Object.entries(value))
        eachSubschema(sub, visit, `${path}/${key}/${name}`);
  }
}

/** The `format` values a schema uses. */
function formatsOf(schema: JsonSchema): Set<string> {
  const found = new Set<string>();
  eachSubschema(schema, (node) => {
    if (typeof node.format === 'string') found.add(node.format);
  });
  return found;
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
