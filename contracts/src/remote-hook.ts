import { z } from 'zod';
import { AgentRefSchema, IsolationSchema, TaintSchema, VerdictSchema } from './events';
import { boundedJson } from './json-limits';
import { SubjectTokenSchema as Token } from './subjects';
import { RiskSchema, ToolNameSchema } from './tool-contract';

/**
 * Remote hooks and canUseTool: a team's service answering on `subjects.hook(tenant, name)`, named
 * in the tenant's policy. The permission evaluator sends a {@link RemoteHookRequest} as a core NATS
 * request (at most once) and reads the {@link RemoteHookReply}; no answer within the hook's
 * deadline, an error, or a reply that is not one of these shapes denies (fail closed).
 */

/** What the chain knows about the call when it asks a hook (absent fields are unknown). */
export const HookContextWireSchema = z.object({
  agent: AgentRefSchema.optional(),
  taint: TaintSchema.optional(),
  isolation: IsolationSchema.optional(),
  /** The egress target (a URL's host for the fetch tool), when the call has one. */
  target: z.string().optional(),
  profile: z.string().optional(),
  /** The tool with its effective risk (after risk overrides). */
  tool: z.object({
    name: ToolNameSchema,
    risk: RiskSchema.optional(),
    needsApproval: z.boolean(),
    clearance: TaintSchema.optional(),
  }),
});
export type HookContextWire = z.infer<typeof HookContextWireSchema>;

/** Published by the permission evaluator to a remote hook or canUseTool service. */
export const RemoteHookRequestSchema = z.object({
  kind: z.enum(['hook', 'canUseTool']),
  tenant: Token,
  toolName: ToolNameSchema,
  /** The call's input as the chain has it so far (earlier hooks may have substituted it). */
  input: z.unknown(),
  context: HookContextWireSchema,
});
export type RemoteHookRequest = z.infer<typeof RemoteHookRequestSchema>;

/** The longest reason a hook's reply carries to the settled message (longer ones are cut). */
export const MAX_HOOK_REASON_LENGTH = 500;

/**
 * A hook's answer: `{ "verdict": "allow" | "deny" | "ask" }` decides (canUseTool may not ask),
 * with an optional `"reason"`, `{ "modifiedInput": <json> }` substitutes the input and continues (it
 * wins over a verdict in the same reply), `{}` passes. Strict: a field it does not declare (a
 * mistyped `{ "decision": "deny" }`) makes the reply invalid, and the chain denies — a typo must
 * not read as a pass. `modifiedInput` nests at most `MAX_JSON_DEPTH` levels.
 */
export const RemoteHookReplySchema = z.strictObject({
  verdict: VerdictSchema.optional(),
  /**
   * Why, with a `deny` (or `ask`): shown in the settled error's message (a deny) or to the approver
   * (an ask). Cut to {@link MAX_HOOK_REASON_LENGTH} characters.
   */
  reason: z
    .string()
    .transform((s) => s.slice(0, MAX_HOOK_REASON_LENGTH))
    .optional(),
  modifiedInput: boundedJson(z.unknown()).optional(),
});
export type RemoteHookReply = z.infer<typeof RemoteHookReplySchema>;
