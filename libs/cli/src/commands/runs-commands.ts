import type { Command } from 'commander';
import { isSubjectToken, type ResetErrorCapResponse } from '@toolgate/contracts';
import { UsageError } from './cli-input';
import type { CommandContext } from '../run-cli';

/** `toolgate runs reset-error-cap <runId>`. */
export function registerRunsCommands(program: Command, ctx: CommandContext): void {
  const runs = program.command('runs').description("a run's state");
  runs
    .command('reset-error-cap')
    .description(
      "reset a run's consecutive-error cap, so its next dispatch is decided again (needs the approve scope)",
    )
    .argument('<runId>', 'the run')
    .option('--json', 'print JSON')
    .action(async (runId: string, opts: { json?: boolean }) => {
      if (!isSubjectToken(runId)) {
        throw new UsageError('a run id is 1-128 characters of [A-Za-z0-9_-]');
      }
      const res = await ctx
        .gateway()
        .call<ResetErrorCapResponse>('resetErrorCap', { params: { runId }, body: {} });
      if (opts.json) return ctx.out(`${JSON.stringify(res, null, 2)}\n`);
      ctx.out(
        res.previousFailures === 0
          ? `run ${runId} had no failures in a row; nothing to reset\n`
          : `reset the error cap of run ${runId} (${res.previousFailures} failures in a row)\n`,
      );
    });
}
