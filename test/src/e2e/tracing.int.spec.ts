import { spawn, type ChildProcess } from 'node:child_process';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { randomBytes } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { eventually } from '@toolgate/testing';
import {
  ESpanKind,
  startOtlpReceiver,
  type OtlpReceiver,
  type ReceivedSpan,
} from '../support/otlp-receiver';
import { REPO_ROOT } from '../support/process-stack';
import { TEAM_WORKER_SERVICE } from '../support/team-worker';
import { startTestProcessStack, type TestProcessStack } from '../support/test-process-stack';
import { TOKENS } from '../support/test-stack';

const GATEWAY = 'toolgate-gateway';
const EVALUATOR = 'toolgate-permission-evaluator';
const EXECUTOR = 'toolgate-tool-executor';
const JOURNAL = 'toolgate-journal';
/** The team's process: its SDK worker and its hook service, exporting to the same receiver. */
const TEAM = TEAM_WORKER_SERVICE;

const agent = { agentType: 'coder', label: 'tracing' };
/** An input value that must never show up in a span. */
const SECRETISH = 'k-7f3a9c-not-for-spans';

/** A W3C traceparent of a caller's own span, in a fresh trace. */
function callerSpan(): { traceId: string; spanId: string; traceparent: string } {
  const traceId = randomBytes(16).toString('hex');
  const spanId = randomBytes(8).toString('hex');
  return { traceId, spanId, traceparent: `00-${traceId}-${spanId}-01` };
}

/**
 * The real path of a trace: the services run as separate processes and export their spans over
 * OTLP/HTTP (`OTEL_EXPORTER_OTLP_ENDPOINT`, JSON bodies) to a receiver in this test, as they would
 * to a collector; a team's SDK worker and remote hook, in a process of their own, export there too. Each
 * dispatch must arrive as one trace: every span parented inside it, every hop present, with the
 * decision and the outcome as attributes.
 */
