import { z } from 'zod';
import { ContainerSpecSchema } from './container-spec';
import { mergeableJson } from './json-limits';
import { McpBindingSchema } from './mcp-upstream';
import { SubprocessCommandSchema } from './subprocess-command';

/** What the model calls; also the rule-matching key. */
export const TOOL_NAME_PATTERN = /^[a-zA-Z0-9_-]{1,64}$/;

export const ToolNameSchema = z.string().regex(TOOL_NAME_PATTERN, {
  message: 'tool names match ^[a-zA-Z0-9_-]{1,64}$',
});

/** Declarative risk class consumed by rules and presets. Policy input, never identity. */
export const RiskSchema = z.enum(['read', 'write', 'network', 'execute', 'destructive']);
export type Risk = z.infer<typeof RiskSchema>;

/** Where `execute` runs. */
export const ExecutorKindSchema = z.enum([
  'inprocess',
  'subprocess',
  'remote',
  'script',
  'container',
  'mcp',
]);
export type ExecutorKind = z.infer<typeof ExecutorKindSchema>;

/**
 * A JSON Schema object (checked for the supported subset by `compileJsonSchema`). Nested at most
 * `MAX_JSON_DEPTH` levels; no key may be `__proto__`, `constructor` or `prototype` (a validator
 * reading a property of that name off the call's input would find the prototype's).
 */
export const JsonSchemaObjectSchema = mergeableJson(z.record(z.string(), z.unknown()));

/**
 * A tool's identity: the tuple (name, description, canonical parameters schema, version).
 * Changing any of them changes the contract hash, so old journals are never replayed against it.
 */
export const ToolContractSchema = z.strictObject({
  name: ToolNameSchema,
  description: z.string().min(1).max(4096),
  parameters: JsonSchemaObjectSchema,
  /** Opaque marker with no ordering; absent stays absent (no default is synthesised). */
  version: z.string().min(1).max(128).optional(),
});
export type ToolContract = z.infer<typeof ToolContractSchema>;

/** Policy fields: they steer dispatch and rules but never enter the contract hash. */
export const ToolPolicySchema = z.strictObject({
  risk: RiskSchema.optional(),
  needsApproval: z.boolean().default(false),
  executor: ExecutorKindSchema.default('inprocess'),
  /** Taint clearance for egress tools (public < internal < private). */
  clearance: z.enum(['public', 'internal', 'private']).optional(),
  /** Per-call deadline in milliseconds. */
  timeoutMs: z.number().int().positive().max(3_600_000).optional(),
  /**
   * How a `subprocess` or `container` tool runs (required for those executors, refused for the
   * others).
   */
  command: SubprocessCommandSchema.optional(),
  /** The image of a `container` tool (required for that executor, refused for the others). */
  container: ContainerSpecSchema.optional(),
  /**
   * The upstream MCP tool an `mcp` tool calls, and the digest of the definition an admin approved
   * (required for that executor, refused for the others). See `mcp-upstream.ts`.
   */
  mcp: McpBindingSchema.optional(),
});
export type ToolPolicy = z.infer<typeof ToolPolicySchema>;
export type ToolPolicyInput = z.input<typeof ToolPolicySchema>;

/** A contract with its policy, as registered with the gateway. */
export const RegisteredToolSchema = ToolContractSchema.extend({ policy: ToolPolicySchema });
export type RegisteredTool = z.infer<typeof RegisteredToolSchema>;
