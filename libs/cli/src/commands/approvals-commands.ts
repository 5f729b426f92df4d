import type { Command } from 'commander';
import {
  PageLimit,
  cutText,
  ErrorCode,
  hasErrorCode,
  hiddenFindings,
  hiddenWarning,
  revealText,
  ToolgateError,
  traceLink,
  type ApprovalDetail,
  type ApprovalListItem,
  type ApprovalMatch,
  type ApprovalView,
  type ListApprovalsResponse,
  type ResolvedEvent,
  type WhoAmIResponse,
} from '@toolgate/contracts';
import { humanDuration, renderFields, renderTable } from '../format/table-format';
import type { CommandContext } from '../run-cli';
import { parseApprovalKey, parseCount, parseDuration, UsageError } from './cli-input';

const STATUSES = ['pending', 'resolved', 'all'] as const;

/** `toolgate approvals list|show|resolve`. */
export function registerApprovalCommands(program: Command, ctx: CommandContext): void {
  const approvals = program
    .command('approvals')
    .description('list, inspect and resolve parked tool calls');

  approvals
    .command('list')
    .description('list approvals (pending by default), oldest first')
    .option('--run <runId>', 'only this run')
    .option('--tool <name>', 'only this tool')
    .option('--min-age <duration>', 'only those pending at least this long (30s, 10m, 2h, 1d)')
    .option('--status <status>', 'pending | resolved | all', 'pending')
    .option('--newest', 'latest activity first (a history)')
    .option('--by <identity>', 'only those resolved by this approver')
    .option('--decision <allow|deny>', 'only those resolved this way')
    .option('--outcome <ok|error|denied>', 'only those whose call ended this way')
    .option('--since <iso>', 'only those active at or after this instant')
    .option('--until <iso>', 'only those active before this instant')
    .option(
      '--limit <n>',
      'at most this many (read page by page)',
      String(PageLimit.approvals.default),
    )
    .option('--all', 'every match, however many (overrides --limit)')
    .option('--json', 'print JSON')
    .action(
      async (opts: {
        run?: string;
        tool?: string;
        minAge?: string;
        status: string;
        newest?: boolean;
        by?: string;
        decision?: string;
        outcome?: string;
        since?: string;
        until?: string;
        limit: string;
        all?: boolean;
        json?: boolean;
      }) => {
        if (!(STATUSES as readonly string[]).includes(opts.status)) {
          throw new UsageError(
            `--status must be one of ${STATUSES.join(', ')}, got ${JSON.stringify(opts.status)}`,
          );
        }
        const rows = await listAll(
          ctx,
          {
            runId: opts.run,
            tool: opts.tool,
            minAgeMs:
              opts.minAge === undefined ? undefined : parseDuration('--min-age', opts.minAge),
            status: opts.status,
            order: opts.newest ? 'newest' : undefined,
            resolvedBy: opts.by,
            decision: opts.decision,
            outcome: opts.outcome,
            since: opts.since,
            until: opts.until,
          },
          opts.all ? Infinity : parseCount('--limit', opts.limit),
        );
        if (opts.json) return ctx.out(`${JSON.stringify(rows, null, 2)}\n`);
        if (rows.length === 0) return ctx.out('no approvals\n');
        const now = ctx.now().getTime();
        const hidden = rows.filter(
          (a) => hiddenFindings([a.inputPreview.summary, a.inputPreview.json]).length > 0,
        );
        ctx.out(
          renderTable(
            ['KEY', 'TOOL', 'RUN', 'AGE', 'EXPIRES', 'STATUS', 'INPUT'],
            rows.map((a) => [
              a.approvalKey,
              a.toolName ?? '?',
              a.runId,
              a.suspendedAt ? humanDuration(now - Date.parse(a.suspendedAt)) : '?',
              a.status === 'pending' && a.expiresAt
                ? `in ${humanDuration(Date.parse(a.expiresAt) - now)}`
                : '-',
              a.status === 'pending' ? 'pending' : `${a.decision ?? 'resolved'}`,
              inputCell(a),
            ]),
          ),
        );
        if (hidden.length > 0)
          ctx.out(
            `warning: ${hidden.length} input${hidden.length > 1 ? 's have' : ' has'} characters that change how ${hidden.length > 1 ? 'they read' : 'it reads'} (marked ! and shown escaped): check with \`toolgate approvals show\`\n`,
          );
      },
    );

  approvals
    .command('show')
    .description('show one approval: the call, who asked, the rule, and its resolution')
    .argument('<key>', 'approval key (64 hex characters)')
    .option('--json', 'print JSON')
    .action(async (rawKey: string, opts: { json?: boolean }) => {
      const key = parseApprovalKey(rawKey);
      const matches = await findApprovals(ctx, key);
      if (opts.json)
        return ctx.out(`${JSON.stringify(matches.length === 1 ? matches[0] : matches, null, 2)}\n`);
      // The trace UI link template is the gateway's configuration, told by whoami.
      const { traceUrlTemplate } = await ctx.gateway().call<WhoAmIResponse>('whoAmI');
      ctx.out(matches.map((a) => describe(a, traceUrlTemplate)).join('\n'));
    });

  approvals
    .command('resolve')
    .description('allow or deny a parked call (needs the approve scope)')
    .argument('<key>', 'approval key (64 hex characters)')
    .option('--allow', 'let the call run')
    .option('--deny', 'refuse the call')
    .option('--reason <text>', 'why; journaled with the resolution, shown to the model on deny')
    .option(
      '--dispatch <dispatchId>',
      'which parked dispatch: needed when the key matches several pending calls',
    )
    .option('--run <runId>', "narrow the key to this run's pending calls")
    .option('--json', 'print JSON')
    .action(
      async (
        rawKey: string,
        opts: {
          allow?: boolean;
          deny?: boolean;
          reason?: string;
          dispatch?: string;
          run?: string;
          json?: boolean;
        },
      ) => {
        const key = parseApprovalKey(rawKey);
        if (Boolean(opts.allow) === Boolean(opts.deny))
          throw new UsageError('give exactly one of --allow or --deny');
        const { resolved } = await ctx
          .gateway()
          .call<{ resolved: ResolvedEvent }>('resolveApproval', {
            params: { key },
            body: {
              decision: opts.allow ? 'allow' : 'deny',
              ...(opts.reason !== undefined ? { reason: opts.reason } : {}),
              ...(opts.dispatch !== undefined ? { dispatchId: opts.dispatch } : {}),
              ...(opts.run !== undefined ? { runId: opts.run } : {}),
            },
          })
          .catch((err: unknown) => {
            throw withMatches(err);
          });
        if (opts.json) return ctx.out(`${JSON.stringify(resolved, null, 2)}\n`);
        ctx.out(
          `${resolved.decision === 'allow' ? 'allowed' : 'denied'} ${key} (dispatch ${resolved.dispatchId}) by ${resolved.by}` +
            `${resolved.reason ? `: ${resolved.reason}` : ''}\n`,
        );
      },
    );
}

