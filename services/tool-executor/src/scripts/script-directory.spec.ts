import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ScriptEngine } from '@toolgate/script-tools';
import { loadScriptDirectory } from './script-directory';

let dir: string;
let engine: ScriptEngine;

beforeAll(async () => {
  engine = await ScriptEngine.load();
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'tg-scripts-'));
  const files: Record<string, string> = {
    'upper.js':
      '// @tool upper\n// @description Upper-case text\n// @param text string required "t"\nreturn params.text.toUpperCase();',
    'export.js': '// @tool export\n// @description Export\nreturn params.format;',
    'export.json': JSON.stringify({
      name: 'export',
      parameters: { type: 'object', properties: { format: { enum: ['json', 'yaml'] } } },
    }),
    'broken.js': '// @tool broken\n// @description d\nreturn (;',
    'misnamed.js': '// @tool other\n// @description d\nreturn 1;',
    'nodesc.js': '// @tool nodesc\nreturn 1;',
    'notool.js': '// @description d\nreturn 1;',
    'list_dir.js': '// @tool list_dir\n// @description d\nreturn 1;',
    'shell.js': '// @tool shell\n// @description d\nreturn 1;',
    'sidecar.js': '// @tool sidecar\n// @description d\nreturn 1;',
    'sidecar.json': JSON.stringify({ name: 'elsewhere', parameters: { type: 'object' } }),
    'badjson.js': '// @tool badjson\n// @description d\nreturn 1;',
    'badjson.json': '{ not json',
    'huge.js': `// @tool huge\n// @description d\n${'/'.repeat(256 * 1024)}`,
    'needs.js': '// @tool needs\n// @description d\n// @requires network\nreturn 1;',
    'README.md': 'not a script',
  };
  for (const [name, text] of Object.entries(files)) await fs.writeFile(path.join(dir, name), text);
  await fs.mkdir(path.join(dir, 'nested.js'));
});

afterAll(() => fs.rm(dir, { recursive: true, force: true }));

describe('loadScriptDirectory', () => {
  it('loads the scripts that pass and lists every other with its reason', async () => {
    const loaded = await loadScriptDirectory(dir, { engine, isBuiltin: (n) => n === 'list_dir' });
    expect(
      loaded.loaded.map((l) => [l.file, l.record.tool.name, l.record.tool.policy.executor]),
    ).toEqual([
      ['export.js', 'export', 'script'],
      ['upper.js', 'upper', 'script'],
    ]);
    expect(loaded.loaded[0]!.record.tool.parameters).toEqual({
      type: 'object',
      properties: { format: { enum: ['json', 'yaml'] } },
    });
    expect(Object.fromEntries(loaded.skipped.map((s) => [s.file, s.reason.code]))).toEqual({
      'badjson.js': 'invalid-sidecar',
      'broken.js': 'syntax-error',
      'huge.js': 'too-large',
      'list_dir.js': 'builtin-name',
      'misnamed.js': 'name-mismatch',
      'needs.js': 'unknown-requirement',
      'nodesc.js': 'missing-description',
      'notool.js': 'missing-tool',
      'shell.js': 'reserved-name',
      'sidecar.js': 'sidecar-name-mismatch',
    });
    for (const skipped of loaded.skipped) expect(skipped.reason.message).not.toBe('');
  });

  it('throws for a directory that cannot be read', async () => {
    await expect(
      loadScriptDirectory(path.join(dir, 'missing'), { engine, isBuiltin: () => false }),
    ).rejects.toThrow(/ENOENT/);
  });
});
