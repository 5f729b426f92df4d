import { RiskSchema, TaintSchema, ToolNameSchema } from '@toolgate/contracts';
import { z } from 'zod';

/**
 * The serialisable half of a permission policy. The gateway stores a {@link PolicyDocument} as
 * JSON; the permission evaluator parses and compiles it. Closures (hooks, canUseTool) are added
 * in code and never appear here.
 */

/** A declared risk class, or `'undeclared'` for tools without one. */
export const RiskClassSchema = z.enum([
  'read',
  'write',
  'network',
  'execute',
  'destructive',
  'undeclared',
]);
export type RiskClass = z.infer<typeof RiskClassSchema>;

export const PresetNameSchema = z.enum(['strict', 'standard', 'open']);
export type PresetName = z.infer<typeof PresetNameSchema>;

export const OnTimeoutSchema = z.enum(['allow', 'deny']);
export type OnTimeout = z.infer<typeof OnTimeoutSchema>;

const DAY_MS = 86_400_000;
/** The default approval window when neither the rule nor the layer sets one: 24 hours. */
export const DEFAULT_APPROVAL_TIMEOUT_MS = DAY_MS;
/** The default hook and canUseTool deadline. */
export const DEFAULT_HOOK_TIMEOUT_MS = 5_000;

const ApprovalTimeoutMsSchema = z
  .number()
  .int()
  .positive()
  .max(30 * DAY_MS);
const HookTimeoutMsSchema = z.number().int().positive().max(600_000);

const oneOrMany = <T extends z.ZodType>(item: T) => z.union([item, z.array(item).min(1).max(256)]);

/**
 * A declarative deny or ask rule. Every criterion given must match (they are ANDed); at least one
 * is required. Rules never allow.
 */
export const PermissionRuleSchema = z
  .strictObject({
    /** A stable name for audit; defaults to the rule's position. */
    id: z.string().min(1).max(128).optional(),
    /** Tool name(s). */
    tool: oneOrMany(ToolNameSchema).optional(),
    /** Risk class(es); `'undeclared'` matches tools without declared risk. */
    risk: oneOrMany(RiskClassSchema).optional(),
    /** Shell argv pattern(s) (`'rm **'`); the rule then applies to the `shell` tool only. */
    argv: oneOrMany(z.string().min(1).max(4_096)).optional(),
    /**
     * Host patterns (`example.com`, `*.example.com`, `*`). Enforced for the `http_fetch` tool only;
     * for every other tool a match is advisory (reported, never decisive).
     */
    domains: z.array(z.string().min(1).max(253)).min(1).max(1_024).optional(),
    /** The policy reason shown to the model on deny, or to the approver on ask. */
    reason: z.string().min(1).max(1_024).optional(),
    /** For ask: how long the approval stays open. */
    approvalTimeoutMs: ApprovalTimeoutMsSchema.optional(),
    /** For ask: the decision applied when nobody resolves it in time. */
    onTimeout: OnTimeoutSchema.optional(),
  })
  .refine(
    (r) =>
      r.tool !== undefined ||
      r.risk !== undefined ||
      r.argv !== undefined ||
      r.domains !== undefined,
    {
      message: 'a rule needs at least one of tool, risk, argv, domains',
    },
  );
export type PermissionRule = z.input<typeof PermissionRuleSchema>;

/** A CEL expression over `{ tool, risk, input, agent, taint, target }` that denies or asks when true. */
export const ExpressionRuleSchema = z.strictObject({
  id: z.string().min(1).max(128).optional(),
  /** CEL; must evaluate to a boolean. An error or a non-boolean asks and is reported. */
  when: z.string().min(1).max(8_192),
  effect: z.enum(['deny', 'ask']),
  reason: z.string().min(1).max(1_024).optional(),
  approvalTimeoutMs: ApprovalTimeoutMsSchema.optional(),
  onTimeout: OnTimeoutSchema.optional(),
});
export type ExpressionRule = z.input<typeof ExpressionRuleSchema>;

/** A static taint-gate exception: `tool` may send data up to `taint` to `target` (any target if omitted). */
export const TaintAllowEntrySchema = z.strictObject({
  tool: ToolNameSchema,
  /** Exact target, or a host pattern (`*.corp.example`) for the fetch tool. */
  target: z.string().min(1).max(1_024).optional(),
  /** The highest taint level this entry lets through. */
  taint: TaintSchema,
});
export type TaintAllowEntry = z.input<typeof TaintAllowEntrySchema>;

