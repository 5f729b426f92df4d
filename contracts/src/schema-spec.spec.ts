import fc from 'fast-check';
import { z } from 'zod';
import { configError } from '../test/support/config-error';
import type { ValidationIssue } from './errors';
import {
  compileJsonSchema,
  compileSchema,
  type CompiledSchema,
  type JsonSchema,
  type StandardSchemaV1,
  type ValidationResult,
} from './schema-spec';

function issuesOf<T>(result: ValidationResult<T>): ValidationIssue[] {
  if (result.ok) throw new Error(`expected issues, got the value ${JSON.stringify(result.value)}`);
  return result.issues;
}

function valueOf<T>(result: ValidationResult<T>): T {
  if (!result.ok) throw new Error(`expected a value, got ${JSON.stringify(result.issues)}`);
  return result.value;
}

/** A well-formed validation result: a value, or a non-empty list of (path, message) issues. */
function expectWellFormed(result: ValidationResult<unknown>): void {
  if (result.ok) return;
  expect(result.issues.length).toBeGreaterThan(0);
  for (const issue of result.issues) {
    expect(Array.isArray(issue.path)).toBe(true);
    for (const seg of issue.path) expect(['string', 'number']).toContain(typeof seg);
    expect(typeof issue.message).toBe('string');
    expect(issue.message.length).toBeGreaterThan(0);
  }
}

const searchZod = z.object({
  query: z.string(),
  limit: z.number().int().min(1).max(50).default(10),
  tags: z.array(z.string()).optional(),
});

const searchJson: JsonSchema = {
  type: 'object',
  properties: {
    query: { type: 'string', minLength: 1 },
    limit: { type: 'integer', minimum: 1, maximum: 50 },
    tags: { type: 'array', items: { type: 'string' } },
  },
  required: ['query'],
  additionalProperties: false,
};

interface Search {
  query: string;
  limit?: number;
}
const isSearch = (v: unknown): v is Search =>
  typeof v === 'object' &&
  v !== null &&
  typeof (v as { query?: unknown }).query === 'string' &&
  (v as { query: string }).query.length > 0;

/** A hand-made Standard Schema value whose validate always accepts; `extra` completes `~standard`. */
function handmade(extra: Record<string, unknown> = {}): StandardSchemaV1 {
  return {
    '~standard': {
      version: 1,
      vendor: 'handmade',
      validate: (value: unknown) => ({ value }),
      ...extra,
    },
  } as StandardSchemaV1;
}

describe('compileSchema: form 1, a Standard Schema with a JSON Schema projection (zod 4)', () => {
  const compiled = compileSchema(searchZod);

  it('derives a draft 2020-12 object schema from the library', () => {
    expect(compiled.form).toBe('standard');
    expect(compiled.jsonSchema).toMatchObject({
      type: 'object',
      properties: { query: { type: 'string' }, limit: { type: 'integer', default: 10 } },
      required: ['query'],
    });
  });

  it('validates through the library and returns its output value, defaults applied', async () => {
    const value = valueOf(await compiled.validate({ query: 'flaky test' }));
    expect(value).toEqual({ query: 'flaky test', limit: 10 });
    // The inferred input type is the schema's output type.
    const typed: { query: string; limit: number; tags?: string[] | undefined } = value;
    expect(typed.limit).toBe(10);
  });

  it('returns the library issues with their paths', async () => {
    const issues = issuesOf(await compiled.validate({ query: 3, limit: 99, tags: ['a', 7] }));
    expect(issues.map((i) => i.path)).toEqual(
      expect.arrayContaining([['query'], ['limit'], ['tags', 1]]),
    );
    for (const issue of issues) expect(issue.message).not.toBe('');
  });

  it('turns a throwing or rejecting library validator into an issue', async () => {
    const throwing = compileSchema(
      z.object({ a: z.string() }).refine(() => {
        throw new Error('refinement exploded');
      }),
    );
    const result = await throwing.validate({ a: 'x' });
    expect(issuesOf(result)[0]!.message).toContain('refinement exploded');

    const rejecting = compileSchema(
      handmade({
        jsonSchema: { input: () => ({ type: 'object' }) },
        validate: () => Promise.reject(new Error('async boom')),
      }),
    );
    expect(issuesOf(await rejecting.validate({}))).toEqual([
      { path: [], message: 'validator failed: async boom' },
    ]);
  });

  it('maps Standard Schema path segments given as { key } objects', async () => {
    const spec = handmade({
      jsonSchema: { input: () => ({ type: 'object' }) },
      validate: () => ({ issues: [{ message: 'bad', path: [{ key: 'a' }, 0, { key: 2 }] }] }),
    });
    expect(issuesOf(await compileSchema(spec).validate({}))).toEqual([
      { path: ['a', 0, 2], message: 'bad' },
    ]);
  });

  it('refuses a Standard Schema without a JSON Schema projection, naming the vendor', () => {
    const err = configError(() => compileSchema(handmade(), 'tool x parameters'));
    expect(err.message).toContain('tool x parameters');
    expect(err.message).toContain('handmade');
    expect(err.details).toEqual({ vendor: 'handmade' });
  });

  it('refuses a projection that throws, and a projection outside the subset', () => {
    configError(() =>
      compileSchema(
        handmade({
          jsonSchema: {
            input: () => {
              throw new Error('cannot represent transforms');
            },
          },
        }),
      ),
    );
    // A non-object root is outside the subset wherever the schema comes from.
    configError(() => compileSchema(z.string()));
    configError(() => compileSchema(z.array(z.number())));
  });
});

