import type { NatsConnection } from '@nats-io/transport-node';
import {
  assertSubjectToken,
  compileJsonSchema,
  ConfigError,
  contractHash,
  ErrorCode,
  RegisteredToolSchema,
  ToolContractSchema,
  ToolgateError,
  toolsetHash,
  type ExecutorKind,
  type RegisteredTool,
  type Subjects,
  type ToolContract,
  type ToolView,
} from '@toolgate/contracts';
import { KvCache } from './kv-cache';

const BUILTIN = '_builtin';
const SERVED = '_served';
const CONTRACT = '_contract';
/** Key prefixes that are not tenants. */
const RESERVED: ReadonlySet<string> = new Set([BUILTIN, SERVED, CONTRACT]);

interface StoredTool extends RegisteredTool {
  contractHash: string;
}

/**
 * A stored tool as written (the contract hash is kept for readers of the bucket; this mirror
 * recomputes it from the contract rather than trusting it).
 */
const StoredToolSchema = RegisteredToolSchema.extend({
  contractHash: RegisteredToolSchema.shape.name,
});

/**
 * The tool registry: tenants' registered contracts and the builtins the executor serves, in a KV
 * bucket mirrored in memory. Keys: `<tenant>.<tool>` for a tenant's tools, `_builtin.<tool>` for
 * builtins, `_served.<executor>` for the executors some tool-executor replica serves, and
 * `_contract.<contractHash>` for every contract ever registered (content-addressed, never
 * replaced: a call submitted against a contract is checked against that contract, even when the
 * tool was re-registered since). Contracts are read on demand, not mirrored.
 */
export class ToolRegistry {
  private constructor(private readonly cache: KvCache<StoredTool | { served: true }>) {}

  static async open(
    nc: NatsConnection,
    subjects: Subjects,
    options: { replicas?: number } = {},
  ): Promise<ToolRegistry> {
    const cache = await KvCache.open<StoredTool | { served: true }>(
      nc,
      subjects.toolsBucket,
      (raw) => {
        if (
          typeof raw === 'object' &&
          raw !== null &&
          (raw as { served?: unknown }).served === true
        )
          return { served: true };
        const parsed = StoredToolSchema.safeParse(raw);
        if (!parsed.success) return null;
        return { ...parsed.data, contractHash: contractHash(parsed.data) };
      },
      options,
    );
    return new ToolRegistry(cache);
  }

  /** Announces builtins and the executors this process serves (the tool-executor calls this). */
  async announce(builtins: RegisteredTool[], executors: ExecutorKind[]): Promise<void> {
    for (const tool of builtins) {
      const stored = { ...tool, contractHash: contractHash(tool) };
      const current = this.cache.get(`${BUILTIN}.${tool.name}`);
      if (
        current &&
        'contractHash' in current.value &&
        current.value.contractHash === stored.contractHash
      )
        continue;
      await this.cache.write(`${BUILTIN}.${tool.name}`, stored);
    }
    for (const executor of executors) {
      if (this.cache.get(`${SERVED}.${executor}`)) continue;
      await this.cache.write(`${SERVED}.${executor}`, { served: true });
    }
  }

  /**
   * Registers (or replaces) a tenant's tool. Throws a ConfigError for a schema outside the supported
   * subset, a name taken by a builtin, or an executor nothing serves (`executor-unregistered`).
   * Returns the stored tool and the schema's warnings (accepted, probably a mistake).
   */
  async register(
    tenant: string,
    tool: RegisteredTool,
  ): Promise<ToolView & { warnings: readonly string[] }> {
    assertSubjectToken('tenant', tenant);
    // The reserved key prefixes are not tenants: writing under them would plant a builtin every
    // tenant resolves, or mark an executor as served.
    if (RESERVED.has(tenant)) {
      throw new ConfigError(`${tenant} is a reserved name, not a tenant`, {
        details: { field: 'tenant' },
      });
    }
    const { warnings } = compileJsonSchema(tool.parameters, `tool ${tool.name} parameters`);
    checkCommand(tool);
    if (this.cache.get(`${BUILTIN}.${tool.name}`)) {
      throw new ConfigError(`${tool.name} is a builtin tool and cannot be registered`, {
        details: { tool: tool.name },
      });
    }
    const executor = tool.policy.executor;
    if (executor === 'inprocess' || !this.cache.get(`${SERVED}.${executor}`)) {
      throw new ToolgateError(
        ErrorCode.ExecutorUnregistered,
        executor === 'inprocess'
          ? `in-process tools are Toolgate's builtins; serve ${tool.name} from your own worker with executor "remote"`
          : `no tool-executor serves the "${executor}" executor`,
        { details: { tool: tool.name, executor } },
      );
    }
    const stored: StoredTool = { ...tool, contractHash: contractHash(tool) };
    // The contract first: a call can only name a contract hash once the tool resolves to it.
    const { name, description, parameters, version } = tool;
    await this.cache.kv.put(
      `${CONTRACT}.${stored.contractHash}`,
      JSON.stringify({
        name,
        description,
        parameters,
        ...(version === undefined ? {} : { version }),
      }),
    );
    await this.cache.write(`${tenant}.${tool.name}`, stored);
    return { ...view(stored, false), warnings };
  }

