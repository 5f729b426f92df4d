import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startTestStack, TOKENS, type TestStack } from '../support/test-stack';
import {
  startConformanceRunner,
  tokenProxy,
  type ConformanceRunner,
} from './conformance/run-conformance';

/**
 * The official conformance suite (`@modelcontextprotocol/conformance`) against Toolgate's /mcp,
 * at both revisions. The scenarios that apply to a gateway whose toolset is the tenant's run here;
 * the rest do not apply:
 * - tools-call-*, json-schema-2020-12, input-required-result-*, completion, logging, elicitation
 *   and sampling scenarios call tools (or methods) of the suite's reference server
 *   (`test_simple_text`, `test_mrtr_*`, ...) that a Toolgate tenant does not have — Toolgate's own
 *   input_required, errors and schemas are proved in mcp-server.int.spec.ts;
 * - resources-*, prompts-*, sep-2164: Toolgate serves tools only;
 * - server-session-lifecycle, server-sse-polling, resources-subscribe: 2025 sessions — /mcp is
 *   stateless on both revisions (every replica answers every request);
 * - tasks-* call the reference server's test_tool_with_task — Toolgate's tasks (2025-11-25 and
 *   the 2026-07-28 extension) are proved in mcp-tasks.int.spec.ts.
 *
 * Each scenario is the CLI's own `server --scenario` run, with its exit code and checks.json, in
 * one CLI process kept up for the file (conformance/scenario-runner.mjs): a fresh evaluation of
 * the CLI per scenario, Node.js and the CLI's dependencies loaded once instead of ten times.
 */
const SCENARIOS: readonly [scenario: string, revision: string][] = [
  ['server-initialize', '2025-11-25'],
  ['ping', '2025-11-25'],
  ['tools-list', '2025-11-25'],
  ['dns-rebinding-protection', '2025-11-25'],
  ['tools-list', '2026-07-28'],
  ['server-stateless', '2026-07-28'],
  ['http-header-validation', '2026-07-28'],
  ['dns-rebinding-protection', '2026-07-28'],
  ['server-sse-multiple-streams', '2026-07-28'],
  ['caching', '2026-07-28'],
];

/** Checks of the scenarios above that do not apply, and why: any other failure fails the test. */
const DOES_NOT_APPLY: Readonly<Record<string, string>> = {
  'sep-2575-server-rejects-undeclared-capability':
    "needs the reference server's diagnostic tool test_missing_capability",
  'sep-2575-missing-capability-http-400':
    "needs the reference server's diagnostic tool test_missing_capability",
  'sep-2575-http-server-no-independent-requests-on-stream':
    "needs the reference server's diagnostic tool test_streaming_elicitation",
  'sep-2575-server-no-log-without-loglevel':
    "needs the reference server's diagnostic tool test_logging_tool",
  'sep-2549-prompts-list-caching-hints': 'Toolgate serves no prompts (-32601 is the right answer)',
  'sep-2549-resources-list-caching-hints': 'Toolgate serves no resources',
  'sep-2549-resources-templates-list-caching-hints': 'Toolgate serves no resources',
};

interface Check {
  id: string;
  status: string;
  errorMessage?: string;
}

async function checksIn(dir: string): Promise<Check[]> {
  const all: Check[] = [];
  for (const entry of await readdir(dir, { recursive: true })) {
    if (String(entry).endsWith('checks.json')) {
      all.push(...(JSON.parse(await readFile(path.join(dir, String(entry)), 'utf8')) as Check[]));
    }
  }
  return all;
}

describe('MCP conformance suite against /mcp', () => {
  let stack: TestStack;
  let proxy: Awaited<ReturnType<typeof tokenProxy>>;
  let conformance: ConformanceRunner;

  beforeAll(async () => {
    stack = await startTestStack('mcpconf');
    // The suite's client cannot present a token: a proxy adds an agent's.
    proxy = await tokenProxy(stack.all.gateway.url, TOKENS.acmeAgent);
    conformance = startConformanceRunner();
  });
  afterAll(async () => {
    // First: its connections to the proxy end with it, and the proxy closes once they have.
    await conformance?.close();
    await proxy?.close();
    await stack?.stop();
  });

  it.each(SCENARIOS)(
    '%s at %s: no unexpected failure',
    async (scenario, revision) => {
      const dir = await mkdtemp(path.join(tmpdir(), 'toolgate-conformance-'));
      try {
        const run = await conformance.run(`${proxy.url}/mcp`, scenario, {
          specVersion: revision,
          outputDir: dir,
        });
        const checks = await checksIn(dir);
        expect(checks.some((c) => c.status === 'SUCCESS')).toBe(true);
        const unexpected = checks
          .filter((c) => c.status === 'FAILURE' && !(c.id in DOES_NOT_APPLY))
          .map((c) => `${c.id}: ${c.errorMessage ?? ''}`);
        expect(unexpected).toEqual([]);
        // A clean run exits 0; a run whose only failures do not apply exits 1.
        const failed = checks.some((c) => c.status === 'FAILURE');
        expect(run.code).toBe(failed ? 1 : 0);
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    },
    120_000,
  );
});
