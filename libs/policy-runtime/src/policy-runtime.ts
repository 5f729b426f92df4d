import type { NatsConnection } from '@nats-io/transport-node';
import {
  ConfigError,
  type AgentRef,
  type Isolation,
  type Risk,
  type Subjects,
  type Taint,
  type ToolRef,
} from '@toolgate/contracts';
import {
  checkFetchHost,
  compilePolicyDocument,
  DEFAULT_PROTECTION,
  DEFAULT_HOOK_TIMEOUT_MS,
  evaluatePermission,
  type CompiledPolicy,
  type LayerClosures,
  type PermissionChain,
  type PermissionDecision,
  type ProtectedPaths,
} from '@toolgate/permissions';
import type { PolicyStore } from '@toolgate/registry';
import { remoteCanUseTool, remoteHook } from './remote-closures';
import {
  separationOfDuties,
  errorCapOf,
  DEFAULT_ERROR_CAP,
  StoredPolicySchema,
  type RemoteLayer,
  type StoredPolicy,
} from './stored-policy';

/** The facts of one call that the chain decides on. */
export interface CallFacts {
  tool: Pick<ToolRef, 'name' | 'risk' | 'needsApproval' | 'clearance'>;
  input: unknown;
  agent: AgentRef;
  isolation: Isolation;
  profile?: string | undefined;
  taint?: Taint | undefined;
}

/** A decision and the policy revision it was reached under. */
export interface RevisionedDecision {
  decision: PermissionDecision;
  revision: number;
  /** Whether the submitter is barred from approving this call (for asks). */
  separationOfDuties: boolean;
}

interface CompiledPolicyAt {
  revision: number;
  policy: StoredPolicy;
  compiled: CompiledPolicy;
}

/** A tenant's revision, compiled or with the error compiling it failed with. */
type CompiledRevision = CompiledPolicyAt | { revision: number; failure: unknown };

/**
 * Decides calls against a tenant's stored policy: compiles the tenant's policy once per revision
 * (with its remote hooks adapted into closures), so a policy change takes effect on the next call
 * without a restart, and the revision is recorded with every decision.
 */
export class PolicyRuntime {
  private readonly byTenant = new Map<string, CompiledRevision>();

  constructor(
    private readonly store: PolicyStore,
    private readonly nc: NatsConnection,
    private readonly subjects: Subjects,
  ) {}

  /** The chain for a tenant and profile at the current revision. Unknown profiles throw (callers fail closed). */
  chainFor(
    tenant: string,
    profile: string | undefined,
  ): { chain: PermissionChain; revision: number; separationOfDuties: boolean } {
    const current = this.compiled(tenant);
    return {
      chain: current.compiled.chainFor(profile),
      revision: current.revision,
      separationOfDuties: separationOfDuties(current.policy, profile),
    };
  }

  async decide(tenant: string, call: CallFacts): Promise<RevisionedDecision> {
    const { chain, revision, separationOfDuties: sod } = this.chainFor(tenant, call.profile);
    const decision = await evaluatePermission(chain, call.tool, call.input, {
      agent: call.agent,
      isolation: call.isolation,
      taint: call.taint,
      profile: call.profile,
    });
    return { decision, revision, separationOfDuties: sod };
  }

  /**
   * The tenant's consecutive-error cap (null: off). A policy that does not compile keeps the
   * default cap: the chain denies that tenant's calls anyway, and a cap never lets more through.
   */
  errorCap(tenant: string): number | null {
    try {
      return errorCapOf(this.compiled(tenant).policy);
    } catch {
      return DEFAULT_ERROR_CAP;
    }
  }

  /**
   * Whether the fetch tool (or `tool`: a networked subprocess tool) may connect to `host` for a
   * tenant's call under `profile` (checked before every connection). Anything that goes wrong
   * denies.
   */
  checkFetchHost(
    tenant: string,
    profile: string | undefined,
    host: string,
    tool?: { name: string; risk?: Risk | undefined },
  ): 'allow' | 'deny' {
    try {
      const chain = this.chainFor(tenant, profile).chain;
      return (
        tool ? checkFetchHost(chain, host, tool.risk, tool.name) : checkFetchHost(chain, host)
      ).verdict;
    } catch {
      return 'deny';
    }
  }

  /**
   * The protected paths of a tenant's chain under `profile`, for the executor's on-disk check.
   * When the policy cannot be compiled, the built-in and default ones (the chain denies such a
   * tenant's calls anyway).
   */
  protectedPaths(tenant: string, profile: string | undefined): ProtectedPaths {
    try {
      return this.chainFor(tenant, profile).chain.protectedPaths;
    } catch {
      return DEFAULT_PROTECTION;
    }
  }

  private compiled(tenant: string): CompiledPolicyAt {
    const { revision, document } = this.store.get(tenant);
    let entry = this.byTenant.get(tenant);
    if (entry?.revision !== revision) {
      try {
        entry = { revision, ...this.compile(tenant, document) };
      } catch (failure) {
        entry = { revision, failure };
      }
      this.byTenant.set(tenant, entry);
    }
    // A revision that does not compile fails every call until it is replaced, without compiling
    // it again for each one.
    if ('failure' in entry) throw entry.failure;
    return entry;
  }

  private compile(
    tenant: string,
    document: Record<string, unknown>,
  ): Omit<CompiledPolicyAt, 'revision'> {
    const parsed = StoredPolicySchema.safeParse(document);
    if (!parsed.success) {
      // Stored documents were validated when put; one that no longer parses denies everything.
      throw new ConfigError(
        'the stored policy does not parse; every call is denied until it is fixed',
      );
    }
    const policy = parsed.data;
    const { remote, approvals: _approvals, ...doc } = policy;
    const engineTimeout = doc.engine.hookTimeoutMs ?? DEFAULT_HOOK_TIMEOUT_MS;
    const profiles: Record<string, LayerClosures> = {};
    for (const [name, layer] of Object.entries(remote?.profiles ?? {})) {
      profiles[name] = this.closures(
        tenant,
        layer,
        doc.profiles[name]?.hookTimeoutMs ?? engineTimeout,
      );
    }
    const compiled = compilePolicyDocument(doc, {
      ...(remote?.engine ? { engine: this.closures(tenant, remote.engine, engineTimeout) } : {}),
      profiles,
    });
    return { policy, compiled };
  }

  private closures(tenant: string, layer: RemoteLayer, timeoutMs: number): LayerClosures {
    return {
      ...(layer.hooks
        ? {
            hooks: layer.hooks.map((h) => remoteHook(this.nc, this.subjects, tenant, h, timeoutMs)),
          }
        : {}),
      ...(layer.canUseTool
        ? {
            canUseTool: remoteCanUseTool(
              this.nc,
              this.subjects,
              tenant,
              layer.canUseTool,
              timeoutMs,
            ),
          }
        : {}),
    };
  }
}
