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
      compileSchema({ jsonSchema: { type: 'object', foo: 1 }, validate: () => true }),
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
    ['a $dynamicAnchor', { type: 'object', $dynamicAnchor: 'meta' }],
    ['a $recursiveRef', { type: 'object', properties: { a: { $recursiveRef: '#' } } }],
    [
      'a nested $id',
      { type: 'object', properties: { a: { $id: 'https://x.example/a', type: 'string' } } },
    ],
    [
      'an unknown keyword (ajv strict)',
      { type: 'object', properties: { a: { type: 'string', colour: 'red' } } },
    ],
    ['an unknown keyword at the root', { type: 'object', foo: 1 }],
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
