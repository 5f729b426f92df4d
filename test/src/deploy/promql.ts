import type { parser as PromqlParser } from '@prometheus-io/lezer-promql' with {
  'resolution-mode': 'import',
};

// The grammar ships ESM with a CommonJS build beside it; the types are the ESM ones.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { parser } = require('@prometheus-io/lezer-promql') as { parser: typeof PromqlParser };

/** One label matcher of a series selector: `name op "value"`. */
export interface LabelMatcher {
  name: string;
  op: '=' | '!=' | '=~' | '!~';
  value: string;
}

/** A series selector of a PromQL expression: a metric name and its label matchers. */
export interface SeriesSelector {
  metric: string;
  matchers: LabelMatcher[];
  /** The selector as written, for messages. */
  text: string;
}

/** What Grafana puts in place of its variables before the query reaches Prometheus. */
const GRAFANA_VARIABLES: Readonly<Record<string, string>> = {
  $__rate_interval: '1m',
  $__interval: '15s',
  $__range: '1h',
};

const OPS: Readonly<Record<string, LabelMatcher['op']>> = {
  EqlSingle: '=',
  Neq: '!=',
  EqlRegex: '=~',
  NeqRegex: '!~',
};

/**
 * Every series selector of a PromQL expression, read with Prometheus's own grammar
 * (`@prometheus-io/lezer-promql`, the parser of Prometheus's query editor). A syntax error throws,
 * naming where; so does a selector without a metric name, which no check here can follow.
 * Grafana's `$__…` variables are replaced first, as Grafana does.
 */
export function selectorsOf(expression: string): SeriesSelector[] {
  const expr = withGrafanaVariables(expression);
  const tree = parser.parse(expr);
  const selectors: SeriesSelector[] = [];
  const cursor = tree.cursor();
  do {
    if (cursor.type.isError) {
      throw new Error(
        `PromQL syntax error at ${cursor.from}: ${expr.slice(0, cursor.from)}⚠${expr.slice(cursor.from)}`,
      );
    }
    if (cursor.name !== 'VectorSelector') continue;
    const node = cursor.node;
    const text = expr.slice(node.from, node.to);
    const identifier = node.getChild('Identifier');
    if (!identifier) throw new Error(`selector without a metric name: ${text}`);
    const matchers: LabelMatcher[] = [];
    for (const matcher of node.getChild('LabelMatchers')?.getChildren('UnquotedLabelMatcher') ??
      []) {
      const name = matcher.getChild('LabelName');
      const op = matcher.getChild('MatchOp')?.firstChild;
      const value = matcher.getChild('StringLiteral');
      if (!name || !op || !value || !OPS[op.name]) throw new Error(`unreadable matcher in ${text}`);
      matchers.push({
        name: expr.slice(name.from, name.to),
        op: OPS[op.name]!,
        value: unquote(expr.slice(value.from, value.to)),
      });
    }
    if (node.getChild('LabelMatchers')?.getChild('QuotedLabelMatcher'))
      throw new Error(`quoted label names are not followed here: ${text}`);
    selectors.push({ metric: expr.slice(identifier.from, identifier.to), matchers, text });
  } while (cursor.next());
  return selectors;
}

/** A dashboard query as Prometheus receives it: Grafana's `$__…` variables replaced. */
export function withGrafanaVariables(expression: string): string {
  let expr = expression;
  for (const [name, value] of Object.entries(GRAFANA_VARIABLES))
    expr = expr.split(name).join(value);
  return expr;
}

/** A PromQL string literal's value: "…" and '…' with escapes, `…` raw. */
function unquote(literal: string): string {
  const quote = literal[0];
  const body = literal.slice(1, -1);
  if (quote === '`') return body;
  if (quote === "'")
    return JSON.parse(`"${body.replace(/\\'/g, "'").replace(/"/g, '\\"')}"`) as string;
  return JSON.parse(literal) as string;
}

/** Whether a sample's labels satisfy every matcher, as Prometheus reads them (absent = ""). */
export function matchesLabels(
  matchers: readonly LabelMatcher[],
  labels: Record<string, string>,
): boolean {
  return matchers.every(({ name, op, value }) => {
    const actual = labels[name] ?? '';
    switch (op) {
      case '=':
        return actual === value;
      case '!=':
        return actual !== value;
      case '=~':
        return new RegExp(`^(?:${value})$`).test(actual);
      case '!~':
        return !new RegExp(`^(?:${value})$`).test(actual);
    }
  });
}
