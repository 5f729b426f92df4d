import { z } from 'zod';
import { JsonSchemaObjectSchema, RiskSchema, ToolNameSchema } from './tool-contract';

/**
 * Script tools: a tool written as a small JavaScript file, declared by `// @` directives, run by
 * the tool-executor's `script` executor in a QuickJS (wasm) sandbox. Installed by an admin
 * (`tools.scripts.install`, journaled as `script-installed`) or loaded from the executor's
 * `EXECUTOR_SCRIPTS_DIR`. What crosses a process boundary about them is defined here.
 */

/** The host functions a script may name in `// @requires`; nothing else reaches the outside. */
export const SCRIPT_HOST_FUNCTIONS = ['read_file', 'write_file', 'http_get', 'shell'] as const;
export const ScriptHostFunctionSchema = z.enum(SCRIPT_HOST_FUNCTIONS);
export type ScriptHostFunction = z.infer<typeof ScriptHostFunctionSchema>;

/** The largest script source accepted, in UTF-8 bytes (sidecar not counted). */
export const MAX_SCRIPT_BYTES = 256 * 1024;

/**
 * Why a script was refused at install or skipped at load: a stable code in the install error's
 * `details.reason` and in the inventory's `skipped[].reason.code`.
 */
export const ScriptRefusalCode = {
  /** The source is over {@link MAX_SCRIPT_BYTES}. */
  TooLarge: 'too-large',
  /** QuickJS does not compile it. */
  SyntaxError: 'syntax-error',
  /** No `// @tool` directive. */
  MissingTool: 'missing-tool',
  /** No `// @description` directive. */
  MissingDescription: 'missing-description',
  /** `@tool` differs from the name it is installed under or its file is named. */
  NameMismatch: 'name-mismatch',
  /** The sidecar's `name` differs from `@tool`. */
  SidecarNameMismatch: 'sidecar-name-mismatch',
  /** The sidecar is not a `{ name, parameters }` JSON object. */
  InvalidSidecar: 'invalid-sidecar',
  /** A directive that does not parse (a repeated `@tool`, a `@param` with an unknown type, …). */
  InvalidDirective: 'invalid-directive',
  /** `@requires` names something that is not a host function. */
  UnknownRequirement: 'unknown-requirement',
  /** The parameters schema (from `@param`s or the sidecar) is not one Toolgate accepts. */
  InvalidSchema: 'invalid-schema',
  /** A name Toolgate keeps for itself (a host function's, or one starting with `_` or `toolgate`). */
  ReservedName: 'reserved-name',
  /** A builtin tool's name (or a directory script's, for an install). */
  BuiltinName: 'builtin-name',
  /** The tenant already has a tool of that name and `overwrite` was not set. */
  Exists: 'exists',
  /** A file in the scripts directory could not be read. */
  Unreadable: 'unreadable',
} as const;
export type ScriptRefusalCode = (typeof ScriptRefusalCode)[keyof typeof ScriptRefusalCode];
export const ScriptRefusalCodeSchema = z.enum(
  Object.values(ScriptRefusalCode) as [ScriptRefusalCode, ...ScriptRefusalCode[]],
);

/** A refusal: its code and a message naming what to fix. */
export const ScriptRefusalSchema = z.object({
  code: ScriptRefusalCodeSchema,
  message: z.string(),
});
export type ScriptRefusal = z.infer<typeof ScriptRefusalSchema>;

/**
 * The optional sidecar (`<name>.json` beside `<name>.js`, or `sidecar` in an install): a full JSON
 * Schema for the parameters, for what `@param` cannot say (enums, items, bounds). When present it
 * replaces the `@param`s entirely; its `name` must equal `@tool`.
 */
export const ScriptSidecarSchema = z.strictObject({
  name: ToolNameSchema,
  parameters: JsonSchemaObjectSchema,
});
export type ScriptSidecar = z.infer<typeof ScriptSidecarSchema>;

/** The contract `version` of a script tool: the sha256 of its source and sidecar. */
export const SCRIPT_VERSION_PATTERN = /^script:([0-9a-f]{64})$/;

/** `script:<sha256>`, the contract version that binds a script tool's contract to its code. */
export function scriptVersion(sha256: string): string {
  return `script:${sha256}`;
}

/** The script hash a contract version names; undefined for a version that is not a script's. */
export function scriptHashOfVersion(version: string | undefined): string | undefined {
  return version === undefined ? undefined : SCRIPT_VERSION_PATTERN.exec(version)?.[1];
}

/** Policy fields an installer may set; `executor` is always `script`, `risk` at least the derived one. */
export const ScriptPolicyInputSchema = z.strictObject({
  risk: RiskSchema.optional(),
  needsApproval: z.boolean().optional(),
  clearance: z.enum(['public', 'internal', 'private']).optional(),
  timeoutMs: z.number().int().positive().max(3_600_000).optional(),
});

/**
 * `tools.scripts.install` (admin): installs or replaces one of the tenant's script tools. The
 * sidecar is checked with the script, so a malformed one is refused with `invalid-sidecar`.
 */
export const InstallScriptRequestSchema = z.strictObject({
  name: ToolNameSchema,
  /** The script's source; at most {@link MAX_SCRIPT_BYTES} UTF-8 bytes (checked as a refusal). */
  source: z
    .string()
    .min(1)
    .max(4 * MAX_SCRIPT_BYTES),
  sidecar: z.unknown().optional(),
  /** Replace the tenant's tool of that name; without it an existing tool is refused with `exists`. */
  overwrite: z.boolean().default(false),
  policy: ScriptPolicyInputSchema.optional(),
});
export type InstallScriptRequest = z.input<typeof InstallScriptRequestSchema>;

/** A loaded (or installed) script tool as the inventory lists it. */
export const ScriptEntrySchema = z.object({
  name: ToolNameSchema,
  description: z.string(),
  parameters: z.record(z.string(), z.unknown()),
  requires: z.array(ScriptHostFunctionSchema),
  risk: RiskSchema,
  /** sha256 of the source and sidecar; the contract's version is `script:<sha256>`. */
  sha256: z.string(),
  contractHash: z.string(),
  /** `directory`: from the executor's scripts directory, offered to every tenant; `installed`: the tenant's own. */
  origin: z.enum(['directory', 'installed']),
  /** The file it was loaded from (directory scripts). */
  file: z.string().optional(),
});
export type ScriptEntry = z.infer<typeof ScriptEntrySchema>;

/** A script file that was not loaded, and why. */
export const SkippedScriptSchema = z.object({
  file: z.string(),
  name: z.string().optional(),
  reason: ScriptRefusalSchema,
});
export type SkippedScript = z.infer<typeof SkippedScriptSchema>;

/** What `tools.scripts.install` answers. */
export const InstallScriptResponseSchema = z.object({
  script: ScriptEntrySchema,
  /** The contract hash this install replaced, when it replaced a tool. */
  replaced: z.string().optional(),
  toolsetHash: z.string(),
  warnings: z.array(z.string()),
});
export type InstallScriptResponse = z.infer<typeof InstallScriptResponseSchema>;

/**
 * `tools.scripts` (dispatch): the script tools a tenant can call (the directory's and its own) and
 * the directory's files that were skipped, with reasons. `directory` is what the tool-executor
 * last announced (absent when no executor has a scripts directory).
 */
export const ScriptInventorySchema = z.object({
  loaded: z.array(ScriptEntrySchema),
  skipped: z.array(SkippedScriptSchema),
  directory: z
    .object({
      path: z.string(),
      loadedAt: z.string(),
    })
    .optional(),
});
export type ScriptInventory = z.infer<typeof ScriptInventorySchema>;