describe('compileSchema: form 2, a { jsonSchema, validate } pair', () => {
  it('with a type guard: accepts what the guard accepts and returns the input', async () => {
    const compiled = compileSchema({ jsonSchema: searchJson, validate: isSearch });
    expect(compiled.form).toBe('pair');
    expect(compiled.jsonSchema).toBe(searchJson);
    const value = valueOf(await compiled.validate({ query: 'x' }));
    const typed: Search = value;
    expect(typed).toEqual({ query: 'x' });
  });

  it('with a type guard: explains a rejection with the JSON Schema issues when there are any', async () => {
    const compiled = compileSchema({ jsonSchema: searchJson, validate: isSearch });
    const issues = issuesOf(await compiled.validate({ limit: 0, other: true }));
    expect(issues.map((i) => i.path)).toEqual(
      expect.arrayContaining([['query'], ['limit'], ['other']]),
    );
  });

  it('with a type guard: still reports an issue when only the guard objects', async () => {
    const compiled = compileSchema({
      jsonSchema: { type: 'object' },
      validate: (v: unknown): v is { ok: true } => (v as { ok?: unknown }).ok === true,
    });
    expect(issuesOf(await compiled.validate({ ok: false }))).toEqual([
      { path: [], message: 'rejected by the validate function' },
    ]);
  });

  it('with a validator returning issues: passes them through, and [] means valid', async () => {
    const compiled = compileSchema({
      jsonSchema: searchJson,
      validate: (v: unknown): ValidationIssue[] =>
        (v as { query?: unknown }).query === 'forbidden'
          ? [{ path: ['query'], message: 'that query is not allowed' }]
          : [],
    });
    expect(issuesOf(await compiled.validate({ query: 'forbidden' }))).toEqual([
      { path: ['query'], message: 'that query is not allowed' },
    ]);
    expect(valueOf(await compiled.validate({ query: 'fine' }))).toEqual({ query: 'fine' });
  });

  it('turns a throwing validator into an issue, whatever it throws', async () => {
    for (const thrown of [new Error('kaboom'), 'a string', null, 42]) {
      const compiled = compileSchema({
        jsonSchema: { type: 'object' },
        validate: (): boolean => {
          throw thrown;
        },
      });
      const [issue] = issuesOf(await compiled.validate({}));
      expect(issue!.path).toEqual([]);
      expect(issue!.message).toContain(thrown instanceof Error ? 'kaboom' : String(thrown));
    }
  });

  it('refuses a pair whose JSON Schema is outside the subset, at definition time', () => {
    configError(() =>
      compileSchema({
        jsonSchema: { type: 'object', properties: { a: { type: 'text' } } },
        validate: () => true,
      }),
    );
    configError(() => compileSchema({ jsonSchema: { type: 'string' }, validate: () => true }));
  });
});