  /**
   * The contract with this hash, as registered at some time by some tenant; undefined when no
   * registration ever wrote it. The stored value is checked against the hash (anyone who can write
   * the bucket could plant one), so what comes back is exactly the contract the hash names.
   */
  async contract(hash: string): Promise<ToolContract | undefined> {
    if (!/^[0-9a-f]{64}$/.test(hash)) return undefined;
    const entry = await this.cache.kv.get(`${CONTRACT}.${hash}`);
    if (!entry || entry.operation !== 'PUT') return undefined;
    let parsed;
    try {
      parsed = ToolContractSchema.safeParse(entry.json());
    } catch {
      return undefined;
    }
    if (!parsed.success || contractHash(parsed.data) !== hash) return undefined;
    return parsed.data;
  }

  /** The tool a tenant's dispatch names: its own registration, else a builtin. */
  resolve(tenant: string, name: string): ToolView | undefined {
    const own = this.cache.get(`${tenant}.${name}`)?.value;
    if (own && 'contractHash' in own) return view(own, false);
    const builtin = this.cache.get(`${BUILTIN}.${name}`)?.value;
    if (builtin && 'contractHash' in builtin) return view(builtin, true);
    return undefined;
  }

  /**
   * A tenant's registered tool as it is now, if its contract hash is `contractHash`: what the
   * executor runs a decided call with. When the mirror does not have that version (yet), the
   * bucket is read directly, so a call dispatched right after its registration finds it.
   */
  async current(tenant: string, name: string, hash: string): Promise<ToolView | undefined> {
    const key = `${tenant}.${name}`;
    const cached = this.cache.get(key)?.value;
    if (cached && 'contractHash' in cached && cached.contractHash === hash) {
      return view(cached, false);
    }
    const entry = await this.cache.kv.get(key);
    if (!entry || entry.operation !== 'PUT') return undefined;
    const parsed = StoredToolSchema.safeParse(entry.json());
    if (!parsed.success) return undefined;
    const stored = { ...parsed.data, contractHash: contractHash(parsed.data) };
    return stored.contractHash === hash ? view(stored, false) : undefined;
  }

  /** Every tool a tenant can call, and the toolsetHash over their contracts. */
  list(tenant: string): { tools: ToolView[]; toolsetHash: string } {
    const byName = new Map<string, ToolView>();
    for (const [, entry] of this.cache.list(`${BUILTIN}.`)) {
      if ('contractHash' in entry.value) byName.set(entry.value.name, view(entry.value, true));
    }
    for (const [, entry] of this.cache.list(`${tenant}.`)) {
      if ('contractHash' in entry.value) byName.set(entry.value.name, view(entry.value, false));
    }
    const tools = [...byName.values()].sort((a, b) => (a.name < b.name ? -1 : 1));
    return {
      tools,
      toolsetHash: toolsetHash(
        tools.map(({ name, description, parameters, version }) => ({
          name,
          description,
          parameters,
          ...(version === undefined ? {} : { version }),
        })),
      ),
    };
  }

  stop(): void {
    this.cache.stop();
  }
}

/**
 * `policy.command` belongs to subprocess and container tools, which need one (and container tools
 * `policy.container`, their image); its placeholders name required
 * top-level parameters (a placeholder always has a value); declared network hosts need risk
 * `network`, which is what the permission chain sees.
 */
function checkCommand(tool: RegisteredTool): void {
  const { executor, command, risk } = tool.policy;
  const refuse = (message: string) => {
    throw new ConfigError(`tool ${tool.name}: ${message}`, {
      details: { tool: tool.name, field: 'policy.command' },
    });
  };
  if (executor === 'container') {
    if (!tool.policy.container) {
      throw new ConfigError(
        `tool ${tool.name}: a container tool needs policy.container (its image)`,
        {
          details: { tool: tool.name, field: 'policy.container' },
        },
      );
    }
  } else if (tool.policy.container) {
    throw new ConfigError(
      `tool ${tool.name}: policy.container is for the container executor, not ${executor}`,
      { details: { tool: tool.name, field: 'policy.container' } },
    );
  }
  if (executor !== 'subprocess' && executor !== 'container') {
    if (command)
      refuse(`policy.command is for the subprocess and container executors, not ${executor}`);
    return;
  }
  if (!command) return refuse(`a ${executor} tool needs policy.command (its argv)`);
  const required = new Set(
    Array.isArray(tool.parameters.required) ? (tool.parameters.required as unknown[]) : [],
  );
  for (const element of command.argv) {
    if (typeof element === 'object' && !required.has(element.input)) {
      refuse(`the argv placeholder ${element.input} must name a required top-level parameter`);
    }
  }
  if (command.network && risk !== 'network') {
    refuse('a command that declares network hosts needs risk "network"');
  }
}

function view(tool: StoredTool, builtin: boolean): ToolView {
  return { ...tool, builtin };
}