/** A CEL exception to the taint gate: true lets the call past the gate (and only the gate). */
export const TaintExceptionSchema = z.strictObject({
  id: z.string().min(1).max(128).optional(),
  when: z.string().min(1).max(8_192),
});
export type TaintException = z.input<typeof TaintExceptionSchema>;

export const TaintPolicySchema = z.strictObject({
  /** Extra egress tools besides those with risk `'network'` and the fetch tool. */
  egressTools: z.array(ToolNameSchema).max(1_024).optional(),
  allowlist: z.array(TaintAllowEntrySchema).max(4_096).optional(),
  exceptions: z.array(TaintExceptionSchema).max(256).optional(),
});
export type TaintPolicy = z.input<typeof TaintPolicySchema>;

/**
 * Protected paths (see `protected-paths.ts`): writes to them ask (deny with `effect: 'deny'` or the
 * `strict` preset) whatever the rest of the chain says. Patterns add to the built-in and default
 * ones; `except` waives by name; the strictest effect of the engine, the profile and the preset wins.
 */
export const ProtectedPathsSchema = z.strictObject({
  effect: z.enum(['ask', 'deny']).optional(),
  /** Extra patterns (`secrets/**`, `*.pem`); matched at every depth, case-insensitively. */
  paths: z.array(z.string().min(1).max(1_024)).max(1_024).optional(),
  /** Protected paths this policy lets through; each must name what it waives. */
  except: z.array(z.string().min(1).max(1_024)).max(1_024).optional(),
  /** Input fields through which other tools write files: `{ "fs_write": ["path"] }`. */
  writeFields: z
    .record(ToolNameSchema, z.array(z.string().min(1).max(256)).min(1).max(32))
    .optional(),
});
export type ProtectedPathsPolicy = z.input<typeof ProtectedPathsSchema>;

const layerShape = {
  deny: z.array(PermissionRuleSchema).max(4_096).optional(),
  ask: z.array(PermissionRuleSchema).max(4_096).optional(),
  expressions: z.array(ExpressionRuleSchema).max(1_024).optional(),
  /** Per-tool risk reclassification (`{ mcp__github__create_issue: 'write' }`), applied before presets. */
  riskOverrides: z.record(ToolNameSchema, RiskSchema).optional(),
  taint: TaintPolicySchema.optional(),
  /** Approval window for asks this layer decides (rules may override). Default 24 h. */
  approvalTimeoutMs: ApprovalTimeoutMsSchema.optional(),
  /** Decision when an approval times out. Default `'deny'`. */
  onTimeout: OnTimeoutSchema.optional(),
  protectedPaths: ProtectedPathsSchema.optional(),
  /** Deadline for each hook and canUseTool call; a late answer denies. Default 5 s. */
  hookTimeoutMs: HookTimeoutMsSchema.optional(),
};

/** The engine layer's serialisable part. */
export const EngineLayerSchema = z.strictObject(layerShape);
export type EngineLayer = z.input<typeof EngineLayerSchema>;

/** A profile layer's serialisable part. */
export const ProfileLayerSchema = z.strictObject({
  ...layerShape,
  /** Compiles into ordinary deny/ask rules appended after this layer's own. */
  preset: PresetNameSchema.optional(),
  /** Opt in to the parent agent's chain (default false: never inherited implicitly). */
  inheritPermissions: z.boolean().optional(),
  /** `'readonly'` compiles a deny rule for risk write/destructive into the chain. */
  isolation: z.enum(['none', 'readonly']).optional(),
});
export type ProfileLayer = z.input<typeof ProfileLayerSchema>;

const ProfileNameSchema = z
  .string()
  .regex(/^[A-Za-z0-9_.-]{1,128}$/, 'profile names are 1-128 characters of [A-Za-z0-9_.-]');

/** A whole policy: the engine layer plus named profiles. */
export const PolicyDocumentSchema = z.strictObject({
  engine: EngineLayerSchema.default({}),
  profiles: z.record(ProfileNameSchema, ProfileLayerSchema).default({}),
});
export type PolicyDocument = z.output<typeof PolicyDocumentSchema>;
export type PolicyDocumentInput = z.input<typeof PolicyDocumentSchema>;