describe('compileSchema: form 3, a bare JSON Schema literal', () => {
  const compiled = compileSchema(searchJson);

  it('is validated by the draft 2020-12 validator', async () => {
    expect(compiled.form).toBe('literal');
    expect(compiled.jsonSchema).toBe(searchJson);
    expect(valueOf(await compiled.validate({ query: 'a', tags: ['x'] }))).toEqual({
      query: 'a',
      tags: ['x'],
    });
  });

  it('returns every issue with a JSON path and a message', async () => {
    const issues = issuesOf(
      await compiled.validate({ query: '', limit: 1.5, tags: ['ok', 3], extra: 1 }),
    );
    const paths = issues.map((i) => i.path);
    expect(paths).toEqual(expect.arrayContaining([['query'], ['limit'], ['tags', 1], ['extra']]));
    expect(issuesOf(await compiled.validate({}))).toEqual([
      { path: ['query'], message: "must have required property 'query'" },
    ]);
    expect(issuesOf(await compiled.validate('not an object'))).toEqual([
      { path: [], message: 'must be object' },
    ]);
  });

  it('unescapes JSON pointer segments in issue paths', async () => {
    const c = compileSchema({
      type: 'object',
      properties: { 'a/b~c': { type: 'string' } },
    });
    expect(issuesOf(await c.validate({ 'a/b~c': 1 }))[0]!.path).toEqual(['a/b~c']);
  });

  it('accepts local $ref, $defs, formats and the 2020-12 $schema (with or without #)', async () => {
    for (const dialect of [
      'https://json-schema.org/draft/2020-12/schema',
      'https://json-schema.org/draft/2020-12/schema#',
    ]) {
      const c = compileSchema({
        $schema: dialect,
        type: 'object',
        $defs: { email: { type: 'string', format: 'email' } },
        properties: { to: { $ref: '#/$defs/email' }, cc: { type: ['string', 'null'] } },
      });
      expect((await c.validate({ to: 'a@example.com', cc: null })).ok).toBe(true);
      expect(issuesOf(await c.validate({ to: 'nope' }))[0]!.path).toEqual(['to']);
    }
  });

  it('accepts properties whose names are JSON Schema keywords such as $ref and $id', async () => {
    const c = compileSchema({
      type: 'object',
      properties: { $ref: { type: 'string' }, $id: { type: 'integer' } },
      required: ['$ref'],
    });
    expect((await c.validate({ $ref: '#/x', $id: 1 })).ok).toBe(true);
    expect(issuesOf(await c.validate({ $id: 1 }))[0]!.path).toEqual(['$ref']);
  });

  it('compiles two different schemas that share a root $id independently', async () => {
    const a = compileSchema({ $id: 'https://tools.example/args', type: 'object', required: [] });
    const b = compileSchema({
      $id: 'https://tools.example/args',
      type: 'object',
      properties: { n: { type: 'integer' } },
      required: ['n'],
    });
    expect((await a.validate({})).ok).toBe(true);
    expect((await b.validate({})).ok).toBe(false);
  });

  it.each<[string, unknown]>([
    [
      'a remote $ref',
      { type: 'object', properties: { a: { $ref: 'https://evil.example/s.json' } } },
    ],
    [
      'a relative $ref to another document',
      { type: 'object', properties: { a: { $ref: 'other.json#/x' } } },
    ],
    ['a $ref that is not a string', { type: 'object', properties: { a: { $ref: 1 } } }],
    [
      'a $dynamicRef',
      {
        type: 'object',
        $defs: { n: { $dynamicAnchor: 'n' } },
        properties: { a: { $dynamicRef: '#n' } },
      },
    ],
    [
      'a $ref to an $id that is not in the document',
      {
        type: 'object',
        properties: {
          a: { $id: 'https://x.example/a', $ref: 'b' },
        },
      },
    ],
    ['a $ref to a URN the document does not define', { type: 'object', $ref: 'urn:uuid:1234' }],
    [
      'a $ref to the draft-07 meta-schema',
      { type: 'object', $ref: 'http://json-schema.org/draft-07/schema#' },
    ],
    [
      'a nested $schema of another dialect',
      {
        type: 'object',
        properties: {
          a: { $id: 'https://x.example/a', $schema: 'http://json-schema.org/draft-07/schema#' },
        },
      },
    ],
    ['an empty enum', { type: 'object', properties: { a: { enum: [] } } }],
    ['a negative minLength', { type: 'object', properties: { a: { minLength: -1 } } }],
    ['an invalid type name', { type: 'object', properties: { a: { type: 'text' } } }],
    ['a non-object root type', { type: 'string' }],
    ['a root without a type', { properties: { a: { type: 'string' } } }],
    ['a root typed as object or null', { type: ['object', 'null'] }],
    ['draft-07', { $schema: 'http://json-schema.org/draft-07/schema#', type: 'object' }],
    ['draft 2019-09', { $schema: 'https://json-schema.org/draft/2019-09/schema', type: 'object' }],
    ['a $schema that is not a string', { $schema: 7, type: 'object' }],
  ])('refuses %s at definition time with a ConfigError', (_what, schema) => {
    const err = configError(() => compileSchema(schema as JsonSchema, 'tool t parameters'));
    expect(err.message).toContain('tool t parameters');
    // The server-side entry point (registered contracts) refuses the same schemas.
    configError(() => compileJsonSchema(schema as JsonSchema));
  });

  it.each<[string, unknown]>([
    ['null', null],
    ['an array', [{ type: 'object' }]],
    ['a string', 'object'],
    ['a number', 1],
    ['a class instance', new Map()],
    [
      'a pair with an unexpected extra key',
      { jsonSchema: { type: 'object' }, validate: () => true, x: 1 },
    ],
  ])('refuses %s, which is none of the three forms', (_what, spec) => {
    configError(() => compileSchema(spec as JsonSchema));
  });
});