/**
 * Approvals page by page until `max` are read or the list ends: a page is bounded (in count and in
 * bytes), so a long list is read in several.
 */
async function listAll(
  ctx: CommandContext,
  filter: Record<string, string | number | undefined>,
  max: number,
): Promise<ApprovalListItem[]> {
  const rows: ApprovalListItem[] = [];
  let cursor: string | undefined;
  do {
    const page = await ctx.gateway().call<ListApprovalsResponse>('listApprovals', {
      query: { ...filter, limit: Math.min(max - rows.length, PageLimit.approvals.max), cursor },
    });
    rows.push(...page.approvals);
    cursor = page.nextCursor ?? undefined;
  } while (cursor && rows.length < max);
  return rows;
}

/**
 * The INPUT cell: the field that says what the call does (else the input's JSON), revealed, and
 * cut (never inside a surrogate pair) to 48 characters.
 */
export function inputCell(a: Pick<ApprovalListItem, 'inputPreview'>): string {
  const text = a.inputPreview.summary ?? a.inputPreview.json;
  const revealed = revealText(text);
  const cell = revealed.length > 48 ? `${cutText(revealed, 47).text}…` : revealed;
  return revealed !== text ? `! ${cell}` : cell;
}

/**
 * Every approval of a key, pending ones first (one key can park several dispatches), each read in
 * full (its whole input) from the approval's own answer: a listing carries previews only.
 */
