/**
 * `npm run record:journal`: records a journal from today's services and commits nothing by itself.
 *
 * Starts the whole of Toolgate in this process (as the system tests do, on a stream prefix and
 * schema of its own), drives every event type and every outcome through the real HTTP API, the
 * real remote-tool and hook subjects and the real worktree service — ok; errors with several
 * codes; denied by a deny rule, an expression, a remote hook, canUseTool and an approval;
 * suspended and resolved allow, deny and by timeout (both ways); a parked call left open; a replay;
 * a model-retry chain; a run stopped by its error cap and reset; a script tool installed
 * and run; a second tenant; a worktree acquired, collected, disposed, retained,
 * dropped by the pin cap and restarted — then waits for the journal service's live projection to
 * fold everything and writes, under `services/journal/test/fixtures/recorded/`:
 *
 * - `journal-v<schemaVersion>.jsonl`: every message of the journal stream, in stream order, one
 *   `{ seq, subject, event }` per line, the event exactly as it was published;
 * - `journal-v<schemaVersion>.projection.json`: the live projection after it (`projectionSnapshot`).
 *
 * The run's random prefix is written as `toolgate`, so the files read like a deployment's. Every
 * scenario checks its outcome and the run fails before writing anything when one is not what it
 * says, so the fixture is what its name claims. `recorded-journal.int.spec.ts` in the journal
 * service folds the `.jsonl` with today's code and compares it with the `.projection.json`.
 */
import { execFileSync } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { requestReply } from '@toolgate/bus';
import {
  ConsumerRole,
  JOURNAL_SCHEMA_VERSION,
  WorktreeAcquiredReplySchema,
  WorktreeCollectedReplySchema,
  WorktreeDisposedReplySchema,
  requestSigningOf,
  type WorktreeDisposeRequest,
  type WorktreeOperation,
} from '@toolgate/contracts';
import { createDb, projectionSnapshot } from '@toolgate/journal';
import { eventually, testKeys } from '@toolgate/testing';
import { format, resolveConfig } from 'prettier';
import type { z } from 'zod';
import { serveRemoteTool } from '../support/remote-tool';
import { startTestStack, TOKENS, type TestStack } from '../support/test-stack';

const OUT_DIR = path.resolve(__dirname, '../../../services/journal/test/fixtures/recorded');
const log = (line: string) => process.stderr.write(`record-journal: ${line}\n`);
const decoder = new TextDecoder();

type Reply = { status: number; body: any };

async function main(): Promise<void> {
  const stack = await startTestStack('record', {
    WORKTREE_PIN_CAP: '1',
    JOURNAL_SWEEP_INTERVAL_MS: '100',
  });
  try {
    await record(stack);
    await writeFixture(stack);
  } finally {
    await stack.stop();
  }
}

function expectThat(what: string, ok: boolean, detail: unknown): void {
  if (!ok) throw new Error(`${what}: unexpected ${JSON.stringify(detail)}`);
  log(what);
}

