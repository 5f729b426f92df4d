import { contractHash, ScriptRefusalCode, scriptHashOfVersion } from '@toolgate/contracts';
import { parseScriptDirectives } from './script-directives';
import {
  checkScript,
  riskCovers,
  riskOfRequires,
  type ScriptCheckOptions,
} from './script-manifest';

const UPPER = [
  '// @tool upper',
  '// @description Upper-case text',
  '// @param text string required "input to transform"',
  '// @param times integer optional how many times',
  'return params.text.toUpperCase();',
].join('\n');

const noSyntaxError = () => null;
function options(name = 'upper', extra: Partial<ScriptCheckOptions> = {}): ScriptCheckOptions {
  return {
    expectedName: { name, from: 'install' },
    isBuiltin: (n) => n === 'read_file' || n === 'list_dir',
    syntaxError: noSyntaxError,
    ...extra,
  };
}

function refusal(source: string, opts = options(), sidecar?: unknown) {
  const checked = checkScript(sidecar === undefined ? { source } : { source, sidecar }, opts);
  if (checked.ok) throw new Error('expected a refusal');
  return checked.refusal;
}

describe('parseScriptDirectives', () => {
  it('reads @tool, @description (joined over lines), @param and @requires (comma or space, repeatable)', () => {
    const parsed = parseScriptDirectives(
      [
        '',
        '// @tool fetch_text',
        '//   @description Fetch a URL',
        '// @description and return its text',
        '// a plain comment',
        '// @param url string required "the URL"',
        '// @param verbose boolean optional',
        '// @requires http_get, read_file',
        '// @requires shell http_get',
        'const x = 1; // @tool not_a_directive',
        '// @tool after_code',
      ].join('\n'),
    );
    expect(parsed).toEqual({
      ok: true,
      directives: {
        tool: 'fetch_text',
        description: 'Fetch a URL and return its text',
        params: [
          { name: 'url', type: 'string', required: true, description: 'the URL' },
          { name: 'verbose', type: 'boolean', required: false },
        ],
        requires: ['http_get', 'read_file', 'shell'],
      },
    });
  });

  it.each([
    ['// @tool a\n// @tool b', /declared twice/],
    ['// @tool a b', /not a tool name/],
    ['// @param x strng required', /type "strng"/],
    ['// @param x string', /needs: name type required\|optional/],
    ['// @param x string maybe', /expected required or optional/],
    ['// @param __proto__ object optional', /not an identifier/],
    ['// @param x string required\n// @param x number optional', /declared twice/],
    ['// @accepts image/png', /unknown directive @accepts/],
    ['// @description', /empty/],
  ])('refuses %j as invalid-directive', (source, message) => {
    const parsed = parseScriptDirectives(source);
    expect(parsed).toEqual({
      ok: false,
      refusal: {
        code: ScriptRefusalCode.InvalidDirective,
        message: expect.stringMatching(message),
      },
    });
  });

  it('refuses a @requires that names no host function', () => {
    expect(parseScriptDirectives('// @requires network')).toEqual({
      ok: false,
      refusal: {
        code: ScriptRefusalCode.UnknownRequirement,
        message: expect.stringMatching(/"network" is not a host function/),
      },
    });
  });
});

