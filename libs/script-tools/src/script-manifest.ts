import {
  canonicalJson,
  compileJsonSchema,
  contractHash,
  MAX_SCRIPT_BYTES,
  SCRIPT_HOST_FUNCTIONS,
  ScriptRefusalCode,
  ScriptSidecarSchema,
  scriptVersion,
  sha256Hex,
  ToolContractSchema,
  type Risk,
  type ScriptHostFunction,
  type ScriptRefusal,
  type ToolContract,
} from '@toolgate/contracts';
import { paramsSchema, parseScriptDirectives } from './script-directives';

/** A script as it is installed or found on disk: its source, and its sidecar when it has one. */
export interface ScriptFiles {
  source: string;
  /** The parsed JSON of the sidecar (`<name>.json`), when there is one. */
  sidecar?: unknown;
}

/** A script that passed every check: its contract (hashed like any tool's) and what it needs. */
export interface ScriptManifest {
  contract: ToolContract;
  contractHash: string;
  /** sha256 of the canonical `{ source, sidecar }`: the contract's version is `script:<sha256>`. */
  sha256: string;
  requires: ScriptHostFunction[];
  /** The least risk a tool with these host functions has (see {@link riskOfRequires}). */
  risk: Risk;
  source: string;
  sidecar?: ScriptFiles['sidecar'];
  /** Accepted but probably a mistake (unknown schema keywords, a sidecar beside `@param`s). */
  warnings: string[];
}

export interface ScriptCheckOptions {
  /**
   * The name the script must declare: the name it is installed under, or its file's base name.
   * `from` says which, for the message.
   */
  expectedName: { name: string; from: 'install' | 'file' };
  /** Whether a name is a builtin's (or, for an install, a directory script's). */
  isBuiltin(name: string): boolean;
  /** The compile error of `source`, or null (QuickJS, `ScriptEngine.syntaxError`). */
  syntaxError(source: string, fileName: string): string | null;
}

export type ScriptCheck =
  { ok: true; manifest: ScriptManifest } | { ok: false; refusal: ScriptRefusal };

/** Names a script may not take although they are not builtins: host functions, `_…`, `toolgate…`. */
function isReservedScriptName(name: string): boolean {
  return (
    (SCRIPT_HOST_FUNCTIONS as readonly string[]).includes(name) ||
    name.startsWith('_') ||
    /^toolgate/i.test(name)
  );
}

const RISK_BY_HOST_FUNCTION: Readonly<Record<ScriptHostFunction, Risk>> = {
  read_file: 'read',
  http_get: 'network',
  write_file: 'write',
  shell: 'execute',
};
const RISK_ORDER: readonly Risk[] = ['read', 'network', 'write', 'execute', 'destructive'];

/**
 * The risk a script tool has at least: that of the most powerful host function it requires, in
 * the order read < network < write < execute (a script with none reads nothing and is `read`).
 * Each host call is also decided on its own by the chain; this is the risk the call to the script
 * itself is decided with.
 */
export function riskOfRequires(requires: readonly ScriptHostFunction[]): Risk {
  let risk: Risk = 'read';
  for (const fn of requires) {
    const r = RISK_BY_HOST_FUNCTION[fn];
    if (RISK_ORDER.indexOf(r) > RISK_ORDER.indexOf(risk)) risk = r;
  }
  return risk;
}

/** Whether an installer's `risk` does not hide what the script can do (equal, or ranked above). */
export function riskCovers(given: Risk, derived: Risk): boolean {
  if (given === derived || derived === 'read' || given === 'destructive') return true;
  if (given === 'execute') return derived !== 'destructive';
  return false;
}

/**
 * Checks a script the way install and load both do, in this order, and returns the first refusal:
 * size (`too-large`), `syntax-error`, directives (`invalid-directive`, `unknown-requirement`),
 * `missing-tool`, `missing-description`, `name-mismatch`, `reserved-name`, `builtin-name`, the
 * sidecar (`invalid-sidecar`, `sidecar-name-mismatch`) and the parameters schema
 * (`invalid-schema`). Overwriting is the installer's check (`exists`): it needs the registry.
 */
