import type { NatsConnection } from '@nats-io/transport-node';
import {
  assertSubjectToken,
  canonicalJson,
  compileJsonSchema,
  ConfigError,
  contractHash,
  ErrorCode,
  RegisteredToolSchema,
  ScriptRefusalCode,
  scriptHashOfVersion,
  sha256Hex,
  SkippedScriptSchema,
  ToolContractSchema,
  ToolgateError,
  TOOL_VIEW_MAX_BYTES,
  TOOLSET_MAX_BYTES,
  toolsetHash,
  type ExecutorKind,
  type RegisteredTool,
  type SkippedScript,
  type Subjects,
  type ToolContract,
  type ToolView,
} from '@toolgate/contracts';
import { KvCache, KvRevisionConflict } from './kv-cache';

const BUILTIN = '_builtin';
const SERVED = '_served';
const CONTRACT = '_contract';
const SCRIPT = '_script';
const INVENTORY = '_inventory';
/** Key prefixes that are not tenants. */
const RESERVED: ReadonlySet<string> = new Set([BUILTIN, SERVED, CONTRACT, SCRIPT, INVENTORY]);

/**
 * A script tool as the registry stores it: its contract (version `script:<sha256>` of the source
 * and sidecar), the policy it runs with (executor `script`), and the files the hash covers.
 */
export interface ScriptToolRecord {
  tool: RegisteredTool;
  source: string;
  sidecar?: unknown;
}

/** What the executor's scripts directory held when it was last loaded. */
export interface ScriptDirectoryInventory {
  path: string;
  loadedAt: string;
  skipped: SkippedScript[];
}

