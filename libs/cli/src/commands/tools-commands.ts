import type { Command } from 'commander';
import path from 'node:path';
import type {
  InstallScriptResponse,
  ListToolsResponse,
  ScriptInventory,
} from '@toolgate/contracts';
import { renderTable, shortJson } from '../format/table-format';
import type { CommandContext } from '../run-cli';
import { parseJsonFlag } from './cli-input';

/** `toolgate tools list | scripts | install-script <file>`. */
export function registerToolsCommands(program: Command, ctx: CommandContext): void {
  const tools = program.command('tools').description("the tenant's registered tools");
  tools
    .command('list')
    .description('list tools with their policy fields and the toolset hash')
    .option('--json', 'print JSON')
    .action(async (opts: { json?: boolean }) => {
      const res = await ctx.gateway().call<ListToolsResponse>('listTools');
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

  tools
    .command('scripts')
    .description('script tools: loaded (directory and installed) and skipped files, with reasons')
    .option('--json', 'print JSON')
    .action(async (opts: { json?: boolean }) => {
      const res = await ctx.gateway().call<ScriptInventory>('listScripts');
      if (opts.json) return ctx.out(`${JSON.stringify(res, null, 2)}\n`);
      ctx.out(
        renderTable(
          ['NAME', 'ORIGIN', 'RISK', 'REQUIRES', 'PARAMS', 'DESCRIPTION'],
          res.loaded.map((s) => [
            s.name,
            s.origin,
            s.risk,
            s.requires.join(',') || '-',
            Object.keys(
              (s.parameters.properties as Record<string, unknown> | undefined) ?? {},
            ).join(',') || '-',
            shortJson(s.description, 50).replace(/^"|"$/g, ''),
          ]),
        ),
      );
      if (res.directory)
        ctx.out(`directory: ${res.directory.path} (loaded ${res.directory.loadedAt})\n`);
      for (const s of res.skipped)
        ctx.out(`skipped ${s.file}: ${s.reason.code}: ${s.reason.message}\n`);
    });

  tools
    .command('install-script')
    .description('install a script tool from a .js file (needs admin); its name is the file name')
    .argument('<file>', 'the script (<name>.js)')
    .option(
      '--sidecar <file>',
      'a JSON sidecar { name, parameters } (default: <name>.json beside it, if any)',
    )
    .option('--name <name>', 'install under this name instead of the file name')
    .option('--overwrite', 'replace a tool of the same name')
    .option('--json', 'print JSON')
    .action(
      async (
        file: string,
        opts: { sidecar?: string; name?: string; overwrite?: boolean; json?: boolean },
      ) => {
        const source = await ctx.readFile(file);
        const name = opts.name ?? path.basename(file).replace(/\.js$/, '');
        let sidecar: unknown;
        if (opts.sidecar) sidecar = parseJsonFlag(opts.sidecar, await ctx.readFile(opts.sidecar));
        else {
          const beside = file.replace(/\.js$/, '') + '.json';
          const text = await ctx.readFile(beside).catch(() => undefined);
          if (text !== undefined) sidecar = parseJsonFlag(beside, text);
        }
        const res = await ctx.gateway().call<InstallScriptResponse>('installScript', {
          params: { name },
          body: {
            source,
            ...(sidecar !== undefined ? { sidecar } : {}),
            ...(opts.overwrite ? { overwrite: true } : {}),
          },
        });
        if (opts.json) return ctx.out(`${JSON.stringify(res, null, 2)}\n`);
        ctx.out(
          `${res.replaced ? 'replaced' : 'installed'} ${res.script.name} (requires ${res.script.requires.join(',') || 'nothing'}, risk ${res.script.risk})\n`,
        );
        for (const w of res.warnings) ctx.out(`warning: ${w}\n`);
      },
    );
}