describe('compileJsonSchema: the schemas teams bring are accepted', () => {
  it.each<[string, JsonSchema, unknown, unknown]>([
    [
      'a property without a type (strict mode said "missing type")',
      { type: 'object', properties: { name: { maxLength: 5 } } },
      { name: 'abc' },
      { name: 'abcdefg' },
    ],
    [
      'format and enum without type',
      {
        type: 'object',
        properties: { at: { format: 'date-time' }, mode: { enum: ['a', 'b', 1] } },
      },
      { at: '2024-01-01T00:00:00Z', mode: 1 },
      { at: 'yesterday', mode: 'c' },
    ],
    [
      'a union type',
      { type: 'object', properties: { id: { type: ['string', 'integer'] } } },
      { id: 3 },
      { id: 1.5 },
    ],
    [
      'if without then',
      {
        type: 'object',
        properties: { n: { if: { minimum: 0 }, else: { multipleOf: 2 } } },
      },
      { n: -4 },
      { n: -3 },
    ],
    [
      "a $ref to the document's own $id",
      {
        $id: 'https://tools.example/args',
        type: 'object',
        properties: { child: { $ref: 'https://tools.example/args' }, n: { type: 'integer' } },
      },
      { child: { n: 1 } },
      { child: { n: 'x' } },
    ],
    [
      'a URN $id and a $ref through it',
      {
        $id: 'urn:uuid:6c1b1c8e-7d0f-4d3f-9a51-b6f1d4a0e9c2',
        type: 'object',
        $defs: { id: { type: 'string', minLength: 3 } },
        properties: { id: { $ref: 'urn:uuid:6c1b1c8e-7d0f-4d3f-9a51-b6f1d4a0e9c2#/$defs/id' } },
      },
      { id: 'abc' },
      { id: 'a' },
    ],
    [
      'a nested $id resolved relative to the root, with an $anchor',
      {
        $id: 'https://tools.example/root.json',
        type: 'object',
        $defs: { item: { $id: 'item.json', $anchor: 'it', type: 'integer' } },
        properties: { a: { $ref: 'item.json' }, b: { $ref: 'item.json#it' } },
      },
      { a: 1, b: 2 },
      { a: 1, b: 'x' },
    ],
    [
      'a nested $id whose only keyword is a $ref',
      {
        type: 'object',
        properties: {
          v: {
            $id: 'urn:example:v',
            $ref: '#/$defs/c',
            $defs: { c: { $ref: '#/$defs/d' }, d: { type: 'integer' } },
          },
        },
      },
      { v: 1 },
      { v: 'x' },
    ],
    [
      'a $ref to the bundled draft 2020-12 meta-schema',
      {
        type: 'object',
        properties: { schema: { $ref: 'https://json-schema.org/draft/2020-12/schema' } },
      },
      { schema: { type: 'string' } },
      { schema: { type: 'text' } },
    ],
    [
      'a $dynamicAnchor (a plain anchor unless a $dynamicRef uses it)',
      {
        type: 'object',
        $defs: { s: { $dynamicAnchor: 's', type: 'string' } },
        properties: { a: { $ref: '#s' } },
      },
      { a: 'x' },
      { a: 1 },
    ],
  ])('accepts %s and validates with it', (_what, schema, good, bad) => {
    const check = compileJsonSchema(schema);
    expect(check(good)).toEqual([]);
    expect(check(bad).length).toBeGreaterThan(0);
  });

  it('accepts an unknown keyword or format with a warning, and checks what it knows', () => {
    const check = compileJsonSchema({
      type: 'object',
      properties: {
        name: { type: 'string', maxlenght: 3 },
        secret: { type: 'string', format: 'phone-number' },
      },
      required: ['name'],
    });
    expect(check.warnings).toEqual([
      'unknown format "phone-number" is not checked',
      'unknown keyword: "maxlenght"',
    ]);
    expect(check({ name: 'abcdef', secret: 'anything' })).toEqual([]);
    expect(check({ secret: 'x' })).toEqual([{ path: ['name'], message: expect.any(String) }]);
    // The same schema again (another object, other key order): compiled once, same warnings.
    const again = compileJsonSchema({
      required: ['name'],
      properties: {
        secret: { format: 'phone-number', type: 'string' },
        name: { maxlenght: 3, type: 'string' },
      },
      type: 'object',
    });
    expect(again).toBe(check);
  });

  it('has no warnings for a clean schema', () => {
    expect(compileJsonSchema(searchJson).warnings).toEqual([]);
  });

  it('does not let Object.prototype meet `required` or `properties`', () => {
    const check = compileJsonSchema({
      type: 'object',
      properties: { constructor: { type: 'number' } },
      required: ['toString'],
    });
    expect(check({}).map((i) => i.path)).toEqual([['toString']]);
    expect(check({ toString: 1 })).toEqual([]);
  });

  it("never resolves a reference through another tool's schema", () => {
    compileJsonSchema({
      type: 'object',
      properties: { a: { $id: 'https://shared.example/item', type: 'integer' } },
    });
    const err = configError(() =>
      compileJsonSchema({
        type: 'object',
        properties: { b: { $ref: 'https://shared.example/item' } },
      }),
    );
    expect(err.details).toEqual({ ref: 'https://shared.example/item' });
  });

  it('refuses a remote $ref with config, naming the reference, and fetches nothing', () => {
    const err = configError(() =>
      compileJsonSchema(
        { type: 'object', properties: { a: { $ref: 'https://evil.example/s.json#/x' } } },
        'tool t parameters',
      ),
    );
    expect(err.message).toContain('tool t parameters');
    expect(err.message).toContain('https://evil.example/s.json');
    expect(err.details).toEqual({ ref: 'https://evil.example/s.json#/x' });
  });

  it('turns an input nested past the stack into an issue, not a throw', () => {
    const check = compileJsonSchema({
      type: 'object',
      $defs: { t: { type: 'object', properties: { c: { $ref: '#/$defs/t' } } } },
      properties: { c: { $ref: '#/$defs/t' } },
    });
    let deep: Record<string, unknown> = {};
    const root = deep;
    for (let i = 0; i < 200_000; i++) deep = (deep.c = {}) as Record<string, unknown>;
    const issues = check(root);
    expect(issues).toHaveLength(1);
    expect(issues[0]!.message).toMatch(/^validator failed/);
  });
});

describe('validation never throws', () => {
  const specs: [string, CompiledSchema][] = [
    ['standard', compileSchema(searchZod)],
    ['pair with a guard', compileSchema({ jsonSchema: searchJson, validate: isSearch })],
    [
      'pair with issues',
      compileSchema({
        jsonSchema: searchJson,
        validate: (v: unknown) => (isSearch(v) ? [] : [{ path: [], message: 'no' }]),
      }),
    ],
    ['literal', compileSchema(searchJson)],
  ];

  it.each(specs)('%s: any input yields a value or well-formed issues', async (_form, compiled) => {
    await fc.assert(
      fc.asyncProperty(
        fc.anything({ withBigInt: true, withMap: true, withDate: true }),
        async (input) => {
          expectWellFormed(await compiled.validate(input));
        },
      ),
    );
    for (const odd of [undefined, null, Symbol('s'), () => 1, 10n, NaN]) {
      expectWellFormed(await compiled.validate(odd));
      expect((await compiled.validate(odd)).ok).toBe(false);
    }
  });
});
