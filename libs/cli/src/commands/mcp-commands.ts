import type { Command } from 'commander';
import {
  McpServerNameSchema,
  RiskSchema,
  type ImportMcpToolsResponse,
  type Risk,
} from '@toolgate/contracts';
import { renderTable } from '../format/table-format';
import type { CommandContext } from '../run-cli';
import { parseDuration, UsageError } from './cli-input';

const collect = (value: string, previous: string[] = []) => [...previous, value];

/** `--risk <tool>=<risk>`, repeatable: checked here so a typo is a usage error, not a round trip. */
function parseRisks(pairs: readonly string[]): Record<string, Risk> | undefined {
  if (pairs.length === 0) return undefined;
  const risks: Record<string, Risk> = {};
  for (const pair of pairs) {
    const at = pair.lastIndexOf('=');
    const tool = pair.slice(0, at);
    const risk = RiskSchema.safeParse(pair.slice(at + 1));
    if (at <= 0 || !risk.success) {
      throw new UsageError(
        `--risk must be <tool>=<${RiskSchema.options.join('|')}>, got ${JSON.stringify(pair)}`,
      );
    }
    risks[tool] = risk.data;
  }
  return risks;
}

/** `toolgate mcp import <server>`: MCP servers behind Toolgate. */
export function registerMcpCommands(program: Command, ctx: CommandContext): void {
  const mcp = program.command('mcp').description('MCP servers behind Toolgate');
  mcp
    .command('import')
    .description(
      "import (or re-approve) a configured MCP server's tools as Toolgate tools (needs admin)",
    )
    .argument('<server>', 'the server, as TOOLGATE_MCP_UPSTREAMS names it')
    .option('--tool <name>', 'import only this upstream tool (repeatable)', collect, [])
    .option('--risk <tool=risk>', "declare a tool's risk (repeatable)", collect, [])
    .option('--ask <tool>', 'calls of this tool need a person (repeatable)', collect, [])
    .option('--timeout <duration>', 'the imported tools’ timeout (e.g. 30s, 5m)')
    .option('--json', 'print JSON')
    .action(
      async (
        server: string,
        opts: { tool: string[]; risk: string[]; ask: string[]; timeout?: string; json?: boolean },
      ) => {
        if (!McpServerNameSchema.safeParse(server).success) {
          throw new UsageError(
            `the server name must be 1-32 characters of [A-Za-z0-9-], got ${JSON.stringify(server)}`,
          );
        }
        const risk = parseRisks(opts.risk);
        const res = await ctx.gateway().call<ImportMcpToolsResponse>('importMcpTools', {
          params: { name: server },
          body: {
            ...(opts.tool.length ? { tools: opts.tool } : {}),
            ...(risk ? { risk } : {}),
            ...(opts.ask.length
              ? { needsApproval: Object.fromEntries(opts.ask.map((t) => [t, true])) }
              : {}),
            ...(opts.timeout ? { timeoutMs: parseDuration('--timeout', opts.timeout) } : {}),
          },
        });
        if (opts.json) return ctx.out(`${JSON.stringify(res, null, 2)}\n`);
        ctx.out(
          renderTable(
            ['TOOL', 'UPSTREAM', 'CONTRACT'],
            res.imported.map((t) => [t.name, t.tool, t.contractHash.slice(0, 16)]),
          ),
        );
        for (const s of res.skipped) ctx.out(`skipped ${s.tool}: ${s.reason}\n`);
        ctx.out(
          `imported ${res.imported.length} tool(s) from ${res.server}; toolset hash: ${res.toolsetHash}\n`,
        );
      },
    );
}
