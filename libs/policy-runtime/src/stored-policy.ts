import { z } from 'zod';
import { ConfigError, SUBJECT_TOKEN_PATTERN, ed25519PublicKey } from '@toolgate/contracts';
import {
  compilePolicyDocument,
  PolicyDocumentSchema,
  type PolicyDocument,
} from '@toolgate/permissions';

/** A hook (or canUseTool) served by a team's service on `subjects.hook(tenant, name)`. */
const RemoteClosureSchema = z.strictObject({
  name: z
    .string()
    .regex(SUBJECT_TOKEN_PATTERN, 'remote hook names are subject tokens ([A-Za-z0-9_-])'),
  /** Deadline for the answer; a late or missing answer denies. Default: the layer's hookTimeoutMs. */
  timeoutMs: z.number().int().positive().max(600_000).optional(),
  /**
   * The hook's Ed25519 public key (SPKI DER, base64): only a reply signed with it counts (see
   * docs/bus-protocol.md, "Authenticating hooks and workers"). Required unless `unauthenticated`.
   */
  publicKey: z.string().min(1).max(1024).optional(),
  /**
   * `true` takes the first reply, signed or not: anyone who can publish on the hook's subject can
   * answer for the hook. For development, or a broker whose NATS users already restrict that.
   */
  unauthenticated: z.literal(true).optional(),
});
export type RemoteClosure = z.infer<typeof RemoteClosureSchema>;

const RemoteLayerSchema = z.strictObject({
  hooks: z.array(RemoteClosureSchema).max(64).optional(),
  canUseTool: RemoteClosureSchema.optional(),
});
export type RemoteLayer = z.infer<typeof RemoteLayerSchema>;

/**
 * The policy document as stored by the gateway: the permissions library's serialisable policy
 * plus remote hooks and canUseTool per layer — closures cannot cross a process boundary, so a team
 * names a service that answers on the bus instead.
 */
export const StoredPolicySchema = PolicyDocumentSchema.extend({
  /** Approval settings: separation of duties (the submitter cannot approve its own call). */
  approvals: z
    .strictObject({
      separationOfDuties: z.boolean().optional(),
      profiles: z
        .record(z.string(), z.strictObject({ separationOfDuties: z.boolean().optional() }))
        .optional(),
    })
    .optional(),
  remote: z
    .strictObject({
      engine: RemoteLayerSchema.optional(),
      profiles: z.record(z.string(), RemoteLayerSchema).optional(),
    })
    .optional(),
  /**
   * The consecutive-error cap: once this many calls of a run in a row ended in an error or a
   * denial, the run's next dispatch is refused (`error-cap`) until a call succeeds or the cap is
   * reset. Default {@link DEFAULT_ERROR_CAP}; `false` turns it off.
   */
  errorCap: z
    .union([z.literal(false), z.strictObject({ consecutive: z.number().int().min(1).max(10_000) })])
    .optional(),
});
export type StoredPolicy = z.output<typeof StoredPolicySchema>;

/**
 * Validates a policy document completely — schema, rules, patterns, CEL expressions, presets — by
 * compiling every layer once, so a bad policy is refused when it is put, never at first dispatch.
 */
export function validateStoredPolicy(document: unknown): StoredPolicy {
  const parsed = StoredPolicySchema.safeParse(document);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => ({
      path: i.path.map(String),
      message: i.message,
    }));
    throw new ConfigError(
      `policy: ${issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ')}`,
      {
        details: { issues },
      },
    );
  }
  const policy = parsed.data;
  for (const name of Object.keys(policy.remote?.profiles ?? {})) {
    if (!(name in policy.profiles))
      throw new ConfigError(`policy: remote hooks name an unknown profile "${name}"`);
  }
  for (const [where, closure] of remoteClosures(policy)) {
    if (closure.publicKey !== undefined && closure.unauthenticated)
      throw new ConfigError(
        `policy: ${where} "${closure.name}" has a publicKey and unauthenticated`,
      );
    if (closure.publicKey !== undefined)
      ed25519PublicKey(closure.publicKey, `policy: the publicKey of ${where} "${closure.name}"`);
    else if (!closure.unauthenticated) {
      throw new ConfigError(
        `policy: ${where} "${closure.name}" needs a publicKey (or "unauthenticated": true, which lets anyone on its subject answer for it)`,
      );
    }
  }
  // Already parsed (the stored schema extends the permissions one): compiling is what is left.
  const { remote: _remote, approvals: _approvals, errorCap: _errorCap, ...permissions } = policy;
  compilePolicyDocument(permissions);
  return policy;
}

/** Every remote hook and canUseTool of a policy, with where it is named. */
function remoteClosures(policy: StoredPolicy): [string, RemoteClosure][] {
  const layers: [string, RemoteLayer | undefined][] = [
    ['remote.engine', policy.remote?.engine],
    ...Object.entries(policy.remote?.profiles ?? {}).map(([p, layer]): [string, RemoteLayer] => [
      `remote.profiles.${p}`,
      layer,
    ]),
  ];
  return layers.flatMap(([at, layer]) => [
    ...(layer?.hooks ?? []).map((h): [string, RemoteClosure] => [`${at}.hooks`, h]),
    ...(layer?.canUseTool
      ? [[`${at}.canUseTool`, layer.canUseTool] as [string, RemoteClosure]]
      : []),
  ]);
}

export type { PolicyDocument };

/** Failures in a row after which a run's next dispatch is refused, when the policy says nothing. */
export const DEFAULT_ERROR_CAP = 5;

/** The error cap of a policy: failures in a row that stop a run, or null when it is off. */
export function errorCapOf(policy: StoredPolicy): number | null {
  if (policy.errorCap === false) return null;
  return policy.errorCap?.consecutive ?? DEFAULT_ERROR_CAP;
}

/** Whether separation of duties applies to a profile's approvals (the profile's setting wins). */
export function separationOfDuties(policy: StoredPolicy, profile: string | undefined): boolean {
  const profiles = policy.approvals?.profiles;
  const own =
    profile === undefined || !profiles || !Object.hasOwn(profiles, profile)
      ? undefined
      : profiles[profile]?.separationOfDuties;
  return own ?? policy.approvals?.separationOfDuties ?? false;
}