async function record(stack: TestStack): Promise<void> {
  const git = (...args: string[]) =>
    execFileSync(
      'git',
      ['-c', 'user.name=Recorder', '-c', 'user.email=recorder@example.invalid', ...args],
      { cwd: stack.workdir, encoding: 'utf8' },
    );
  git('init', '-q', '-b', 'main');
  await writeFile(path.join(stack.workdir, 'README.md'), '# host\n');
  await writeFile(path.join(stack.workdir, 'notes.txt'), 'remember the milk\n');
  await mkdir(path.join(stack.workdir, 'public'));
  await writeFile(path.join(stack.workdir, 'public', 'index.txt'), 'hello\n');
  git('add', '-A');
  git('commit', '-q', '-m', 'base');

  const { nc, subjects } = stack.nats;
  const agent = { agentType: 'coder', label: 'recorder' };
  const dispatch = (
    runId: string,
    callId: string,
    tool: string,
    input: unknown,
    extra: Record<string, unknown> = {},
    token: string = TOKENS.acmeAgent,
  ): Promise<Reply> =>
    stack.http('POST', '/v1/dispatches', token, {
      runId,
      callId,
      agent,
      tool,
      input,
      wait: 20_000,
      ...extra,
    });
  const settledAs = (what: string, res: Reply, outcome: string, code?: string) =>
    expectThat(
      what,
      res.body?.settled?.outcome === outcome &&
        (code === undefined || res.body?.settled?.error?.code === code),
      res,
    );
  const parked = async (what: string, res: Reply): Promise<string> => {
    expectThat(what, res.status === 202 && res.body?.state === 'suspended', res);
    const dispatchId = res.body.dispatchId as string;
    return eventually<string>(
      async () => {
        const list = await stack.http('GET', '/v1/approvals?status=all', TOKENS.acmeApprover);
        return (
          list.body?.approvals as { dispatchId: string; approvalKey: string }[] | undefined
        )?.find((a) => a.dispatchId === dispatchId)?.approvalKey;
      },
      { timeoutMs: 20_000, what: `approval of ${dispatchId} listed` },
    );
  };
  const settledLater = (dispatchId: string, outcome: string) =>
    eventually(
      async () => {
        const d = await stack.http('GET', `/v1/dispatches/${dispatchId}`, TOKENS.acmeAgent);
        return d.body?.dispatch?.status === 'settled' && d.body.dispatch.outcome === outcome
          ? d
          : undefined;
      },
      { timeoutMs: 20_000, what: `${dispatchId} settled ${outcome}` },
    );

  // Remote tools served from here: one that greets, one that fails as asked, one that hangs,
  // and one nobody serves.
  await serveRemoteTool(
    stack,
    {
      name: 'greet',
      description: 'Greets someone by name.',
      parameters: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] },
      policy: { risk: 'read' },
    },
    (input) => ({ ok: true, result: `hello, ${(input as { name: string }).name}` }),
  );
  await serveRemoteTool(
    stack,
    {
      name: 'flaky',
      description: 'Fails the way it is told to.',
      parameters: { type: 'object', properties: { mode: { type: 'string' } }, required: ['mode'] },
      policy: { risk: 'write' },
    },
    (input) => {
      const { mode } = input as { mode: string };
      if (mode === 'fail') return { ok: false, error: { code: 'tool-failed', message: 'boom' } };
      if (mode === 'retry')
        return { ok: false, error: { code: 'model-retry', message: 'say it differently' } };
      return { ok: true, result: { mode } };
    },
  );
  await serveRemoteTool(
    stack,
    {
      name: 'slow',
      description: 'Never answers in time.',
      parameters: { type: 'object' },
      policy: { risk: 'read', timeoutMs: 300 },
    },
    () => undefined,
  );
  const orphan = await serveRemoteTool(
    stack,
    {
      name: 'orphan',
      description: 'Registered, but its worker is gone.',
      parameters: { type: 'object' },
      // No responders are retried within the deadline: a short one settles it well within `wait`.
      policy: { timeoutMs: 2000 },
    },
    () => undefined,
  );
  orphan.stop();

  // A remote hook and a remote canUseTool served from here.
  nc.subscribe(subjects.hook('acme', 'audit'), {
    callback: (_err, msg) => {
      const { toolName, input } = JSON.parse(decoder.decode(msg.data)) as {
        toolName: string;
        input: { name?: string };
      };
      let reply: unknown = {};
      if (toolName === 'http_fetch') reply = { verdict: 'deny' };
      else if (toolName === 'greet' && input.name === 'mallory')
        reply = { modifiedInput: { name: 'm*****' } };
      msg.respond(JSON.stringify(reply));
    },
  });
  nc.subscribe(subjects.hook('acme', 'gatekeeper'), {
    callback: (_err, msg) => {
      const { toolName } = JSON.parse(decoder.decode(msg.data)) as { toolName: string };
      msg.respond(JSON.stringify(toolName === 'grep' ? { verdict: 'deny' } : {}));
    },
  });

  const policy = await stack.http('PUT', '/v1/policy', TOKENS.acmeAdmin, {
    document: {
      engine: {
        deny: [{ id: 'no-rm', argv: 'rm **', reason: 'no deletions here' }],
        ask: [{ id: 'shell-asks', tool: 'shell', reason: 'a person looks at commands' }],
        expressions: [
          {
            id: 'forbidden-dir',
            when: 'tool == "list_dir" && input.path == "forbidden"',
            effect: 'deny',
            reason: 'that directory is off limits',
          },
          {
            id: 'secret-asks',
            when: 'tool == "list_dir" && input.path == "secret"',
            effect: 'ask',
            approvalTimeoutMs: 1000,
            onTimeout: 'deny',
          },
          {
            id: 'public-asks',
            when: 'tool == "list_dir" && input.path == "public"',
            effect: 'ask',
            approvalTimeoutMs: 1000,
            onTimeout: 'allow',
          },
        ],
      },
      remote: { engine: { hooks: [{ name: 'audit', unauthenticated: true }], canUseTool: { name: 'gatekeeper', unauthenticated: true } } },
    },
  });
  expectThat('policy stored', policy.status === 200, policy);

  // Outcomes of calls that run.
  const run = 'run-outcomes';
  const listed = await dispatch(run, 'c-list', 'list_dir', { path: '.' });
  settledAs('builtin ok', listed, 'ok');
  const replay = await dispatch(run, 'c-list', 'list_dir', { path: '.' });
  expectThat('replay', replay.body?.status === 'replayed', replay);
  settledAs(
    'read_file ok',
    await dispatch(run, 'c-read', 'read_file', { path: 'notes.txt' }),
    'ok',
  );
  const installed = await stack.http('PUT', '/v1/tools/scripts/shout', TOKENS.acmeAdmin, {
    source:
      '// @tool shout\n// @description Upper-cases a note\n// @param path string required "a file"\n' +
      '// @requires read_file\nreturn (await read_file(params.path)).toUpperCase();',
  });
  expectThat('script installed', installed.status === 200, installed);
  settledAs('script ok', await dispatch(run, 'c-shout', 'shout', { path: 'notes.txt' }), 'ok');
  settledAs(
    'invalid arguments',
    await dispatch(run, 'c-badargs', 'read_file', { path: 42 }),
    'error',
    'invalid-arguments',
  );
  settledAs(
    'path outside scope',
    await dispatch(run, 'c-escape', 'read_file', { path: '/etc/hostname' }),
    'error',
    'path-outside-scope',
  );
  settledAs('remote ok', await dispatch(run, 'c-greet', 'greet', { name: 'ada' }), 'ok');
  const modified = await dispatch(run, 'c-mallory', 'greet', { name: 'mallory' });
  expectThat('hook modified input', modified.body?.settled?.result === 'hello, m*****', modified);
  settledAs(
    'tool failed',
    await dispatch(run, 'c-fail', 'flaky', { mode: 'fail' }),
    'error',
    'tool-failed',
  );
  settledAs('timeout', await dispatch(run, 'c-slow', 'slow', {}), 'error', 'timeout');
  settledAs('no worker', await dispatch(run, 'c-orphan', 'orphan', {}), 'error', 'unavailable');
  const retried = await dispatch(run, 'c-retry', 'flaky', { mode: 'retry' });
  settledAs('model retry', retried, 'error', 'model-retry');
  settledAs(
    'retry of a model-retry',
    await dispatch(run, 'c-retry-2', 'flaky', { mode: 'ok' }, { retryOf: retried.body.dispatchId }),
    'ok',
  );

  // The consecutive-error cap: five failures, the sixth call refused, a reset, a success.
  const capped = 'run-error-cap';
  for (let i = 1; i <= 5; i++) {
    settledAs(
      `failure ${i} of a run`,
      await dispatch(capped, `c-cap-${i}`, 'flaky', { mode: 'fail' }),
      'error',
      'tool-failed',
    );
  }
  settledAs(
    'error cap reached',
    await dispatch(capped, 'c-cap-refused', 'flaky', { mode: 'ok' }),
    'error',
    'error-cap',
  );
  const reset = await stack.http(
    'POST',
    `/v1/runs/${capped}/error-cap/reset`,
    TOKENS.acmeApprover,
    {},
  );
  expectThat('error cap reset', reset.body?.previousFailures === 5, reset);
  settledAs(
    'runs again after a reset',
    await dispatch(capped, 'c-cap-after', 'flaky', { mode: 'ok' }),
    'ok',
  );

  // Calls the policy denies, at each layer.
  const denials = 'run-denials';
  settledAs(
    'deny rule',
    await dispatch(denials, 'c-rm', 'shell', { command: 'rm -rf build' }),
    'denied',
  );
  settledAs(
    'deny expression',
    await dispatch(denials, 'c-forbidden', 'list_dir', { path: 'forbidden' }),
    'denied',
  );
  settledAs(
    'hook deny',
    await dispatch(denials, 'c-fetch', 'http_fetch', { url: 'https://example.com/' }),
    'denied',
  );
  settledAs(
    'canUseTool deny',
    await dispatch(denials, 'c-grep', 'grep', { pattern: 'milk', path: '.' }),
    'denied',
  );

  // Approvals: allowed, denied, timed out both ways, and one left open.
  const approvals = 'run-approvals';
  const echo = await dispatch(approvals, 'c-echo', 'shell', { command: 'echo approved' });
  const allowKey = await parked('ask (to allow)', echo);
  const allowed = await stack.http(
    'POST',
    `/v1/approvals/${allowKey}/resolve`,
    TOKENS.acmeApprover,
    {
      decision: 'allow',
      reason: 'looks harmless',
    },
  );
  expectThat('resolved allow', allowed.status === 200, allowed);
  const denyKey = await parked(
    'ask (to deny)',
    await dispatch(approvals, 'c-date', 'shell', { command: 'date' }),
  );
  const denied = await stack.http('POST', `/v1/approvals/${denyKey}/resolve`, TOKENS.acmeApprover, {
    decision: 'deny',
    reason: 'not now',
  });
  expectThat('resolved deny', denied.status === 200, denied);
  const secret = await dispatch(approvals, 'c-secret', 'list_dir', { path: 'secret' });
  await parked('ask (to time out, deny)', secret);
  const pub = await dispatch(approvals, 'c-public', 'list_dir', { path: 'public' });
  await parked('ask (to time out, allow)', pub);
  await parked(
    'ask (left open)',
    await dispatch('run-open', 'c-open', 'shell', { command: 'uptime' }),
  );
  await settledLater(echo.body.dispatchId, 'ok');
  await settledLater(secret.body.dispatchId, 'denied');
  await settledLater(pub.body.dispatchId, 'ok');
  log('approvals settled');

  // Another tenant.
  settledAs(
    'second tenant',
    await dispatch('run-globex', 'c-list', 'list_dir', { path: '.' }, {}, TOKENS.globexAdmin),
    'ok',
  );

  // Worktrees: acquired by a dispatch, collected, disposed; one retained on error; a second
  // retained tree drops the first past the pin cap (1); its agent comes back to a restarted tree.
  const trees = 'run-trees';
  const inTree = (label: string, callId: string) =>
    dispatch(
      trees,
      callId,
      'write_file',
      { path: `${label}.txt`, content: `${label}\n` },
      { isolation: { kind: 'worktree' }, agent: { agentType: 'coder', label } },
    );
  // Sent as their senders send them — `requestReply`, signed for the worktree service by the
  // identity contracts name as its sender (`requestSigningOf`: an acquire the executor, collect and
  // dispose an operator); an error reply throws.
  const worktree = async <S extends z.ZodType>(
    op: WorktreeOperation,
    body: unknown,
    ok: S,
  ): Promise<z.output<S>> => {
    const subject = subjects.worktree(op);
    const { requesters, responder } = requestSigningOf(subjects, subject);
    const reply = await requestReply(nc, subject, body, {
      ok,
      timeoutMs: 20_000,
      peer: 'the worktree service',
      sign: { keys: testKeys(requesters[0]!), responder },
    });
    log(`worktree ${op}`);
    return reply;
  };
  const acquire = (agentKey: string) =>
    worktree('acquire', { tenant: 'acme', runId: trees, agentKey }, WorktreeAcquiredReplySchema);
  const treeOf = async (label: string) => (await acquire(`coder:${label}`)).worktree.worktreeId;
  const dispose = (body: WorktreeDisposeRequest) =>
    worktree('dispose', body, WorktreeDisposedReplySchema);

  settledAs('write in a worktree', await inTree('fixer', 'c-fix'), 'ok');
  const fixer = await treeOf('fixer');
  await worktree('collect', { worktreeId: fixer }, WorktreeCollectedReplySchema);
  await dispose({ worktreeId: fixer, outcome: 'ok' });
  settledAs('write in a second worktree', await inTree('keeper', 'c-keep'), 'ok');
  const keeper = await treeOf('keeper');
  await dispose({ worktreeId: keeper, outcome: 'error', keepOnError: true });
  settledAs('write in a third worktree', await inTree('other', 'c-other'), 'ok');
  const other = await treeOf('other');
  await dispose({ worktreeId: other, outcome: 'error', keepOnError: true });
  const back = await acquire('coder:keeper');
  expectThat('restarted after the pin cap dropped its tree', back.restarted !== undefined, back);
}