/** The result of an install: the tool as stored, what it replaced, and how to take it back. */
export interface ScriptInstall {
  view: ToolView;
  /** The contract hash of the tool it replaced. */
  replaced?: string;
  /** Puts back what was there before (for an install whose journal entry could not be written). */
  undo(): Promise<void>;
}

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
 * tool was re-registered since). Contracts are read on demand, not mirrored. Script tools add
 * `_script.<sha256>` (a script's source and sidecar, content-addressed like contracts) and
 * `_inventory.scripts` (what the executor's scripts directory skipped, and why).
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
        return storedTool(raw) ?? null;
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
    const stored: StoredTool = { ...tool, contractHash: contractHash(tool) };
    // Before the schema is compiled (its cost grows with its size).
    this.assertFits(tenant, stored);
    const { warnings } = compileJsonSchema(tool.parameters, `tool ${tool.name} parameters`);
    checkCommand(tool);
    if (this.cache.get(`${BUILTIN}.${tool.name}`)) {
      throw new ConfigError(`${tool.name} is a builtin tool and cannot be registered`, {
        details: { tool: tool.name },
      });
    }
    const executor = tool.policy.executor;
    if (executor === 'script') {
      throw new ConfigError(
        `script tools are installed with their source (tools.scripts.install), not registered`,
        { details: { tool: tool.name, field: 'policy.executor' } },
      );
    }
    if (executor === 'inprocess' || !this.cache.get(`${SERVED}.${executor}`)) {
      throw new ToolgateError(
        ErrorCode.ExecutorUnregistered,
        executor === 'inprocess'
          ? `in-process tools are Toolgate's builtins; serve ${tool.name} from your own worker with executor "remote"`
          : `no tool-executor serves the "${executor}" executor`,
        { details: { tool: tool.name, executor } },
      );
    }
    // The contract first: a call can only name a contract hash once the tool resolves to it.
    await this.putContract(tool, stored.contractHash);
    await this.cache.write(`${tenant}.${tool.name}`, stored);
    return { ...view(stored, false), warnings };
  }

  /**
   * Refuses (`too-large`) a tool whose view takes more than {@link TOOL_VIEW_MAX_BYTES}, or that
   * would take the tenant's toolset (builtins included, the tool it replaces left out) over
   * {@link TOOLSET_MAX_BYTES}: what `tools.list` answers stays within one broker message.
   */
  private assertFits(tenant: string, stored: StoredTool): void {
    const bytes = Buffer.byteLength(JSON.stringify(view(stored, false)));
    if (bytes > TOOL_VIEW_MAX_BYTES)
      throw new ToolgateError(
        ErrorCode.TooLarge,
        `tool ${stored.name} is too large: ${bytes} bytes of description, schema and policy, over the limit of ${TOOL_VIEW_MAX_BYTES}`,
        { details: { tool: stored.name, bytes, limitBytes: TOOL_VIEW_MAX_BYTES } },
      );
    let toolset = bytes;
    for (const tool of this.list(tenant).tools)
      if (tool.name !== stored.name) toolset += Buffer.byteLength(JSON.stringify(tool)) + 1;
    if (toolset > TOOLSET_MAX_BYTES)
      throw new ToolgateError(
        ErrorCode.TooLarge,
        `the tenant's toolset would take ${toolset} bytes with ${stored.name}, over the limit of ${TOOLSET_MAX_BYTES}: remove tools, or shorten their descriptions and schemas`,
        { details: { tool: stored.name, bytes: toolset, limitBytes: TOOLSET_MAX_BYTES } },
      );
  }

  /** Whether `name` is a builtin's (or a directory script's): every tenant resolves it. */
  isBuiltin(name: string): boolean {
    return this.cache.get(`${BUILTIN}.${name}`) !== undefined;
  }

  /**
   * Installs (or, with `overwrite`, replaces) a tenant's script tool. The caller has checked the
   * script (`checkScript`); here the registry refuses a builtin's name (`builtin-name`), an
   * existing tool without `overwrite` (`conflict`, reason `exists`), a tool whose entry changed
   * while this ran (`conflict`: compare-and-set on the entry's revision), and a deployment where
   * no executor serves scripts (`executor-unregistered`). Source and contract are written first
   * (content-addressed), the tool entry last: a call can only name the contract once it resolves.
   */
  async installScript(
    tenant: string,
    script: ScriptToolRecord,
    options: { overwrite: boolean },
  ): Promise<ScriptInstall> {
    assertSubjectToken('tenant', tenant);
    if (RESERVED.has(tenant)) {
      throw new ConfigError(`${tenant} is a reserved name, not a tenant`, {
        details: { field: 'tenant' },
      });
    }
    const { tool } = script;
    if (tool.policy.executor !== 'script' || !scriptHashOfVersion(tool.version)) {
      throw new ConfigError(`${tool.name} is not a script tool`, { details: { tool: tool.name } });
    }
    if (this.isBuiltin(tool.name)) {
      throw new ConfigError(`${tool.name} is the name of a builtin tool`, {
        details: { tool: tool.name, reason: ScriptRefusalCode.BuiltinName },
      });
    }
    if (!this.cache.get(`${SERVED}.script`)) {
      throw new ToolgateError(
        ErrorCode.ExecutorUnregistered,
        'no tool-executor serves the "script" executor',
        { details: { tool: tool.name, executor: 'script' } },
      );
    }
    const key = `${tenant}.${tool.name}`;
    const previous = await this.cache.bucket().get(key);
    const existed = previous !== null && previous.operation === 'PUT';
    let replaced: string | undefined;
    if (existed) {
      if (!options.overwrite) {
        throw new ToolgateError(
          ErrorCode.Conflict,
          `${tenant} already has a tool named ${tool.name}; install with overwrite to replace it`,
          { details: { tool: tool.name, reason: ScriptRefusalCode.Exists } },
        );
      }
      replaced = storedTool(previous.json())?.contractHash;
    }
    const stored: StoredTool = { ...tool, contractHash: contractHash(tool) };
    this.assertFits(tenant, stored);
    await this.storeScript(script);
    let revision: number;
    try {
      revision = await this.cache.write(key, stored, existed ? previous.revision : 0);
    } catch (err) {
      if (!(err instanceof KvRevisionConflict)) throw err;
      throw new ToolgateError(
        ErrorCode.Conflict,
        `${tool.name} changed while it was being installed; try again`,
        { cause: err, details: { tool: tool.name } },
      );
    }
    const undo = async () => {
      if (existed) await this.cache.write(key, previous.json(), revision);
      else await this.cache.bucket().delete(key, { previousSeq: revision });
    };
    return { view: view(stored, false), ...(replaced ? { replaced } : {}), undo };
  }

  /**
   * Announces the scripts an executor loaded from its directory: offered to every tenant, like
   * builtins (`_builtin.<name>`, executor `script`). Directory scripts that are gone are removed;
   * `inventory` (what was skipped, and why) replaces the last one. Executors that share a directory
   * announce the same set.
   */
  async announceScripts(
    scripts: readonly ScriptToolRecord[],
    inventory: ScriptDirectoryInventory,
  ): Promise<void> {
    const names = new Set<string>();
    for (const script of scripts) {
      names.add(script.tool.name);
      await this.storeScript(script);
      const stored: StoredTool = { ...script.tool, contractHash: contractHash(script.tool) };
      const current = this.cache.get(`${BUILTIN}.${script.tool.name}`)?.value;
      if (current && 'contractHash' in current && current.contractHash === stored.contractHash)
        continue;
      await this.cache.write(`${BUILTIN}.${script.tool.name}`, stored);
    }
    for (const [key, entry] of this.cache.list(`${BUILTIN}.`)) {
      const value = entry.value;
      if ('contractHash' in value && value.policy.executor === 'script' && !names.has(value.name))
        await this.cache.remove(key);
    }
    await this.cache.bucket().put(`${INVENTORY}.scripts`, JSON.stringify(inventory));
  }

  /** What the scripts directory skipped when an executor last loaded it; undefined if none did. */
  async scriptDirectory(): Promise<ScriptDirectoryInventory | undefined> {
    const entry = await this.cache.bucket().get(`${INVENTORY}.scripts`);
    if (!entry || entry.operation !== 'PUT') return undefined;
    try {
      const raw = entry.json<Partial<ScriptDirectoryInventory>>();
      if (typeof raw.path !== 'string' || typeof raw.loadedAt !== 'string') return undefined;
      const skipped = SkippedScriptSchema.array().safeParse(raw.skipped);
      return {
        path: raw.path,
        loadedAt: raw.loadedAt,
        skipped: skipped.success ? skipped.data : [],
      };
    } catch {
      return undefined;
    }
  }

  /**
   * The source and sidecar whose hash is `sha256`; undefined when none was stored. Checked against
   * the hash, so what comes back is exactly what was checked when it was installed.
   */
  async scriptFiles(sha256: string): Promise<{ source: string; sidecar?: unknown } | undefined> {
    if (!/^[0-9a-f]{64}$/.test(sha256)) return undefined;
    const entry = await this.cache.bucket().get(`${SCRIPT}.${sha256}`);
    if (!entry || entry.operation !== 'PUT') return undefined;
    try {
      const raw = entry.json<{ source?: unknown; sidecar?: unknown }>();
      if (typeof raw.source !== 'string') return undefined;
      const files = { source: raw.source, sidecar: raw.sidecar ?? null };
      if (sha256Hex(canonicalJson(files)) !== sha256) return undefined;
      return raw.sidecar === undefined || raw.sidecar === null
        ? { source: raw.source }
        : { source: raw.source, sidecar: raw.sidecar };
    } catch {
      return undefined;
    }
  }

  /** Every script tool a tenant can call: the directory's (`builtin`) and its own. */
  scripts(tenant: string): ToolView[] {
    return this.list(tenant).tools.filter((t) => t.policy.executor === 'script');
  }

  private async storeScript(script: ScriptToolRecord): Promise<void> {
    const sha256 = scriptHashOfVersion(script.tool.version)!;
    await this.cache
      .bucket()
      .put(
        `${SCRIPT}.${sha256}`,
        JSON.stringify({ source: script.source, sidecar: script.sidecar ?? null }),
      );
    await this.putContract(script.tool, contractHash(script.tool));
  }

  /** Stores a tool's contract under its hash, where {@link contract} reads it back. */
  private async putContract(tool: ToolContract, hash: string): Promise<void> {
    const { name, description, parameters, version } = tool;
    await this.cache.bucket().put(
      `${CONTRACT}.${hash}`,
      JSON.stringify({
        name,
        description,
        parameters,
        ...(version === undefined ? {} : { version }),
      }),
    );
  }

  /**
   * The contract with this hash, as registered at some time by some tenant; undefined when no
   * registration ever wrote it. The stored value is checked against the hash (anyone who can write
   * the bucket could plant one), so what comes back is exactly the contract the hash names.
   */
  async contract(hash: string): Promise<ToolContract | undefined> {
    if (!/^[0-9a-f]{64}$/.test(hash)) return undefined;
    const entry = await this.cache.bucket().get(`${CONTRACT}.${hash}`);
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
   * {@link resolve}, reading the bucket itself when the mirror has neither the tenant's tool nor a
   * builtin of that name: a tool registered a moment ago (through another gateway replica, or a
   * builtin an executor announced just now) is found, not answered `unknown-tool` while the
   * mirror's watch catches up. A name nobody registered costs two reads of the bucket.
   */
  async resolveFresh(tenant: string, name: string): Promise<ToolView | undefined> {
    const cached = this.resolve(tenant, name);
    if (cached) return cached;
    const [own, builtin] = await Promise.all([
      this.readStored(`${tenant}.${name}`),
      this.readStored(`${BUILTIN}.${name}`),
    ]);
    if (own) return view(own, false);
    if (builtin) return view(builtin, true);
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
    const stored = await this.readStored(key);
    return stored?.contractHash === hash ? view(stored, false) : undefined;
  }

  /** A tool as the bucket holds it now (not the mirror), or undefined when it has none there. */
  private async readStored(key: string): Promise<StoredTool | undefined> {
    const entry = await this.cache.bucket().get(key);
    return entry?.operation === 'PUT' ? storedTool(entry.json()) : undefined;
  }

  /**
   * The last toolsetHash listed per tenant, with the cached values it was computed over: a tenant's
   * toolset changes rarely and is listed often, and hashing it canonicalises every contract (the
   * builtins' schemas too). A value is replaced, never changed, when its KV entry changes, so the
   * same values in the same order are the same contracts.
   */
  private readonly listedHashes = new Map<string, { sources: readonly object[]; hash: string }>();

  /** Every tool a tenant can call, and the toolsetHash over their contracts. */
  list(tenant: string): { tools: ToolView[]; toolsetHash: string } {
    const byName = new Map<string, { tool: ToolView; source: object }>();
    for (const [, entry] of this.cache.list(`${BUILTIN}.`)) {
      if ('contractHash' in entry.value)
        byName.set(entry.value.name, { tool: view(entry.value, true), source: entry.value });
    }
    for (const [, entry] of this.cache.list(`${tenant}.`)) {
      if ('contractHash' in entry.value)
        byName.set(entry.value.name, { tool: view(entry.value, false), source: entry.value });
    }
    const listed = [...byName.values()].sort((a, b) => (a.tool.name < b.tool.name ? -1 : 1));
    const tools = listed.map((l) => l.tool);
    const sources = listed.map((l) => l.source);
    const last = this.listedHashes.get(tenant);
    if (
      last &&
      last.sources.length === sources.length &&
      last.sources.every((s, i) => s === sources[i])
    )
      return { tools, toolsetHash: last.hash };
    const hash = toolsetHash(
      tools.map(({ name, description, parameters, version }) => ({
        name,
        description,
        parameters,
        ...(version === undefined ? {} : { version }),
      })),
    );
    this.listedHashes.set(tenant, { sources, hash });
    return { tools, toolsetHash: hash };
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
  if (executor === 'mcp' && !tool.policy.mcp) {
    throw new ConfigError(`tool ${tool.name}: an mcp tool needs policy.mcp (import it)`, {
      details: { tool: tool.name, field: 'policy.mcp' },
    });
  }
  if (executor !== 'mcp' && tool.policy.mcp) {
    throw new ConfigError(
      `tool ${tool.name}: policy.mcp is for the mcp executor, not ${executor}`,
      {
        details: { tool: tool.name, field: 'policy.mcp' },
      },
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

/** A stored tool entry with its contract hash, or undefined when it is not one. */
function storedTool(raw: unknown): StoredTool | undefined {
  const parsed = StoredToolSchema.safeParse(raw);
  return parsed.success ? { ...parsed.data, contractHash: contractHash(parsed.data) } : undefined;
}

function view(tool: StoredTool, builtin: boolean): ToolView {
  return { ...tool, builtin };
}
