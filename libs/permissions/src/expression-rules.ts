import type { Environment as CelEnvironment, ParseResult } from '@marcbachmann/cel-js' with {
  'resolution-mode': 'import',
};
import { ConfigError } from '@toolgate/contracts';

type Cel = typeof import('@marcbachmann/cel-js', { with: { 'resolution-mode': 'import' } });

/** The variables an expression sees. */
export interface ExpressionContext {
  /** The tool name. */
  readonly tool: string;
  /** The effective risk class (after overrides), `'undeclared'` when none. */
  readonly risk: string;
  /** The post-hook input, with integral numbers as CEL ints. */
  readonly input: unknown;
  /** The calling agent (`agentType`, `label`); empty strings when unknown. */
  readonly agent: Record<string, unknown>;
  /** The dispatch's taint level, `'public'` when none. */
  readonly taint: string;
  /** The call's target (the fetch host, or the context's target), `''` when none. */
  readonly target: string;
}

/** The cheap string variables, for guards. */
export type ExpressionFacts = Pick<ExpressionContext, 'tool' | 'risk' | 'taint' | 'target'>;

/** Where an expression gets its full context from, built only when the guards do not decide. */
export interface ExpressionContextSource {
  expressionContext(): ExpressionContext;
}

export type ExpressionResult =
  | { readonly value: boolean; readonly error?: undefined }
  | { readonly value?: undefined; readonly error: string };

/** A compiled boolean CEL expression. */
export interface CompiledExpression {
  readonly source: string;
  /**
   * Top-level `variable == "literal"` conjuncts: when one does not hold, the expression is false
   * without running (so a chain can leave it out for tools and risks it can never match).
   */
  readonly guards: readonly ExpressionGuard[];
  /**
   * Evaluates; `{ value }` for a boolean, `{ error }` for anything else (error or non-boolean).
   * `context.expressionContext()` is called only when the guards (`tool == "x" && ...`) do not decide.
   */
  evaluate(facts: ExpressionFacts, context: ExpressionContextSource): ExpressionResult;
}

// Shared results: evaluation runs for most calls, and a boolean needs no object of its own.
const FALSE: ExpressionResult = Object.freeze({ value: false });
const TRUE: ExpressionResult = Object.freeze({ value: true });

let environment: CelEnvironment | undefined;

function env(): CelEnvironment {
  if (environment === undefined) {
    // Loaded with the first expression, not with the module: a policy without expression rules
    // (and every process that only imports the chain) never needs it. cel-js is ESM-only; Node >=
    // 20.19 loads it through require(), and jest compiles it to CommonJS.
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const cel = require('@marcbachmann/cel-js') as Cel;
    environment = new cel.Environment({ limits: { maxAstNodes: 2_048, maxDepth: 32 } })
      .registerVariable('tool', 'string')
      .registerVariable('risk', 'string')
      .registerVariable('input', 'dyn')
      .registerVariable('agent', 'map')
      .registerVariable('taint', 'string')
      .registerVariable('target', 'string');
  }
  return environment;
}

/**
 * Parses and type-checks a CEL expression at compile time.
 * @throws ConfigError when it does not parse, does not type-check, or cannot be a boolean
 */
export function compileExpression(source: string, what: string): CompiledExpression {
  let parsed: ParseResult;
  try {
    parsed = env().parse(source);
  } catch (err) {
    throw new ConfigError(`${what}: the expression does not parse: ${firstLine(err)}`, {
      details: { expression: source },
    });
  }
  const checked = parsed.check();
  if (!checked.valid) {
    throw new ConfigError(
      `${what}: the expression does not type-check: ${firstLine(checked.error)}`,
      {
        details: { expression: source },
      },
    );
  }
  if (checked.type !== 'bool' && checked.type !== 'dyn') {
    throw new ConfigError(`${what}: the expression is of type ${checked.type}, not bool`, {
      details: { expression: source },
    });
  }
  const guards = equalityGuards(parsed.ast);
  return {
    source,
    guards,
    evaluate(facts, context) {
      // `tool == "x" && ...` is false whenever tool != "x" (CEL's && is false if any side is false,
      // even when the other errors), so the guard decides without running the interpreter.
      for (let g = 0; g < guards.length; g++) {
        const guard = guards[g]!;
        if (facts[guard.variable] !== guard.value) return FALSE;
      }
      let value: unknown;
      try {
        value = parsed(context.expressionContext() as unknown as Record<string, unknown>);
      } catch (err) {
        return { error: firstLine(err) };
      }
      return typeof value === 'boolean'
        ? value
          ? TRUE
          : FALSE
        : { error: `the expression yielded ${describe(value)}, not a boolean` };
    },
  };
}

export interface ExpressionGuard {
  readonly variable: 'tool' | 'risk' | 'taint' | 'target';
  readonly value: string;
}

/** Top-level conjuncts of the form `var == "literal"` over the string variables. */
function equalityGuards(ast: ParseResult['ast']): ExpressionGuard[] {
  const guards: ExpressionGuard[] = [];
  const visit = (node: ParseResult['ast']): void => {
    if (node.op === '&&') {
      const [l, r] = node.args as [ParseResult['ast'], ParseResult['ast']];
      visit(l);
      visit(r);
    } else if (node.op === '==') {
      const [l, r] = node.args as [ParseResult['ast'], ParseResult['ast']];
      const id = l.op === 'id' ? l : r.op === 'id' ? r : undefined;
      const lit = l.op === 'value' ? l : r.op === 'value' ? r : undefined;
      if (id !== undefined && lit !== undefined && typeof lit.args === 'string') {
        const name = id.args as string;
        if (name === 'tool' || name === 'risk' || name === 'taint' || name === 'target')
          guards.push({ variable: name, value: lit.args });
      }
    }
  };
  visit(ast);
  return guards;
}

/**
 * Converts a JSON-like value for CEL: integral numbers become ints (so `input.n + 1` works),
 * `undefined` members are dropped. Bounded; deeper structure is cut off (and then errors in CEL).
 */
export function toCelValue(value: unknown, depth = 0): unknown {
  if (typeof value === 'number') return Number.isSafeInteger(value) ? BigInt(value) : value;
  if (depth > 32 || typeof value !== 'object' || value === null) return value;
  if (Array.isArray(value)) return value.map((v) => toCelValue(v, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value))
    if (v !== undefined) out[k] = toCelValue(v, depth + 1);
  return out;
}

function firstLine(err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  return message.split('\n')[0] ?? message;
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (typeof value === 'bigint') return `int ${value}`;
  if (typeof value === 'object') return Array.isArray(value) ? 'a list' : 'a map';
  return `${typeof value} ${JSON.stringify(value)}`;
}
