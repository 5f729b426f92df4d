import type { Command } from 'commander';
import {
  fromWireError,
  isWireError,
  ToolgateError,
  ErrorCode,
  type PolicyWhatIfReport,
  type WhatIfVerdict,
} from '@toolgate/contracts';
import { renderTable } from '../format/table-format';
import type { CommandContext } from '../run-cli';
import { parseCount, parseDuration, parseJsonFlag, UsageError } from './cli-input';

/**
 * `toolgate policy get | put <file> | evaluate <tool> --input '<json>' | whatif --candidate <file>
 * | test <file> --cases <file>`.
 */
export function registerPolicyCommands(program: Command, ctx: CommandContext): void {
  const policy = program.command('policy').description("the tenant's permission policy");

  policy
    .command('get')
    .description('print the current policy document and its revision')
    .option('--json', 'print JSON')
    .action(async (opts: { json?: boolean }) => {
      const res = await ctx.gateway().call<{ revision: number; document: unknown }>('getPolicy');
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
      const document = await readPolicyFile(ctx, file);
      const res = await ctx.gateway().call<{ revision: number }>('putPolicy', {
        body: {
          document,
          ...(opts.expectedRevision !== undefined
            ? { expectedRevision: parseCount('--expected-revision', opts.expectedRevision) }
            : {}),
        },
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
        const res = await ctx.gateway().call<{
          verdict: string;
          decidedBy: string;
          rule?: unknown;
          reason?: string;
          policyRevision: number;
        }>('evaluatePolicy', {
          body: {
            tool,
            input,
            agent: { agentType: opts.agent },
            ...(opts.profile ? { profile: opts.profile } : {}),
          },
        });
        if (opts.json) return ctx.out(`${JSON.stringify(res, null, 2)}\n`);
        ctx.out(
          `${res.verdict} by ${res.decidedBy}${res.rule !== undefined ? ` ${JSON.stringify(res.rule)}` : ''}` +
            `${res.reason ? `: ${res.reason}` : ''} (policy revision ${res.policyRevision})\n`,
        );
      },
    );

  policy
    .command('whatif')
    .description(
      "replay the journal's recorded calls through a candidate policy and list every verdict it changes (needs admin; remote hooks are not called)",
    )
    .requiredOption('--candidate <file>', 'the candidate policy document (JSON, as for put)')
    .option('--since <duration>', 'only calls recorded in this last while (30m, 24h, 7d)')
    .option('--run <runId>', "only this run's calls")
    .option('--limit <n>', 'list at most this many changed calls (the counts cover all)', '1000')
    .option('--json', 'print the report as JSON')
    .action(
      async (opts: {
        candidate: string;
        since?: string;
        run?: string;
        limit: string;
        json?: boolean;
      }) => {
        const candidate = await readPolicyFile(ctx, opts.candidate);
        const since =
          opts.since === undefined
            ? undefined
            : new Date(ctx.now().getTime() - parseDuration('--since', opts.since)).toISOString();
        const limit = parseCount('--limit', opts.limit);
        const bar = await ctx.progress('replaying');
        let report: PolicyWhatIfReport | undefined;
        try {
          await ctx.gateway().callLines(
            'whatIfPolicy',
            {
              body: {
                candidate,
                ...(since !== undefined ? { since } : {}),
                ...(opts.run !== undefined ? { runId: opts.run } : {}),
                limit,
              },
            },
            (line) => {
              const frame = line as {
                progress?: { done: number; total: number };
                report?: PolicyWhatIfReport;
                error?: unknown;
              };
              if (frame.progress) bar?.update(frame.progress.done, frame.progress.total);
              else if (frame.report) report = frame.report;
              else if (isWireError(frame.error)) throw fromWireError(frame.error);
            },
          );
        } finally {
          bar?.stop();
        }
        if (!report)
          throw new ToolgateError(
            ErrorCode.Internal,
            'the gateway ended the answer without a report',
          );
        ctx.out(opts.json ? `${JSON.stringify(report, null, 2)}\n` : describeWhatIf(report));
      },
    );

  policy
    .command('test')
    .description(
      'check a policy against expected verdicts, offline (no gateway); exit 1 on any mismatch',
    )
    .argument('<file>', 'the policy document (JSON, as for put)')
    .requiredOption(
      '--cases <file>',
      'the cases: calls and the verdict each must get (docs/cli.md)',
    )
    .option('--json', 'print the results as JSON')
    .action(async (file: string, opts: { cases: string; json?: boolean }) => {
      const document = await readPolicyFile(ctx, file);
      const casesJson = parseJsonFlag(opts.cases, await ctx.readFile(opts.cases));
      // Loaded here only: the chain and its compilers are not needed by any other command.
      const { parsePolicyTestCases, runPolicyTests } = await import('@toolgate/policy-runtime');
      let cases;
      try {
        cases = parsePolicyTestCases(casesJson);
      } catch (err) {
        throw new UsageError(`${opts.cases}: ${(err as Error).message}`);
      }
      const run = await runPolicyTests(document, cases);
      if (run.failed > 0) ctx.fail();
      if (opts.json) return ctx.out(`${JSON.stringify(run, null, 2)}\n`);
      const lines: string[] = [];
      for (const r of run.results) {
        lines.push(`${r.passed ? 'ok  ' : 'FAIL'} ${r.index} ${r.name}`);
        if (r.passed) continue;
        for (const m of r.mismatches) lines.push(`       ${m}`);
        if (r.actual) lines.push(`       decided: ${verdictText(r.actual)}`);
      }
      lines.push(
        `policy test: ${run.results.length} cases, ${run.passed} passed, ${run.failed} failed`,
      );
      ctx.out(`${lines.join('\n')}\n`);
    });
}

/** Reads a policy document from a file: a JSON object, or `{ "document": … }` as `get --json` prints. */
async function readPolicyFile(ctx: CommandContext, file: string): Promise<Record<string, unknown>> {
  const parsed = parseJsonFlag(file, await ctx.readFile(file));
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new UsageError(`${file} must hold a JSON object`);
  }
  return ('document' in parsed ? (parsed as { document: unknown }).document : parsed) as Record<
    string,
    unknown
  >;
}

function verdictText(v: WhatIfVerdict): string {
  return (
    `${v.verdict} by ${v.decidedBy}${v.rule !== undefined ? ` ${JSON.stringify(v.rule)}` : ''}` +
    `${v.reason ? `: ${v.reason}` : ''}`
  );
}

function describeWhatIf(r: PolicyWhatIfReport): string {
  const out: string[] = [];
  const n = (x: number) => x.toLocaleString('en-US');
  out.push(
    `what-if over ${n(r.calls)} recorded calls` +
      (r.window.lastSeq > 0 ? ` (stream sequences ${r.window.firstSeq}-${r.window.lastSeq})` : ''),
    `  ${n(r.changed)} would change verdict, ${n(r.unchanged)} would not` +
      `; not replayed: ${n(r.skipped.undecided)} undecided, ${n(r.skipped.errorCap)} refused by the error cap`,
    `  ${r.hooks.note} (reused ${n(r.hooks.reused)}, unknown ${n(r.hooks.unknown)})`,
  );
  if (r.byChange.length > 0) {
    out.push('', 'by change:');
    out.push(
      renderTable(
        ['BEFORE', 'AFTER', 'CALLS'],
        r.byChange.map((c) => [c.from, c.to, n(c.count)]),
      ).trimEnd(),
    );
  }
  if (r.byTool.length > 0) {
    out.push('', 'by tool:');
    out.push(
      renderTable(
        ['TOOL', 'CALLS', 'CHANGED'],
        r.byTool.map((t) => [t.tool, n(t.calls), n(t.changed)]),
      ).trimEnd(),
    );
  }
  if (r.changes.length > 0) {
    out.push('', `changed calls${r.truncated ? ` (first ${r.changes.length})` : ''}:`);
    for (const c of r.changes) {
      out.push(
        `  ${c.seq} ${c.runId} ${c.tool} (dispatch ${c.dispatchId}, call ${c.callId}${c.hooks === 'unknown' ? ', depends on hook' : ''})`,
        `    before: ${verdictText(c.before)} (policy revision ${c.before.policyRevision})`,
        `    after:  ${verdictText(c.after)}`,
      );
    }
  }
  return `${out.join('\n')}\n`;
}
