import {
  compileSchema,
  ConfigError,
  contractHash,
  ToolContractSchema,
  ToolPolicySchema,
  type CompiledSchema,
  type ExecutorKind,
  type Out,
  type Risk,
  type SchemaSpec,
  type Taint,
  type ToolContext,
  type ToolContract,
  type ToolPolicy,
} from '@toolgate/contracts';

/** What a tool author writes. Type inference flows from `parameters` into `execute`. */
export interface ToolDefinition<S extends SchemaSpec, R> {
  name: string;
  description: string;
  parameters: S;
  version?: string;
  risk?: Risk;
  needsApproval?: boolean;
  executor?: ExecutorKind;
  clearance?: Taint;
  timeoutMs?: number;
  execute(input: Out<S>, ctx: ToolContext): Promise<R> | R;
}

/** A checked tool: its contract (identity), policy (not identity) and implementation. */
export interface ToolDef<I = unknown, R = unknown> {
  readonly contract: ToolContract;
  readonly policy: ToolPolicy;
  /** sha256 of the contract's identity tuple. */
  readonly contractHash: string;
  readonly schema: CompiledSchema<I>;
  /**
   * Method syntax on purpose: it makes `ToolDef<I, R>` assignable to `ToolDef` (parameters are
   * checked bivariantly), so a typed tool can sit in a registry or go through `runTool`. Inputs
   * reach it only after `schema.validate`, which is what makes that sound.
   */
  execute(input: I, ctx: ToolContext): Promise<R> | R;
}

/**
 * Builds a {@link ToolDef}. Every definition-time problem is a {@link ConfigError} thrown here,
 * never at first call: an illegal name, a schema library without a JSON Schema projection, a
 * schema outside the supported subset, a bad policy field.
 */
export function tool<S extends SchemaSpec, R>(def: ToolDefinition<S, R>): ToolDef<Out<S>, R> {
  if (typeof def !== 'object' || def === null)
    throw new ConfigError('tool(): expected a definition object');
  // Named in messages before the name is validated: whatever a JavaScript caller passed.
  const name = typeof def.name === 'string' ? def.name : `(a name of type ${typeof def.name})`;
  if (typeof def.execute !== 'function') {
    throw new ConfigError(`tool ${name}: execute must be a function`);
  }
  const schema = compileSchema(def.parameters, `tool ${name} parameters`);
  const contract = parseOrConfigError(
    ToolContractSchema,
    {
      name: def.name,
      description: def.description,
      parameters: schema.jsonSchema,
      ...(def.version === undefined ? {} : { version: def.version }),
    },
    `tool ${name}`,
  );
  const policy = parseOrConfigError(
    ToolPolicySchema,
    {
      risk: def.risk,
      needsApproval: def.needsApproval,
      executor: def.executor,
      clearance: def.clearance,
      timeoutMs: def.timeoutMs,
    },
    `tool ${contract.name} policy`,
  );
  return Object.freeze({
    contract,
    policy,
    contractHash: contractHash(contract),
    schema,
    execute: def.execute,
  });
}

function parseOrConfigError<T>(
  schema: {
    safeParse(
      v: unknown,
    ):
      | { success: true; data: T }
      | { success: false; error: { issues: { path: PropertyKey[]; message: string }[] } };
  },
  value: unknown,
  label: string,
): T {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const issues = parsed.error.issues.map((i) => ({ path: i.path.map(String), message: i.message }));
  throw new ConfigError(
    `${label}: ${issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ')}`,
    { details: { issues } },
  );
}
