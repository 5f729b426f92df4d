import { z } from 'zod';

type AnySchema = z.core.$ZodType;
type Def = z.core.$ZodTypeDef & Record<string, unknown>;

/** The definition keys that hold child schemas, per schema kind. */
const CHILD_KEYS: Readonly<Record<string, readonly string[]>> = {
  optional: ['innerType'],
  nullable: ['innerType'],
  default: ['innerType'],
  prefault: ['innerType'],
  nonoptional: ['innerType'],
  readonly: ['innerType'],
  catch: ['innerType'],
  array: ['element'],
  record: ['keyType', 'valueType'],
  map: ['keyType', 'valueType'],
  set: ['valueType'],
  intersection: ['left', 'right'],
  pipe: ['in', 'out'],
};

/**
 * The reader twin of a strict writer schema: the same schema, with every object in it — however
 * deeply nested, inside unions, arrays, optionals and defaults — dropping keys it does not know
 * instead of refusing them. Everything else (types, formats, enums, defaults, refinements) is
 * kept, and the parsed value has exactly the writer's type.
 *
 * Why: a publisher validates strictly what it writes (a typo is a bug to catch before it is
 * journaled), but a consumer must read what a newer publisher writes during a rolling upgrade —
 * an event with one more optional field must not be dead-lettered by the replicas still on the
 * previous version. Unknown keys are stripped, not kept: a consumer that builds its own events
 * from the ones it read (the evaluator copies `requested.tool` into `decided`) must not carry
 * fields its own strict writer refuses.
 *
 * Derived from the writer, never written twice, so the two cannot drift.
 */
export function tolerantReader<T extends AnySchema>(schema: T): z.ZodType<z.output<T>, z.input<T>> {
  return tolerate(schema) as unknown as z.ZodType<z.output<T>, z.input<T>>;
}

function tolerate(schema: AnySchema): AnySchema {
  const def = schema._zod.def as Def;
  switch (def.type) {
    case 'object': {
      const shape = def.shape as Record<string, AnySchema>;
      const tolerant: Record<string, AnySchema> = {};
      for (const [key, child] of Object.entries(shape)) tolerant[key] = tolerate(child);
      // A strict object's catchall is `never`; without one, zod strips unknown keys.
      const catchall = def.catchall as AnySchema | undefined;
      const keep = catchall && catchall._zod.def.type !== 'never' ? tolerate(catchall) : undefined;
      return clone(schema, { ...def, shape: tolerant, catchall: keep });
    }
    case 'union':
      return clone(schema, { ...def, options: (def.options as AnySchema[]).map(tolerate) });
    case 'tuple':
      return clone(schema, {
        ...def,
        items: (def.items as AnySchema[]).map(tolerate),
        rest: def.rest ? tolerate(def.rest as AnySchema) : def.rest,
      });
    case 'lazy':
      // A lazy schema resolves itself on first use; tolerating it would need its own getter.
      throw new Error('tolerantReader does not support z.lazy');
    default: {
      const keys = CHILD_KEYS[def.type];
      if (!keys) return schema; // a leaf: string, number, enum, literal, unknown, ...
      const next: Def = { ...def };
      for (const key of keys) next[key] = tolerate(def[key] as AnySchema);
      return clone(schema, next);
    }
  }
}

function clone(schema: AnySchema, def: Def): AnySchema {
  return (schema as unknown as { clone(def: Def): AnySchema }).clone(def);
}