describe('traces across processes, exported over OTLP/HTTP', () => {
  let receiver: OtlpReceiver;
  let stack: TestProcessStack;
  let worker: ChildProcess | undefined;
  let policyRevision: number;

  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    const otel = {
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      // A short batch delay: spans arrive within a moment of ending.
      OTEL_BSP_SCHEDULE_DELAY: '100',
    };
    stack = await startTestProcessStack('tracing', {
      services: ['journal', 'permission-evaluator', 'tool-executor', 'gateway'],
      env: otel,
      readyTimeoutMs: 150_000,
    });
    await writeFile(path.join(stack.workdir, 'listed.txt'), 'listed\n');

    // The team's side, a process of its own: the SDK worker and a hook service.
    worker = spawnTeamWorker({
      ...otel,
      NATS_URL: stack.env.NATS_URL,
      TOOLGATE_PREFIX: stack.nats.prefix,
      TOOLGATE_TOKEN: TOKENS.acmeAdmin,
    });
    await teamWorkerReady(worker);

    const put = await http('PUT', '/v1/policy', TOKENS.acmeAdmin, {
      document: {
        engine: {
          deny: [{ tool: 'write_file', reason: 'no writes while tracing' }],
          ask: [{ tool: 'list_dir' }],
        },
        remote: { engine: { hooks: [{ name: 'audit', unauthenticated: true }] } },
      },
    });
    expect(put.status).toBe(200);
    policyRevision = (put.body as { revision: number }).revision;
  }, 180_000);

  afterAll(async () => {
    await stopTeamWorker(worker);
    await stack?.stop();
    await receiver?.close();
  }, 60_000);

  afterEach(() => {
    // Every export was OTLP/HTTP JSON to /v1/traces.
    expect(receiver.refused).toEqual([]);
  });

  function http(
    method: string,
    route: string,
    token: string,
    body?: unknown,
    traceparent?: string,
  ): Promise<{ status: number; body: any }> {
    return stack.http(method, route, token, body, traceparent ? { traceparent } : {});
  }

  /** Submits a call as an agent whose own span is `caller`, waiting for its outcome. */
  async function dispatch(
    caller: { traceparent: string },
    runId: string,
    toolName: string,
    input: unknown,
  ) {
    const res = await http(
      'POST',
      '/v1/dispatches',
      TOKENS.acmeAgent,
      { runId, callId: 'c1', agent, tool: toolName, input, wait: 20_000 },
      caller.traceparent,
    );
    expect([200, 202]).toContain(res.status);
    return res.body as {
      dispatchId: string;
      state: string;
      settled?: { outcome: string; error?: { code: string } };
    };
  }

  /** A span expected in a trace: who sends it and what it is called. */
  type Expected = { service: string; name: string };

  /** Waits until the receiver holds every expected span of a trace, then returns the trace. */
  async function traceWith(traceId: string, expected: Expected[]): Promise<Trace> {
    let missing: Expected[] = expected;
    try {
      return await eventually(
        () => {
          const spans = receiver.trace(traceId);
          missing = expected.filter(
            (e) => !spans.some((s) => s.service === e.service && s.name === e.name),
          );
          return missing.length ? undefined : new Trace(traceId, spans);
        },
        { timeoutMs: 15_000, what: `trace ${traceId}` },
      );
    } catch (err) {
      const have = receiver.trace(traceId).map((s) => `${s.service}: ${s.name}`);
      throw new Error(
        `trace ${traceId} is missing ${JSON.stringify(missing)}; it has ${JSON.stringify(have)}`,
        { cause: err },
      );
    }
  }

  /** A journal event's subject, as spans name their destination. */
  const event = (runId: string, dispatchId: string, type: string) =>
    stack.nats.subjects.journal.event('acme', runId, dispatchId, type as 'requested');
  const send = (subject: string) => `send ${subject}`;
  const processed = (subject: string) => `process ${subject}`;

  /** The spans every dispatch has on its way in: submit, requested, the evaluation, the hook. */
  function intake(runId: string, dispatchId: string): Expected[] {
    const hookSubject = stack.nats.subjects.hook('acme', 'audit');
    return [
      { service: GATEWAY, name: 'gateway dispatch.submit' },
      { service: GATEWAY, name: send(event(runId, dispatchId, 'requested')) },
      { service: EVALUATOR, name: processed(event(runId, dispatchId, 'requested')) },
      { service: EVALUATOR, name: send(hookSubject) },
      { service: TEAM, name: processed(hookSubject) },
      { service: EVALUATOR, name: send(event(runId, dispatchId, 'decided')) },
      { service: JOURNAL, name: processed(event(runId, dispatchId, 'requested')) },
      { service: JOURNAL, name: processed(event(runId, dispatchId, 'decided')) },
      { service: JOURNAL, name: processed(event(runId, dispatchId, 'settled')) },
    ];
  }

  /** Checks what every dispatch's trace has in common: its root, its tree, its messaging edges. */
  function checkShape(t: Trace, caller: { spanId: string }, runId: string, dispatchId: string) {
    // One tree under the caller's span: the gateway's SERVER span is its only child, and every
    // other span's parent is in the trace (nothing orphaned, nothing in another trace).
    const submit = t.one(GATEWAY, 'gateway dispatch.submit');
    expect(submit.kind).toBe(ESpanKind.SPAN_KIND_SERVER);
    expect(submit.parentSpanId).toBe(caller.spanId);
    for (const s of t.spans) {
      if (s === submit) continue;
      expect({ span: s.name, parentInTrace: t.byId.has(s.parentSpanId ?? '') }).toEqual({
        span: s.name,
        parentInTrace: true,
      });
    }
    // Every message is processed under the span that sent it, in whichever process.
    for (const consumer of t.spans.filter((s) => s.kind === ESpanKind.SPAN_KIND_CONSUMER)) {
      const producer = t.parentOf(consumer);
      expect({ consumer: consumer.name, producer: producer.name, kind: producer.kind }).toEqual({
        consumer: consumer.name,
        producer: consumer.name.replace(/^process /, 'send '),
        kind: ESpanKind.SPAN_KIND_PRODUCER,
      });
    }
    expect(t.parentOf(t.one(GATEWAY, send(event(runId, dispatchId, 'requested'))))).toBe(submit);
    // The hook is asked during the evaluation, and answers in the same trace.
    const evaluation = t.one(EVALUATOR, processed(event(runId, dispatchId, 'requested')));
    const hookCall = t.one(EVALUATOR, send(stack.nats.subjects.hook('acme', 'audit')));
    expect(t.ancestors(hookCall)).toContain(evaluation);
    expect(evaluation.attributes).toMatchObject({
      'toolgate.dispatch_id': dispatchId,
      'toolgate.policy_revision': policyRevision,
    });
    return { submit, evaluation };
  }

  it("an MCP tools/call continues the caller's trace from _meta.traceparent, through the same dispatch path", async () => {
    const caller = callerSpan();
    const runId = 'trace-mcp';
    const client = new Client(
      { name: 'tracing', version: '1.0.0' },
      { versionNegotiation: { mode: { pin: '2026-07-28' } } },
    );
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${stack.processes.gatewayUrl}/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${TOKENS.acmeAgent}` } },
      }),
    );
    try {
      const result = await client.callTool({
        name: 'trace_lookup',
        arguments: { key: SECRETISH },
        _meta: { traceparent: caller.traceparent, 'io.toolgate/runId': runId },
      });
      const { dispatchId, outcome } = result.structuredContent as {
        dispatchId: string;
        outcome: string;
      };
      expect(outcome).toBe('ok');
      const t = await traceWith(caller.traceId, [
        ...intake(runId, dispatchId),
        { service: EXECUTOR, name: 'execute trace_lookup' },
      ]);
      checkShape(t, caller, runId, dispatchId);
    } finally {
      await client.close();
    }
  });

  it('a remote tool call: gateway, evaluator, executor, the SDK worker and the journal in one trace', async () => {
    const caller = callerSpan();
    const runId = 'trace-ok';
    const res = await dispatch(caller, runId, 'trace_lookup', { key: SECRETISH });
    expect(res.settled?.outcome).toBe('ok');
    const { dispatchId } = res;
    const toolSubject = stack.nats.subjects.remoteTool('acme', 'trace_lookup').subject;
    const t = await traceWith(caller.traceId, [
      ...intake(runId, dispatchId),
      { service: EXECUTOR, name: processed(event(runId, dispatchId, 'decided')) },
      { service: EXECUTOR, name: 'execute trace_lookup' },
      { service: EXECUTOR, name: send(toolSubject) },
      { service: TEAM, name: processed(toolSubject) },
      { service: EXECUTOR, name: send(event(runId, dispatchId, 'started')) },
      { service: EXECUTOR, name: send(event(runId, dispatchId, 'settled')) },
      { service: JOURNAL, name: processed(event(runId, dispatchId, 'started')) },
    ]);
    const { evaluation } = checkShape(t, caller, runId, dispatchId);
    expect(new Set(t.spans.map((s) => s.service))).toEqual(
      new Set([GATEWAY, EVALUATOR, EXECUTOR, TEAM, JOURNAL]),
    );

    expect(evaluation.attributes).toMatchObject({
      'toolgate.verdict': 'allow',
      'toolgate.decided_by': 'default',
      'toolgate.tool': 'trace_lookup',
    });
    // The decision reaches the executor, which calls the worker from inside its execution span.
    const execution = t.one(EXECUTOR, 'execute trace_lookup');
    const executorIntake = t.one(EXECUTOR, processed(event(runId, dispatchId, 'decided')));
    expect(t.parentOf(executorIntake)).toBe(
      t.one(EVALUATOR, send(event(runId, dispatchId, 'decided'))),
    );
    expect(t.ancestors(execution)).toContain(executorIntake);
    expect(execution.attributes).toMatchObject({
      'toolgate.executor': 'remote',
      'toolgate.outcome': 'ok',
    });
    const worker = t.one(TEAM, processed(toolSubject));
    expect(t.ancestors(worker)).toContain(execution);
    expect(worker.attributes).toMatchObject({
      'toolgate.tool': 'trace_lookup',
      'toolgate.dispatch_id': dispatchId,
      'toolgate.outcome': 'ok',
    });
    expect(t.one(EXECUTOR, send(event(runId, dispatchId, 'settled'))).attributes).toMatchObject({
      'toolgate.outcome': 'ok',
      'toolgate.tool': 'trace_lookup',
    });
    // Nothing of the call's input or result is an attribute anywhere.
    const everything = JSON.stringify(t.spans.map((s) => s.attributes)).toLowerCase();
    expect(everything).not.toContain(SECRETISH);
  });

  it('a failing tool: its error code on the worker, the execution and the settlement', async () => {
    const caller = callerSpan();
    const runId = 'trace-error';
    const res = await dispatch(caller, runId, 'trace_lookup', { key: 'missing' });
    expect(res.settled).toMatchObject({ outcome: 'error', error: { code: 'tool-failed' } });
    const { dispatchId } = res;
    const toolSubject = stack.nats.subjects.remoteTool('acme', 'trace_lookup').subject;
    const t = await traceWith(caller.traceId, [
      ...intake(runId, dispatchId),
      { service: EXECUTOR, name: 'execute trace_lookup' },
      { service: TEAM, name: processed(toolSubject) },
      { service: EXECUTOR, name: send(event(runId, dispatchId, 'settled')) },
    ]);
    checkShape(t, caller, runId, dispatchId);
    const failed = { 'toolgate.outcome': 'error', 'toolgate.error_code': 'tool-failed' };
    expect(t.one(TEAM, processed(toolSubject)).attributes).toMatchObject(failed);
    expect(t.one(EXECUTOR, 'execute trace_lookup').attributes).toMatchObject(failed);
    expect(t.one(EXECUTOR, send(event(runId, dispatchId, 'settled'))).attributes).toMatchObject(
      failed,
    );
  });

  it('a denied call: the verdict and its rule on the evaluation, the denial on the settlement', async () => {
    const caller = callerSpan();
    const runId = 'trace-deny';
    const res = await dispatch(caller, runId, 'write_file', { path: 'x.txt', content: 'x' });
    expect(res.settled?.outcome).toBe('denied');
    const { dispatchId } = res;
    const t = await traceWith(caller.traceId, [
      ...intake(runId, dispatchId),
      { service: EVALUATOR, name: send(event(runId, dispatchId, 'settled')) },
    ]);
    const { evaluation } = checkShape(t, caller, runId, dispatchId);
    expect(evaluation.attributes).toMatchObject({
      'toolgate.verdict': 'deny',
      'toolgate.decided_by': 'deny-rule',
      'toolgate.tool': 'write_file',
    });
    expect(String(evaluation.attributes['toolgate.rule'])).toContain('write_file');
    const settlement = t.one(EVALUATOR, send(event(runId, dispatchId, 'settled')));
    expect(t.parentOf(settlement)).toBe(evaluation);
    expect(settlement.attributes).toMatchObject({
      'toolgate.outcome': 'denied',
      'toolgate.error_code': 'denied',
    });
    // Nothing ran: the executor saw the decision and neither claimed nor executed the call.
    expect(t.spans.filter((s) => /^execute |\.started$/.test(s.name)).map((s) => s.name)).toEqual(
      [],
    );
  });

  it('a call that waits for an approval stays one trace, with the wait as a span linked to the approver', async () => {
    const caller = callerSpan();
    const runId = 'trace-approval';
    const res = await dispatch(caller, runId, 'list_dir', { path: '.' });
    expect(res.state).toBe('suspended');
    const { dispatchId } = res;
    const pending = await eventually(
      async () => {
        const run = await http('GET', `/v1/runs/${runId}`, TOKENS.acmeAgent);
        return (run.body as { pending?: { key: string }[] }).pending?.[0];
      },
      { what: 'the pending approval' },
    );

    // The approver acts later, from a trace of its own.
    const approver = callerSpan();
    const resolved = await http(
      'POST',
      `/v1/approvals/${pending.key}/resolve`,
      TOKENS.acmeApprover,
      { decision: 'allow', dispatchId, runId },
      approver.traceparent,
    );
    expect(resolved.status).toBe(200);

    const t = await traceWith(caller.traceId, [
      ...intake(runId, dispatchId),
      { service: EVALUATOR, name: send(event(runId, dispatchId, 'suspended')) },
      { service: GATEWAY, name: 'approval wait' },
      { service: GATEWAY, name: send(event(runId, dispatchId, 'resolved')) },
      { service: EXECUTOR, name: processed(event(runId, dispatchId, 'resolved')) },
      { service: EXECUTOR, name: 'execute list_dir' },
      { service: EXECUTOR, name: send(event(runId, dispatchId, 'settled')) },
      { service: JOURNAL, name: processed(event(runId, dispatchId, 'suspended')) },
      { service: JOURNAL, name: processed(event(runId, dispatchId, 'resolved')) },
    ]);
    const { evaluation } = checkShape(t, caller, runId, dispatchId);
    expect(evaluation.attributes).toMatchObject({
      'toolgate.verdict': 'ask',
      'toolgate.decided_by': 'ask-rule',
    });
    const suspension = t.one(EVALUATOR, send(event(runId, dispatchId, 'suspended')));
    const wait = t.one(GATEWAY, 'approval wait');
    expect(t.parentOf(wait)).toBe(suspension);
    expect(wait.attributes).toMatchObject({
      'toolgate.dispatch_id': dispatchId,
      'toolgate.tool': 'list_dir',
      'toolgate.approval.decision': 'allow',
      'toolgate.approval.source': 'human',
    });
    // The resolution, the execution and the settlement continue under the wait.
    const resolution = t.one(GATEWAY, send(event(runId, dispatchId, 'resolved')));
    expect(t.parentOf(resolution)).toBe(wait);
    expect(t.ancestors(t.one(EXECUTOR, 'execute list_dir'))).toContain(wait);
    expect(t.one(EXECUTOR, send(event(runId, dispatchId, 'settled'))).attributes).toMatchObject({
      'toolgate.outcome': 'ok',
    });

    // The approver's request is its own trace, and the wait links to it.
    const approverTrace = await traceWith(approver.traceId, [
      { service: GATEWAY, name: 'gateway approvals.resolve' },
    ]);
    const request = approverTrace.one(GATEWAY, 'gateway approvals.resolve');
    expect(request.parentSpanId).toBe(approver.spanId);
    expect(wait.links).toEqual([{ traceId: approver.traceId, spanId: request.spanId }]);
    // The wait spans the time the call was parked: from the suspension to the approver's answer.
    expect(wait.startNs).toBeLessThanOrEqual(request.startNs);
    expect(wait.endNs).toBeGreaterThanOrEqual(request.startNs);
  });
});

/** Starts `team-worker.ts` from sources. */
function spawnTeamWorker(env: NodeJS.ProcessEnv): ChildProcess {
  return spawn(
    process.execPath,
    [
      '--require',
      path.join(REPO_ROOT, 'scripts', 'from-source.cjs'),
      path.join(REPO_ROOT, 'test', 'src', 'support', 'team-worker.ts'),
    ],
    { cwd: REPO_ROOT, env: { PATH: process.env.PATH, ...env }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
}

/** Waits for the worker's `ready`; fails with its output if it exits first. */
async function teamWorkerReady(child: ChildProcess): Promise<void> {
  let output = '';
  await new Promise<void>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      if (/^ready$/m.test(output)) resolve();
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`the team worker exited (${code}): ${output}`)));
  });
}

/** SIGTERM: the worker flushes its spans and exits. */
async function stopTeamWorker(child: ChildProcess | undefined): Promise<void> {
  if (!child || child.exitCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await exited;
}

/** The spans of one trace, indexed. */
class Trace {
  readonly byId: Map<string, ReceivedSpan>;

  constructor(
    readonly traceId: string,
    readonly spans: ReceivedSpan[],
  ) {
    this.byId = new Map(spans.map((s) => [s.spanId, s]));
  }

  /** The one span of a service with this name (fails if there are none or several). */
  one(service: string, name: string): ReceivedSpan {
    const found = this.spans.filter((s) => s.service === service && s.name === name);
    expect({ service, name, count: found.length }).toEqual({ service, name, count: 1 });
    return found[0]!;
  }

  parentOf(span: ReceivedSpan): ReceivedSpan {
    const parent = this.byId.get(span.parentSpanId ?? '');
    if (!parent) throw new Error(`${span.name} has no parent in trace ${this.traceId}`);
    return parent;
  }

  /** The span's parent, its parent, … up to the trace's root. */
  ancestors(span: ReceivedSpan): ReceivedSpan[] {
    const chain: ReceivedSpan[] = [];
    for (let s = this.byId.get(span.parentSpanId ?? ''); s; s = this.byId.get(s.parentSpanId ?? ''))
      chain.push(s);
    return chain;
  }
}