/** Waits for the live projection to fold the whole stream, then writes the fixture files. */
async function writeFixture(stack: TestStack): Promise<void> {
  const { jsm, subjects, prefix } = stack.nats;
  const stream = subjects.journal.stream;
  // Nothing more is coming once the stream stops growing and the journal's consumer has it all.
  let lastSeq = -1;
  await eventually(
    async () => {
      const info = await jsm.streams.info(stream);
      const consumer = await jsm.consumers.info(stream, subjects.consumer(ConsumerRole.Journal));
      const quiet =
        info.state.last_seq === lastSeq &&
        consumer.num_pending === 0 &&
        consumer.num_ack_pending === 0;
      lastSeq = info.state.last_seq;
      await new Promise((r) => setTimeout(r, 500));
      return quiet || undefined;
    },
    { timeoutMs: 60_000, what: 'the journal projection caught up' },
  );

  const lines: string[] = [];
  for (let seq = 1; seq <= lastSeq; seq++) {
    const msg = await jsm.streams.getMessage(stream, { seq });
    if (!msg) continue;
    lines.push(
      JSON.stringify({ seq, subject: msg.subject, event: JSON.parse(decoder.decode(msg.data)) }),
    );
  }
  const { db } = await createDb({ url: stack.schema.url, schema: stack.schema.schema });
  let snapshot: unknown;
  try {
    snapshot = await projectionSnapshot(db);
  } finally {
    await db.destroy();
  }

  // The run's own prefix reads as a deployment's.
  const general = (text: string) => text.split(prefix).join('toolgate');
  await mkdir(OUT_DIR, { recursive: true });
  const base = path.join(OUT_DIR, `journal-v${JOURNAL_SCHEMA_VERSION}`);
  await writeFile(`${base}.jsonl`, general(lines.join('\n') + '\n'));
  // Formatted as the repository's lint checks it.
  const projectionFile = `${base}.projection.json`;
  const options = { ...(await resolveConfig(projectionFile)), filepath: projectionFile };
  await writeFile(projectionFile, await format(general(JSON.stringify(snapshot)), options));
  log(`wrote ${lines.length} events to ${base}.jsonl and the projection beside it`);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    log(`failed: ${(err as Error)?.stack ?? String(err)}`);
    process.exit(1);
  },
);
