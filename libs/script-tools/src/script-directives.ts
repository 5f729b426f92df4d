import {
  SCRIPT_HOST_FUNCTIONS,
  ScriptRefusalCode,
  TOOL_NAME_PATTERN,
  type ScriptHostFunction,
  type ScriptRefusal,
} from '@toolgate/contracts';

/** The JSON Schema types a `@param` may name. */
const PARAM_TYPES = ['string', 'integer', 'number', 'boolean', 'array', 'object'] as const;
export type ParamType = (typeof PARAM_TYPES)[number];

/** One `// @param name type required|optional "description"`. */
export interface ParamDirective {
  name: string;
  type: ParamType;
  required: boolean;
  description?: string;
}

/** What a script's leading directives declare. */
export interface ScriptDirectives {
  tool?: string;
  description?: string;
  params: ParamDirective[];
  requires: ScriptHostFunction[];
}

/** A parameter name: an identifier, so `params.<name>` reads it; never one of the prototype keys. */
const PARAM_NAME = /^[A-Za-z_$][A-Za-z0-9_$]{0,63}$/;
const FORBIDDEN_PARAM_NAMES: ReadonlySet<string> = new Set([
  '__proto__',
  'constructor',
  'prototype',
]);
const DIRECTIVE = /^\/\/\s*@([A-Za-z]+)(?:\s+(.*))?$/;
const HOST_FUNCTIONS: ReadonlySet<string> = new Set(SCRIPT_HOST_FUNCTIONS);

/**
 * Reads the directives of a script: `// @` lines in its leading comment block (the lines before
 * the first one that is neither blank nor a `//` comment; a `// @tool` further down is code's
 * business, not a declaration). Pure. Returns the first problem as a refusal:
 * `invalid-directive` for an unknown directive, a repeated `@tool`, a malformed `@param` (unknown
 * type, missing `required|optional`, a repeated or non-identifier name) and `unknown-requirement`
 * for a `@requires` that names no host function. `@description` may span several lines (joined).
 */
export function parseScriptDirectives(
  source: string,
): { ok: true; directives: ScriptDirectives } | { ok: false; refusal: ScriptRefusal } {
  const directives: ScriptDirectives = { params: [], requires: [] };
  const descriptions: string[] = [];
  const lines = source.split(/\r?\n/);
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!.trim();
    if (line === '') continue;
    if (!line.startsWith('//')) break;
    const match = DIRECTIVE.exec(line);
    if (!match) continue;
    const [, name, rest = ''] = match as unknown as [string, string, string | undefined];
    const value = rest.trim();
    const at = `line ${i + 1}`;
    const invalid = (message: string) =>
      refuse(ScriptRefusalCode.InvalidDirective, `${at}: ${message}`);
    switch (name) {
      case 'tool':
        if (directives.tool !== undefined) return invalid('@tool is declared twice');
        if (!TOOL_NAME_PATTERN.test(value))
          return invalid(
            `@tool ${JSON.stringify(value)} is not a tool name (^[a-zA-Z0-9_-]{1,64}$)`,
          );
        directives.tool = value;
        break;
      case 'description':
        if (value === '') return invalid('@description is empty');
        descriptions.push(value);
        break;
      case 'param': {
        const param = parseParam(value);
        if (typeof param === 'string') return invalid(param);
        if (directives.params.some((p) => p.name === param.name))
          return invalid(`@param ${param.name} is declared twice`);
        directives.params.push(param);
        break;
      }
      case 'requires': {
        const names = value.split(/[\s,]+/).filter((n) => n !== '');
        if (names.length === 0) return invalid('@requires names nothing');
        for (const required of names) {
          if (!HOST_FUNCTIONS.has(required)) {
            return refuse(
              ScriptRefusalCode.UnknownRequirement,
              `${at}: @requires ${JSON.stringify(required)} is not a host function (${SCRIPT_HOST_FUNCTIONS.join(', ')})`,
            );
          }
          const fn = required as ScriptHostFunction;
          if (!directives.requires.includes(fn)) directives.requires.push(fn);
        }
        break;
      }
      default:
        return invalid(
          `unknown directive @${name} (known: @tool, @description, @param, @requires)`,
        );
    }
  }
  if (descriptions.length > 0) directives.description = descriptions.join(' ');
  return { ok: true, directives };
}

/** `name type required|optional [description]`: the param, or what is wrong with it. */
function parseParam(value: string): ParamDirective | string {
  const match = /^(\S+)\s+(\S+)\s+(\S+)(?:\s+(.*))?$/.exec(value);
  if (!match)
    return `@param needs: name type required|optional "description", got ${JSON.stringify(value)}`;
  const [, name, type, presence, rawDescription] = match as unknown as [
    string,
    string,
    string,
    string,
    string | undefined,
  ];
  if (!PARAM_NAME.test(name) || FORBIDDEN_PARAM_NAMES.has(name))
    return `@param name ${JSON.stringify(name)} is not an identifier`;
  if (!(PARAM_TYPES as readonly string[]).includes(type))
    return `@param ${name}: type ${JSON.stringify(type)} is not one of ${PARAM_TYPES.join(', ')}`;
  if (presence !== 'required' && presence !== 'optional')
    return `@param ${name}: expected required or optional, got ${JSON.stringify(presence)}`;
  const description = unquote(rawDescription?.trim() ?? '');
  return {
    name,
    type: type as ParamType,
    required: presence === 'required',
    ...(description ? { description } : {}),
  };
}

function unquote(text: string): string {
  if (text.length >= 2 && text.startsWith('"') && text.endsWith('"')) return text.slice(1, -1);
  return text;
}

function refuse(
  code: ScriptRefusal['code'],
  message: string,
): { ok: false; refusal: ScriptRefusal } {
  return { ok: false, refusal: { code, message } };
}

/** The parameters JSON Schema the `@param`s declare: an object with exactly those properties. */
export function paramsSchema(params: readonly ParamDirective[]): Record<string, unknown> {
  const properties: Record<string, unknown> = {};
  for (const p of params) {
    properties[p.name] = { type: p.type, ...(p.description ? { description: p.description } : {}) };
  }
  const required = params.filter((p) => p.required).map((p) => p.name);
  return {
    type: 'object',
    properties,
    ...(required.length > 0 ? { required } : {}),
    additionalProperties: false,
  };
}
