import type { Command } from 'commander';
import type { CommandContext } from '../run-cli';
import { parseCount, parseJsonFlag, UsageError } from './cli-input';

/** `toolgate policy get | put <file> | evaluate <tool> --input '<json>'`. */
export function registerPolicyCommands(program: Command, ctx: CommandContext): void {
  const policy = program.command('policy').description("the tenant's permission policy");

  policy
    .command('get')
    .description('print the current policy document and its revision')
    .option('--json', 'print JSON')
    .action(async (opts: { json?: boolean }) => {
      const res = await ctx.gateway().get<{ revision: number; document: unknown }>('/v1/policy');
      if (opts.json) return ctx.out(`${JSON.stringify(res, null, 2)}\n`);
      ctx.out(`revision ${res.revision}\n${JSON.stringify(res.document, null, 2)}\n`);
    });

  policy
    .command('put')
    .description('replace the policy with a JSON document from a file (needs admin)')
    .argument('<file>', 'JSON policy document (or { "document": ... })')
    .option('--expected-revision <n>', 'refuse unless the current revision is this one')
    .option('--json', 'print JSON')
    .action(async (file: string, opts: { expectedRevision?: string; json?: boolean }) => {
      let text: string;
      try {
        text = await ctx.readFile(file);
      } catch (err) {
        throw new UsageError(`cannot read ${file}: ${(err as Error).message}`);
      }
      const parsed = parseJsonFlag(file, text);
      if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
        throw new UsageError(`${file} must hold a JSON object`);
      }
      const document = 'document' in parsed ? (parsed as { document: unknown }).document : parsed;
      const res = await ctx.gateway().put<{ revision: number }>('/v1/policy', {
        document,
        ...(opts.expectedRevision !== undefined
          ? { expectedRevision: parseCount('--expected-revision', opts.expectedRevision) }
          : {}),
      });
      ctx.out(
        opts.json ? `${JSON.stringify(res, null, 2)}\n` : `policy revision ${res.revision}\n`,
      );
    });

  policy
    .command('evaluate')
    .description('dry-run the permission chain for a hypothetical call')
    .argument('<tool>', 'tool name')
    .requiredOption('--input <json>', 'the tool input as JSON')
    .option('--agent <agentType>', 'calling agent type', 'dry-run')
    .option('--profile <name>', 'permission profile')
    .option('--json', 'print JSON')
    .action(
      async (
        tool: string,
        opts: { input: string; agent: string; profile?: string; json?: boolean },
      ) => {
        const input = parseJsonFlag('--input', opts.input);
        const res = await ctx.gateway().post<{
          verdict: string;
          decidedBy: string;
          rule?: unknown;
          reason?: string;
          policyRevision: number;
        }>('/v1/policy/evaluate', {
          tool,
          input,
          agent: { agentType: opts.agent },
          ...(opts.profile ? { profile: opts.profile } : {}),
        });
        if (opts.json) return ctx.out(`${JSON.stringify(res, null, 2)}\n`);
        ctx.out(
          `${res.verdict} by ${res.decidedBy}${res.rule !== undefined ? ` ${JSON.stringify(res.rule)}` : ''}` +
            `${res.reason ? `: ${res.reason}` : ''} (policy revision ${res.policyRevision})\n`,
        );
      },
    );
}
