import { randomUUID } from 'node:crypto';
import type { JournalPublisher } from '@toolgate/bus';
import {
  ConfigError,
  ErrorCode,
  InstallScriptRequestSchema,
  journalEvent,
  SCRIPTS_RUN_ID,
  ScriptRefusalCode,
  scriptHashOfVersion,
  ToolgateError,
  ToolPolicySchema,
  type InstallScriptResponse,
  type RegisteredTool,
  type ScriptEntry,
  type ScriptInventory,
  type ScriptRefusal,
  type ToolView,
} from '@toolgate/contracts';
import type { ToolRegistry } from '@toolgate/registry';
import {
  checkScript,
  parseScriptDirectives,
  riskCovers,
  ScriptEngine,
} from '@toolgate/script-tools';
import { parseRequest } from '../api/parse-request';
import type { Principal } from '../auth/token-auth';

/**
 * Installs script tools (`tools.scripts.install`, admin) and lists them (`tools.scripts`). An
 * install is checked as the executor will check it (QuickJS compiles it; directives, names,
 * sidecar, schema), stored in the registry (compare-and-set, so `overwrite` means what it says),
 * then journaled as `script-installed`; when the journal refuses the event, the registry entry is
 * put back and the install fails, so nothing is installed that the journal does not record.
 */
export class ScriptInstaller {
  private engine: Promise<ScriptEngine> | undefined;

  constructor(
    private readonly registry: ToolRegistry,
    private readonly publisher: JournalPublisher,
    private readonly now: () => Date,
  ) {}

  async install(principal: Principal, body: unknown): Promise<InstallScriptResponse> {
    const req = parseRequest(InstallScriptRequestSchema, body);
    // Loaded on the first install: most gateways never compile a script.
    const engine = await (this.engine ??= ScriptEngine.load());
    const checked = checkScript(
      req.sidecar === undefined
        ? { source: req.source }
        : { source: req.source, sidecar: req.sidecar },
      {
        expectedName: { name: req.name, from: 'install' },
        isBuiltin: (name) => this.registry.isBuiltin(name),
        syntaxError: (source, fileName) => engine.syntaxError(source, fileName),
      },
    );
    if (!checked.ok) throw refusalError(req.name, checked.refusal);
    const { manifest } = checked;
    const risk = req.policy?.risk ?? manifest.risk;
    if (!riskCovers(risk, manifest.risk)) {
      throw new ConfigError(
        `script ${req.name}: risk ${risk} hides what it requires (${manifest.requires.join(', ')}: at least ${manifest.risk})`,
        { details: { tool: req.name, field: 'policy.risk' } },
      );
    }
    const tool: RegisteredTool = {
      ...manifest.contract,
      policy: ToolPolicySchema.parse({ ...req.policy, risk, executor: 'script' }),
    };
    const installed = await this.registry.installScript(
      principal.tenant,
      {
        tool,
        source: manifest.source,
        ...(manifest.sidecar !== undefined ? { sidecar: manifest.sidecar } : {}),
      },
      { overwrite: req.overwrite },
    );
    try {
      await this.publisher.append(
        journalEvent({
          type: 'script-installed',
          id: `script-installed:${req.name}:${randomUUID()}`,
          tenant: principal.tenant,
          runId: SCRIPTS_RUN_ID,
          dispatchId: req.name,
          at: this.now().toISOString(),
          causationId: null,
          toolName: req.name,
          contractHash: manifest.contractHash,
          sha256: manifest.sha256,
          requires: manifest.requires,
          risk,
          ...(installed.replaced ? { replaced: installed.replaced } : {}),
          installedBy: principal.identity,
        }),
      );
    } catch (err) {
      await installed.undo().catch(() => undefined);
      throw err;
    }
    return {
      script: entry(installed.view, manifest.requires, manifest.sha256),
      ...(installed.replaced ? { replaced: installed.replaced } : {}),
      toolsetHash: this.registry.list(principal.tenant).toolsetHash,
      warnings: manifest.warnings,
    };
  }

  /** The script tools a tenant can call, and what the scripts directory skipped. */
  async inventory(principal: Principal): Promise<ScriptInventory> {
    const loaded: ScriptEntry[] = [];
    for (const view of this.registry.scripts(principal.tenant)) {
      const sha = scriptHashOfVersion(view.version);
      if (!sha) continue;
      const files = await this.registry.scriptFiles(sha);
      const parsed = files ? parseScriptDirectives(files.source) : undefined;
      loaded.push(entry(view, parsed?.ok ? parsed.directives.requires : [], sha));
    }
    const directory = await this.registry.scriptDirectory();
    return {
      loaded,
      skipped: directory?.skipped ?? [],
      ...(directory ? { directory: { path: directory.path, loadedAt: directory.loadedAt } } : {}),
    };
  }
}

function entry(view: ToolView, requires: ScriptEntry['requires'], sha256: string): ScriptEntry {
  return {
    name: view.name,
    description: view.description,
    parameters: view.parameters,
    requires: [...requires],
    risk: view.policy.risk ?? 'read',
    sha256,
    contractHash: view.contractHash,
    origin: view.builtin ? 'directory' : 'installed',
    ...(view.builtin ? { file: `${view.name}.js` } : {}),
  };
}

/** A refused install as a typed error: `too-large` for the size, `config` for the rest. */
function refusalError(name: string, refusal: ScriptRefusal): ToolgateError {
  const options = { details: { tool: name, reason: refusal.code } };
  const message = `script ${name} refused (${refusal.code}): ${refusal.message}`;
  return refusal.code === ScriptRefusalCode.TooLarge
    ? new ToolgateError(ErrorCode.TooLarge, message, options)
    : new ConfigError(message, options);
}