async function findApprovals(ctx: CommandContext, key: string): Promise<ApprovalView[]> {
  const listed = await listAll(ctx, { key, status: 'all' }, Infinity);
  if (listed.length === 0) throw new ToolgateError(ErrorCode.NotFound, `no approval ${key}`);
  const matches: ApprovalView[] = [];
  for (const a of listed) {
    const detail = await ctx.gateway().call<ApprovalDetail>('getApproval', {
      params: { key },
      query: { dispatchId: a.dispatchId, runId: a.runId },
    });
    matches.push({ ...detail.approval, settled: a.settled ?? null });
  }
  return matches.sort((a, b) => Number(b.status === 'pending') - Number(a.status === 'pending'));
}

/**
 * A `conflict` (the key matches several pending calls) with the calls listed, one per line, each
 * with the `--dispatch` that names it; any other error as it came.
 */
function withMatches(err: unknown): unknown {
  if (!hasErrorCode(err, ErrorCode.Conflict)) return err;
  const matches = (err as ToolgateError).details?.matches;
  if (!Array.isArray(matches)) return err;
  const lines = (matches as ApprovalMatch[]).map(
    (m) =>
      `  --dispatch ${m.dispatchId}  run ${m.runId}  ${m.toolName ?? '?'}` +
      `${m.agent ? `  ${m.agent.agentType}${m.agent.label ? ` (${m.agent.label})` : ''}` : ''}` +
      `  since ${m.suspendedAt ?? '?'}`,
  );
  return new ToolgateError(
    ErrorCode.Conflict,
    `${(err as ToolgateError).message}; pick one:\n${lines.join('\n')}`,
    { details: (err as ToolgateError).details },
  );
}

function describe(a: ApprovalView, traceUrlTemplate: string | null): string {
  const trace = traceLink(traceUrlTemplate, a.traceId);
  const fields: [string, string][] = [
    ['key', a.approvalKey],
    ['status', a.status],
    ['tool', a.toolName ?? '?'],
    ['run', a.runId],
    ['dispatch', a.dispatchId],
    ...(trace ? [['trace', trace] as [string, string]] : []),
    ['agent', a.agent ? `${a.agent.agentType}${a.agent.label ? ` (${a.agent.label})` : ''}` : '?'],
    ['submitted by', a.submittedBy ?? '?'],
    [
      'decided by',
      `${a.decidedBy ?? '?'}${a.rule !== undefined && a.rule !== null ? ` ${JSON.stringify(a.rule)}` : ''}`,
    ],
    ['since', a.suspendedAt ?? '?'],
    ['expires', `${a.expiresAt ?? '?'} (then ${a.onTimeout ?? 'deny'})`],
  ];
  if (a.status === 'resolved') {
    fields.push([
      'decision',
      `${a.decision ?? '?'} by ${a.resolvedBy ?? '?'} (${a.source ?? '?'}) at ${a.resolvedAt ?? '?'}`,
    ]);
    if (a.reason) fields.push(['reason', a.reason]);
  }
  // The input as JSON with every character that changes how it reads escaped, and a warning first.
  const warning = hiddenWarning(hiddenFindings(a.input));
  return `${renderFields(fields)}${warning ? `warning: ${warning}\n` : ''}input:\n${indent(
    revealText(JSON.stringify(a.input, null, 2)),
  )}\n`;
}

function indent(text: string): string {
  return text
    .split('\n')
    .map((l) => `  ${l}`)
    .join('\n');
}