export function checkScript(files: ScriptFiles, options: ScriptCheckOptions): ScriptCheck {
  const { source } = files;
  const { name: expected, from } = options.expectedName;
  const fileName = `${expected}.js`;
  const bytes = Buffer.byteLength(source, 'utf8');
  if (bytes > MAX_SCRIPT_BYTES) {
    return refuse(
      ScriptRefusalCode.TooLarge,
      `the script is ${bytes} bytes, over the ${MAX_SCRIPT_BYTES}-byte limit`,
    );
  }
  const syntax = options.syntaxError(source, fileName);
  if (syntax !== null) return refuse(ScriptRefusalCode.SyntaxError, syntax);
  const parsed = parseScriptDirectives(source);
  if (!parsed.ok) return parsed;
  const { directives } = parsed;
  if (directives.tool === undefined)
    return refuse(ScriptRefusalCode.MissingTool, 'the script has no // @tool <name> directive');
  if (directives.description === undefined) {
    return refuse(
      ScriptRefusalCode.MissingDescription,
      'the script has no // @description <text> directive',
    );
  }
  const name = directives.tool;
  if (name !== expected) {
    return refuse(
      ScriptRefusalCode.NameMismatch,
      from === 'install'
        ? `the script declares @tool ${name} but is installed as ${expected}`
        : `the script declares @tool ${name} but its file is ${fileName}`,
    );
  }
  if (isReservedScriptName(name)) {
    return refuse(
      ScriptRefusalCode.ReservedName,
      `${name} is reserved (host function names, names starting with _ or toolgate)`,
    );
  }
  if (options.isBuiltin(name))
    return refuse(ScriptRefusalCode.BuiltinName, `${name} is the name of a builtin tool`);

  const warnings: string[] = [];
  let parameters: Record<string, unknown>;
  if (files.sidecar !== undefined) {
    const sidecar = ScriptSidecarSchema.safeParse(files.sidecar);
    if (!sidecar.success) {
      return refuse(
        ScriptRefusalCode.InvalidSidecar,
        `the sidecar must be { "name", "parameters" } and nothing else: ${sidecar.error.issues
          .map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`)
          .join('; ')}`,
      );
    }
    if (sidecar.data.name !== name) {
      return refuse(
        ScriptRefusalCode.SidecarNameMismatch,
        `the sidecar names ${sidecar.data.name} but the script declares @tool ${name}`,
      );
    }
    parameters = sidecar.data.parameters;
    if (directives.params.length > 0)
      warnings.push('the sidecar replaces the @param directives, which are ignored');
  } else {
    parameters = paramsSchema(directives.params);
  }
  try {
    warnings.push(...compileJsonSchema(parameters, `script ${name} parameters`).warnings);
  } catch (err) {
    return refuse(ScriptRefusalCode.InvalidSchema, (err as Error).message);
  }
  const sha256 = sha256Hex(canonicalJson({ source, sidecar: files.sidecar ?? null }));
  const contract = ToolContractSchema.safeParse({
    name,
    description: directives.description,
    parameters,
    version: scriptVersion(sha256),
  });
  if (!contract.success) {
    return refuse(
      ScriptRefusalCode.InvalidDirective,
      contract.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; '),
    );
  }
  return {
    ok: true,
    manifest: {
      contract: contract.data,
      contractHash: contractHash(contract.data),
      sha256,
      requires: directives.requires,
      risk: riskOfRequires(directives.requires),
      source,
      ...(files.sidecar !== undefined ? { sidecar: files.sidecar } : {}),
      warnings,
    },
  };
}

function refuse(
  code: ScriptRefusal['code'],
  message: string,
): { ok: false; refusal: ScriptRefusal } {
  return { ok: false, refusal: { code, message } };
}
