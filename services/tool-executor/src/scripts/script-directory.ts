import fs from 'node:fs/promises';
import path from 'node:path';
import {
  MAX_SCRIPT_BYTES,
  ScriptRefusalCode,
  type ScriptRefusal,
  type SkippedScript,
} from '@toolgate/contracts';
import type { ScriptToolRecord } from '@toolgate/registry';
import { checkScript, type ScriptEngine, type ScriptManifest } from '@toolgate/script-tools';

/** What a scripts directory holds: the scripts that passed their checks, and the rest with reasons. */
export interface ScriptDirectory {
  loaded: { file: string; manifest: ScriptManifest; record: ScriptToolRecord }[];
  skipped: SkippedScript[];
}

/**
 * Reads every `<name>.js` in `dir` (not its subdirectories) with its `<name>.json` sidecar when
 * there is one, and checks each as an install would: the file's base name is the name `@tool` must
 * declare; builtins' names are refused. Never throws for a bad script: it is skipped with its
 * reason. A directory that cannot be read throws (a misconfiguration the operator must see).
 */
export async function loadScriptDirectory(
  dir: string,
  options: { engine: ScriptEngine; isBuiltin(name: string): boolean },
): Promise<ScriptDirectory> {
  const entries = await fs.readdir(dir, { withFileTypes: true });
  const result: ScriptDirectory = { loaded: [], skipped: [] };
  const files = entries
    .filter((e) => e.name.endsWith('.js') && (e.isFile() || e.isSymbolicLink()))
    .map((e) => e.name)
    .sort();
  for (const file of files) {
    const base = file.slice(0, -'.js'.length);
    const skip = (reason: ScriptRefusal) =>
      result.skipped.push({ file, ...(base ? { name: base } : {}), reason });
    const full = path.join(dir, file);
    let source: string;
    try {
      const stat = await fs.stat(full);
      if (!stat.isFile()) continue;
      if (stat.size > MAX_SCRIPT_BYTES) {
        skip({
          code: ScriptRefusalCode.TooLarge,
          message: `the script is ${stat.size} bytes, over the ${MAX_SCRIPT_BYTES}-byte limit`,
        });
        continue;
      }
      source = await fs.readFile(full, 'utf8');
    } catch (err) {
      skip({ code: ScriptRefusalCode.Unreadable, message: (err as Error).message });
      continue;
    }
    let sidecar: unknown;
    try {
      sidecar = JSON.parse(await fs.readFile(path.join(dir, `${base}.json`), 'utf8')) as unknown;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') {
        skip({
          code: ScriptRefusalCode.InvalidSidecar,
          message: `${base}.json: ${(err as Error).message}`,
        });
        continue;
      }
    }
    const checked = checkScript(sidecar === undefined ? { source } : { source, sidecar }, {
      expectedName: { name: base, from: 'file' },
      isBuiltin: options.isBuiltin,
      syntaxError: (text, fileName) => options.engine.syntaxError(text, fileName),
    });
    if (!checked.ok) {
      skip(checked.refusal);
      continue;
    }
    const { manifest } = checked;
    result.loaded.push({
      file,
      manifest,
      record: {
        tool: {
          ...manifest.contract,
          policy: { executor: 'script', risk: manifest.risk, needsApproval: false },
        },
        source: manifest.source,
        ...(manifest.sidecar !== undefined ? { sidecar: manifest.sidecar } : {}),
      },
    });
  }
  return result;
}
