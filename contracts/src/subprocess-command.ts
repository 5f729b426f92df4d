import { z } from 'zod';
import { mergeableJson } from './json-limits';

/** A top-level input field a placeholder names. */
const FieldName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_-]{0,127}$/, {
  message: 'a top-level input field name',
});

const NoNul = (what: string) =>
  z
    .string()
    .max(4096)
    .refine((s) => !s.includes('\0'), { message: `${what} must not contain a NUL byte` });

/**
 * One argv element: a literal string, or the value of one top-level field of the (validated)
 * input. A placeholder always becomes exactly one argv element — no shell, no splitting, no
 * globbing — and its field must hold a string, number or boolean. A value that starts with `-` is
 * refused unless `allowLeadingDash` (it would read as an option; put `--` before it instead).
 */
export const ArgvElementSchema = z.union([
  NoNul('an argv element'),
  z.strictObject({ input: FieldName, allowLeadingDash: z.boolean().optional() }),
]);
export type ArgvElement = z.infer<typeof ArgvElementSchema>;

const HOST_NAME =
  /^(?=[^:]*[a-z])[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/;

/**
 * A declared host: an exact host name (no wildcard, no scheme) on every port, or `<name>:<port>`
 * on that port only; undefined when `entry` is neither.
 */
export function declaredHost(entry: string): { host: string; port?: number } | undefined {
  const colon = entry.indexOf(':');
  const host = colon < 0 ? entry : entry.slice(0, colon);
  if (host.length > 253 || !HOST_NAME.test(host)) return undefined;
  if (colon < 0) return { host };
  const text = entry.slice(colon + 1);
  if (!/^[1-9]\d{0,4}$/.test(text) || Number(text) > 65_535) return undefined;
  return { host, port: Number(text) };
}

/** What a networked subprocess or container tool may reach (see {@link declaredHost}). */
const HostName = z
  .string()
  .min(1)
  .max(259)
  .refine((entry) => declaredHost(entry) !== undefined, {
    message: 'an exact lower-case host name, optionally with a :port (1–65535)',
  });

const Positive = z.number().int().positive();

/**
 * How a `subprocess` tool runs: one process per call, in the sandbox, with the call's input as
 * JSON on stdin and its result as JSON on stdout. Registered as the tool's `policy.command`
 * (published by the gateway's `tools.register`, read by the tool-executor from the registry); like
 * every policy field it is not part of the contract hash.
 */
export const SubprocessCommandSchema = z.strictObject({
  /**
   * The command line as argv, never a shell string. `argv[0]` is a literal: an absolute path, or a
   * program name found on the sandbox's PATH (the host's system directories, read-only).
   */
  argv: z
    .array(ArgvElementSchema)
    .min(1)
    .max(256)
    .refine((argv) => typeof argv[0] === 'string' && argv[0].length > 0, {
      message: 'argv[0] must be a literal program, not a placeholder',
    }),
  /** Fixed environment variables for the tool, on top of the operator's allowlist. */
  env: mergeableJson(
    z.record(
      z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, { message: 'an environment variable name' }),
      NoNul('an environment value'),
    ),
  ).optional(),
  /**
   * The hosts the tool needs, each on every port or on the one its `:<port>` gives
   * (`api.example.com:443`). Network is given to a call only when the tool's risk is `network`
   * and every host here passes the call's domain rules, and then as an egress proxy (named in
   * `HTTP_PROXY`, …) that reaches these hosts (and ports) only, each connection's address checked
   * (see docs/executors.md); the process has no other route out of its network namespace.
   */
  network: z.strictObject({ hosts: z.array(HostName).min(1).max(64) }).optional(),
  /** Lower resource limits than the operator's maxima (never higher). */
  limits: z
    .strictObject({
      cpuSeconds: Positive.max(86_400).optional(),
      memoryMb: Positive.max(1024 * 1024).optional(),
      openFiles: Positive.max(1_000_000).optional(),
      processes: Positive.max(100_000).optional(),
      outputBytes: Positive.max(64 * 1024 * 1024).optional(),
    })
    .optional(),
});
export type SubprocessCommand = z.infer<typeof SubprocessCommandSchema>;
