import type { Command } from 'commander';
import type { ListToolsResponse } from '@toolgate/contracts';
import { renderTable, shortJson } from '../format/table-format';
import type { CommandContext } from '../run-cli';

/** `toolgate tools list`. */
export function registerToolsCommands(program: Command, ctx: CommandContext): void {
  const tools = program.command('tools').description("the tenant's registered tools");
  tools
    .command('list')
    .description('list tools with their policy fields and the toolset hash')
    .option('--json', 'print JSON')
    .action(async (opts: { json?: boolean }) => {
      const res = await ctx.gateway().get<ListToolsResponse>('/v1/tools');
      if (opts.json) return ctx.out(`${JSON.stringify(res, null, 2)}\n`);
      ctx.out(
        renderTable(
          ['NAME', 'EXECUTOR', 'RISK', 'APPROVAL', 'VERSION', 'DESCRIPTION'],
          res.tools.map((t) => [
            t.name,
            t.policy.executor,
            t.policy.risk ?? '-',
            t.policy.needsApproval ? 'ask' : '-',
            t.version ?? '-',
            shortJson(t.description, 60).replace(/^"|"$/g, ''),
          ]),
        ),
      );
      ctx.out(`toolset hash: ${res.toolsetHash}\n`);
    });
}
