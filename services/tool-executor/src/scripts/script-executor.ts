import {
  ErrorCode,
  scriptHashOfVersion,
  ToolgateError,
  toWireError,
  type ScriptHostFunction,
  type ToolContract,
} from '@toolgate/contracts';
import type { ToolRegistry } from '@toolgate/registry';
import { checkScript, type ScriptEngine, type ScriptLimits } from '@toolgate/script-tools';
import { runTool, tool, type ToolDef, type ToolRunOutcome } from '@toolgate/tools';
import {
  failedOutcome,
  STOP_GRACE_MS,
  type CallExecutor,
  type CallRun,
  type FailedOutcome,
} from '../execution/call-executor';
import { callScope } from '../execution/call-scope';
import type { PendingCall } from '../execution/pending-call';
import { toolContext, type ServiceLog } from '../execution/tool-context';
import { scriptHostFunctions, type DecideHostCall } from './script-host';

/** The registry reads the script executor needs: a contract by hash, a script's files by hash. */
export type ScriptSource = Pick<ToolRegistry, 'contract' | 'scriptFiles'>;

export interface ScriptExecutorOptions {
  engine: ScriptEngine;
  registry: () => Promise<ScriptSource>;
  /** The builtins host functions run through (read_file, write_file, http_fetch, shell). */
  builtins: ReadonlyMap<string, ToolDef>;
  /** The chain's decision on each host call; absent, every host call is refused. */
  decideHostCall?: DecideHostCall;
  limits?: Partial<ScriptLimits>;
  log?: ServiceLog;
}

/** A script version ready to run: its checked contract and what it may call. */
interface CompiledScript {
  def: ToolDef;
  requires: readonly ScriptHostFunction[];
}

/** Compiled versions kept; a version never changes under its contract hash, so none goes stale. */
const MAX_COMPILED = 1024;

/**
 * The `script` executor. A call names its script by the contract hash it was decided on; the
 * contract's version is `script:<sha256>` of the source and sidecar, read from the registry,
 * checked against that hash and checked again as at install (a version that no longer passes does
 * not run). Each version is checked and compiled once and kept by contract hash, so a call runs
 * the version it was submitted against from start to end, whatever is installed meanwhile. Input
 * arrives validated; the script runs in a fresh QuickJS runtime in one of the engine's worker
 * threads (`ScriptEngine`), off this service's event loop, with only the host functions its
 * `@requires` names, each decided by the permission chain and run as its builtin on this thread.
 */
export class ScriptExecutor implements CallExecutor {
  private readonly compiled = new Map<string, CompiledScript>();

  constructor(private readonly options: ScriptExecutorOptions) {}

  async run(call: PendingCall, { cwd, timeoutMs, signal }: CallRun): Promise<ToolRunOutcome> {
    try {
      const compiled = await this.compile(call);
      if ('ok' in compiled) return compiled;
      const ctx = toolContext(call, cwd, this.options.log, signal);
      return await callScope.run(call, () =>
        runTool(compiled.def, call.input, ctx, { timeoutMs, stopGraceMs: STOP_GRACE_MS }),
      );
    } catch (err) {
      return { ok: false, error: toWireError(err) };
    }
  }

  /** The version a call names, checked and compiled once per contract hash. */
  private async compile(call: PendingCall): Promise<CompiledScript | FailedOutcome> {
    const hash = call.tool.contractHash;
    const cached = this.compiled.get(hash);
    if (cached) return cached;
    const name = call.tool.name;
    let contract: ToolContract | undefined;
    let files: { source: string; sidecar?: unknown } | undefined;
    try {
      const registry = await this.options.registry();
      contract = await registry.contract(hash);
      const sha = scriptHashOfVersion(contract?.version);
      if (contract && sha) files = await registry.scriptFiles(sha);
    } catch {
      return failedOutcome(ErrorCode.Unavailable, `the script of ${name} could not be read`);
    }
    if (!contract || contract.name !== name || !files) {
      return failedOutcome(
        ErrorCode.UnknownTool,
        `no script is stored for ${name} under contract ${hash}: it does not run`,
      );
    }
    const { engine } = this.options;
    const checked = checkScript(files, {
      expectedName: { name, from: 'install' },
      isBuiltin: () => false,
      syntaxError: (source, fileName) => engine.syntaxError(source, fileName),
    });
    if (!checked.ok) {
      return failedOutcome(
        ErrorCode.Config,
        `the stored script of ${name} no longer passes its checks: ${checked.refusal.message}`,
      );
    }
    const { manifest } = checked;
    if (manifest.contractHash !== hash) {
      return failedOutcome(
        ErrorCode.Config,
        `the stored script of ${name} does not make contract ${hash}`,
      );
    }
    const { builtins, decideHostCall, limits } = this.options;
    const fileName = `${name}.js`;
    const source = manifest.source;
    const requires = manifest.requires;
    const compiled: CompiledScript = {
      requires,
      def: tool({
        name,
        description: manifest.contract.description,
        parameters: manifest.contract.parameters,
        ...(manifest.contract.version ? { version: manifest.contract.version } : {}),
        risk: manifest.risk,
        executor: 'script',
        // Compiled once for every call of this version: the call itself comes from the scope
        // `run` opens, never from the call that happened to compile it.
        execute: (input, ctx) => {
          const current = callScope.getStore();
          if (!current) throw new ToolgateError(ErrorCode.Internal, `${name} ran outside a call`);
          return engine.run({
            source,
            fileName,
            params: input,
            host: scriptHostFunctions(requires, {
              call: current,
              ctx,
              builtins,
              ...(decideHostCall ? { decide: decideHostCall } : {}),
            }),
            ...(limits ? { limits } : {}),
            signal: ctx.signal,
          });
        },
      }),
    };
    this.compiled.set(hash, compiled);
    if (this.compiled.size > MAX_COMPILED) {
      this.compiled.delete(this.compiled.keys().next().value as string);
    }
    return compiled;
  }
}
