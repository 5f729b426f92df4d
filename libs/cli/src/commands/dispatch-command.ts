import type { Command } from 'commander';
import type { SubmitDispatchResponse } from '@toolgate/contracts';
import type { CommandContext } from '../run-cli';
import { parseCount, parseJsonFlag, UsageError } from './cli-input';

/** `toolgate dispatch <tool> --run R --call C --input '<json>' [--wait [ms]]`. */
export function registerDispatchCommand(program: Command, ctx: CommandContext): void {
  program
    .command('dispatch')
    .description('submit a tool call; exits 1 when it settles as an error or is denied')
    .argument('<tool>', 'tool name')
    .requiredOption('--run <runId>', 'run id')
    .requiredOption('--call <callId>', 'call id (the same call again replays its recorded outcome)')
    .requiredOption('--input <json>', 'the tool input as JSON')
    .option('--agent <agentType>', 'calling agent type', 'cli')
    .option('--label <label>', 'calling agent label')
    .option('--profile <name>', 'permission profile')
    .option('--isolation <kind>', 'none | readonly', 'none')
    .option('--wait [ms]', "wait for the outcome (without ms, the gateway's default)")
    .option('--json', 'print JSON')
    .action(
      async (
        tool: string,
        opts: {
          run: string;
          call: string;
          input: string;
          agent: string;
          label?: string;
          profile?: string;
          isolation: string;
          wait?: string | boolean;
          json?: boolean;
        },
      ) => {
        const input = parseJsonFlag('--input', opts.input);
        if (opts.isolation !== 'none' && opts.isolation !== 'readonly') {
          throw new UsageError(
            `--isolation must be none or readonly, got ${JSON.stringify(opts.isolation)}`,
          );
        }
        // A bare --wait asks for the gateway's own default (GATEWAY_WAIT_DEFAULT_MS).
        const wait = typeof opts.wait === 'string' ? parseCount('--wait', opts.wait) : opts.wait;
        const res = await ctx.gateway().call<SubmitDispatchResponse>('submitDispatch', {
          body: {
            runId: opts.run,
            callId: opts.call,
            agent: { agentType: opts.agent, ...(opts.label ? { label: opts.label } : {}) },
            tool,
            input,
            isolation: opts.isolation,
            ...(opts.profile ? { profile: opts.profile } : {}),
            ...(wait !== undefined ? { wait } : {}),
          },
        });
        if (res.settled && res.settled.outcome !== 'ok') ctx.fail();
        if (opts.json) return ctx.out(`${JSON.stringify(res, null, 2)}\n`);
        ctx.out(`dispatch ${res.dispatchId} ${res.status}, ${res.state}\n`);
        if (res.settled?.outcome === 'ok')
          ctx.out(`ok: ${JSON.stringify(res.settled.result, null, 2)}\n`);
        else if (res.settled?.error)
          ctx.out(
            `${res.settled.outcome}: ${res.settled.error.code}: ${res.settled.error.message}\n`,
          );
        else if (res.state === 'suspended')
          ctx.out('parked for approval: see `toolgate approvals list`\n');
      },
    );
}
