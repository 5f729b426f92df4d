import { ConfigError } from '@toolgate/contracts';
import { compilePermissionChain, type PermissionChain } from './permission-chain';
import { PolicyDocumentSchema, type PolicyDocument } from './policy-document';
import type { LayerClosures } from './permission-types';

/**
 * Parses a stored policy (JSON) and checks that every layer compiles (patterns, expressions, host
 * patterns, presets), so a bad policy is refused when it is saved, not at the first call.
 * @throws ConfigError listing the problems
 */
export function parsePolicyDocument(value: unknown): PolicyDocument {
  const parsed = PolicyDocumentSchema.safeParse(value);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => ({
      path: i.path.map(String),
      message: i.message,
    }));
    throw new ConfigError(
      `invalid policy document: ${issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ')}`,
      { details: { issues } },
    );
  }
  compilePolicyDocument(parsed.data);
  return parsed.data;
}

/** Closures added to a stored policy in code (the evaluator adapts remote hooks into these). */
export interface PolicyClosures {
  readonly engine?: LayerClosures;
  readonly profiles?: Readonly<Record<string, LayerClosures>>;
}

/** A compiled policy document: one chain per profile, and the engine-only chain. */
export interface CompiledPolicy {
  readonly document: PolicyDocument;
  /** The engine layer alone (for dispatches without a profile). */
  readonly engine: PermissionChain;
  /**
   * The chain for a profile. With `parent` and the profile's `inheritPermissions: true` the chain
   * extends the parent's; otherwise it is the engine layer plus the profile (cached).
   * @throws ConfigError for an unknown profile
   */
  chainFor(profile?: string, parent?: PermissionChain): PermissionChain;
}

/** Compiles a (parsed) policy document with optional closures. @throws ConfigError */
export function compilePolicyDocument(
  document: PolicyDocument,
  closures: PolicyClosures = {},
): CompiledPolicy {
  const engineLayer = { ...document.engine, ...closures.engine };
  const engine = compilePermissionChain(engineLayer);
  const chains = new Map<string, PermissionChain>();
  const profileLayer = (name: string) => {
    // Own keys only: a profile named `__proto__` or `toString` must be unknown, not Object's.
    const layer = Object.hasOwn(document.profiles, name) ? document.profiles[name] : undefined;
    if (layer === undefined)
      throw new ConfigError(`unknown permission profile ${JSON.stringify(name)}`, {
        details: { profile: name },
      });
    const own = closures.profiles && Object.hasOwn(closures.profiles, name);
    return { ...layer, ...(own ? closures.profiles?.[name] : undefined) };
  };
  for (const name of Object.keys(document.profiles)) {
    chains.set(
      name,
      compilePermissionChain(engineLayer, profileLayer(name), { profileName: name }),
    );
  }
  const inherited = new WeakMap<PermissionChain, Map<string, PermissionChain>>();
  return {
    document,
    engine,
    chainFor(profile, parent) {
      if (profile === undefined) return engine;
      const own = chains.get(profile);
      if (own === undefined) profileLayer(profile);
      // `profileLayer` has thrown for anything but an own profile by now.
      if (parent === undefined || document.profiles[profile]?.inheritPermissions !== true)
        return own!;
      let byName = inherited.get(parent);
      if (byName === undefined) inherited.set(parent, (byName = new Map()));
      let chain = byName.get(profile);
      if (chain === undefined) {
        chain = compilePermissionChain(engineLayer, profileLayer(profile), {
          profileName: profile,
          parent,
        });
        byName.set(profile, chain);
      }
      return chain;
    },
  };
}