describe('checkScript', () => {
  it('makes a contract from the directives, versioned by the content hash', () => {
    const checked = checkScript({ source: UPPER }, options());
    if (!checked.ok) throw new Error(checked.refusal.message);
    const { manifest } = checked;
    expect(manifest.contract).toEqual({
      name: 'upper',
      description: 'Upper-case text',
      parameters: {
        type: 'object',
        properties: {
          text: { type: 'string', description: 'input to transform' },
          times: { type: 'integer', description: 'how many times' },
        },
        required: ['text'],
        additionalProperties: false,
      },
      version: `script:${manifest.sha256}`,
    });
    expect(scriptHashOfVersion(manifest.contract.version)).toBe(manifest.sha256);
    expect(manifest.contractHash).toBe(contractHash(manifest.contract));
    expect(manifest.requires).toEqual([]);
    expect(manifest.risk).toBe('read');
  });

  it('changes the contract hash when only the code changes', () => {
    const a = checkScript({ source: UPPER }, options());
    const b = checkScript({ source: `${UPPER}\n// a comment` }, options());
    if (!a.ok || !b.ok) throw new Error('expected both to pass');
    expect(a.manifest.contractHash).not.toBe(b.manifest.contractHash);
  });

  it('takes the parameters from a sidecar, which must name the same tool', () => {
    const parameters = {
      type: 'object',
      properties: { format: { enum: ['json', 'yaml'] } },
      required: ['format'],
    };
    const checked = checkScript(
      { source: UPPER, sidecar: { name: 'upper', parameters } },
      options(),
    );
    if (!checked.ok) throw new Error(checked.refusal.message);
    expect(checked.manifest.contract.parameters).toEqual(parameters);
    expect(checked.manifest.warnings).toContain(
      'the sidecar replaces the @param directives, which are ignored',
    );
    expect(refusal(UPPER, options(), { name: 'other', parameters })).toEqual({
      code: ScriptRefusalCode.SidecarNameMismatch,
      message: 'the sidecar names other but the script declares @tool upper',
    });
    expect(refusal(UPPER, options(), { name: 'upper', parameters, extra: 1 }).code).toBe(
      ScriptRefusalCode.InvalidSidecar,
    );
    expect(refusal(UPPER, options(), ['not', 'an', 'object']).code).toBe(
      ScriptRefusalCode.InvalidSidecar,
    );
    expect(refusal(UPPER, options(), { name: 'upper', parameters: { type: 'text' } }).code).toBe(
      ScriptRefusalCode.InvalidSchema,
    );
  });

  it('refuses each problem with its reason', () => {
    const body = 'return 1;';
    expect(refusal('x'.repeat(256 * 1024 + 1)).code).toBe(ScriptRefusalCode.TooLarge);
    expect(
      refusal(
        UPPER,
        options('upper', { syntaxError: () => 'SyntaxError: unexpected token (upper.js:3)' }),
      ),
    ).toEqual({
      code: ScriptRefusalCode.SyntaxError,
      message: 'SyntaxError: unexpected token (upper.js:3)',
    });
    expect(refusal(`// @description d\n${body}`).code).toBe(ScriptRefusalCode.MissingTool);
    expect(refusal(`// @tool upper\n${body}`).code).toBe(ScriptRefusalCode.MissingDescription);
    expect(refusal(UPPER, options('lower'))).toEqual({
      code: ScriptRefusalCode.NameMismatch,
      message: 'the script declares @tool upper but is installed as lower',
    });
    expect(
      refusal(UPPER, { ...options('lower'), expectedName: { name: 'lower', from: 'file' } })
        .message,
    ).toBe('the script declares @tool upper but its file is lower.js');
    for (const name of ['http_get', 'shell', '_internal', 'toolgate_admin']) {
      expect(refusal(`// @tool ${name}\n// @description d\n${body}`, options(name)).code).toBe(
        ScriptRefusalCode.ReservedName,
      );
    }
    expect(refusal(`// @tool list_dir\n// @description d\n${body}`, options('list_dir')).code).toBe(
      ScriptRefusalCode.BuiltinName,
    );
    expect(refusal(`// @tool upper\n// @description d\n// @requires network\n${body}`).code).toBe(
      ScriptRefusalCode.UnknownRequirement,
    );
  });
});

describe('risk', () => {
  it('is the most powerful host function’s, read < network < write < execute', () => {
    expect(riskOfRequires([])).toBe('read');
    expect(riskOfRequires(['read_file'])).toBe('read');
    expect(riskOfRequires(['http_get', 'read_file'])).toBe('network');
    expect(riskOfRequires(['http_get', 'write_file'])).toBe('write');
    expect(riskOfRequires(['shell', 'read_file'])).toBe('execute');
  });

  it('may be declared higher, never lower or sideways', () => {
    expect(riskCovers('write', 'read')).toBe(true);
    expect(riskCovers('execute', 'write')).toBe(true);
    expect(riskCovers('destructive', 'execute')).toBe(true);
    expect(riskCovers('read', 'network')).toBe(false);
    expect(riskCovers('network', 'write')).toBe(false);
    expect(riskCovers('write', 'execute')).toBe(false);
  });
});
