import { headers } from '@nats-io/transport-node';
import { ApiOperation, UntrustedReason } from '@toolgate/contracts';
import { GatewayMetricName } from '@toolgate/gateway';
import { JournalMetricName } from '@toolgate/journal';
import { MetricName } from '@toolgate/service-kit';
import { ExecutorMetricName } from '@toolgate/tool-executor';
import { eventually } from '@toolgate/testing';
import { startTestStack, TOKENS, type TestStack } from '../support/test-stack';
import { shippedQueries } from './observability-queries';
import { matchesLabels, selectorsOf } from './promql';

/**
 * Every service's `/metrics` after a run of real dispatches — ok, an error, a denial, a replay,
 * an approval a person resolved, one that timed out and one still pending, an API error, a request
 * over NATS — read as Prometheus reads it. Every series that any dashboard panel or alert rule
 * selects must be there with a value, found by parsing the dashboards and rules themselves; and
 * the values must say what happened, each dispatch counted once.
 */

/** One sample of the Prometheus text format: `name{a="b",…} value`. */
interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

function parseExposition(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match) throw new Error(`not a Prometheus sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const pair of (match[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g))
      labels[pair[1]!] = pair[2]!;
    samples.push({ name: match[1]!, labels, value: Number(match[3]) });
  }
  return samples;
}

async function scrape(baseUrl: string): Promise<{ contentType: string | null; samples: Sample[] }> {
  const res = await fetch(`${baseUrl}/metrics`);
  expect(res.status).toBe(200);
  return {
    contentType: res.headers.get('content-type'),
    samples: parseExposition(await res.text()),
  };
}

const find = (samples: Sample[], name: string, labels: Record<string, string> = {}) =>
  samples.filter(
    (s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v),
  );
const total = (samples: Sample[], name: string, labels: Record<string, string> = {}) =>
  find(samples, name, labels).reduce((sum, s) => sum + s.value, 0);

const agent = { agentType: 'coder', label: 'metrics' };

describe('GET /metrics on every service after real dispatches (real NATS and PostgreSQL)', () => {
  let stack: TestStack;
  let prefix: string;
  /** The five services as Prometheus names them (deploy/prometheus.yml's `service` label). */
  let services: { service: string; url: string }[];

  const submit = (callId: string, tool: string, input: unknown, wait: number) =>
    stack.http('POST', '/v1/dispatches', TOKENS.acmeAgent, {
      runId: 'run-metrics',
      callId,
      agent,
      tool,
      input,
      wait,
    });

  /** The dispatch's outcome once the journal has it. */
  const settledOutcome = (dispatchId: string) =>
    eventually(
      async () => {
        const res = await stack.http('GET', `/v1/dispatches/${dispatchId}`, TOKENS.acmeAgent);
        return res.body?.dispatch?.outcome ?? undefined;
      },
      { timeoutMs: 30_000, what: `dispatch ${dispatchId} settled` },
    );

  /** Every service's samples, labelled as the scrape config labels them. */
  const scrapeAll = async () =>
    (
      await Promise.all(
        services.map(async ({ service, url }) =>
          (await scrape(url)).samples.map((s) => ({
            ...s,
            labels: { ...s.labels, job: 'toolgate', instance: url, service },
          })),
        ),
      )
    ).flat();

  beforeAll(async () => {
    stack = await startTestStack('metrics');
    prefix = stack.nats.prefix;
    services = [
      { service: 'gateway', url: stack.all.gateway.url },
      { service: 'permission-evaluator', url: stack.all.evaluator.url },
      { service: 'tool-executor', url: stack.all.executor.url },
      { service: 'journal', url: stack.all.journal.url },
      { service: 'worktree', url: stack.all.worktree.url },
    ];
    const policy = await stack.http('PUT', '/v1/policy', TOKENS.acmeAdmin, {
      document: {
        engine: {
          deny: [{ tool: 'write_file', reason: 'no writes here' }],
          ask: [
            { tool: 'grep' },
            { tool: 'read_file', approvalTimeoutMs: 300 },
            { tool: 'shell', approvalTimeoutMs: 3_600_000 },
          ],
        },
      },
    });
    expect(policy.status).toBe(200);

    const ok = await submit('ok', 'list_dir', { path: '.' }, 10_000);
    expect(ok.body).toMatchObject({ status: 'accepted', settled: { outcome: 'ok' } });
    const replayed = await submit('ok', 'list_dir', { path: '.' }, 10_000);
    expect(replayed.body).toMatchObject({ status: 'replayed', settled: { outcome: 'ok' } });
    const failed = await submit('error', 'list_dir', { path: 'no-such-directory' }, 10_000);
    expect(failed.body).toMatchObject({ settled: { outcome: 'error' } });
    const denied = await submit('denied', 'write_file', { path: 'x.txt', content: 'x' }, 10_000);
    expect(denied.body).toMatchObject({ settled: { outcome: 'denied' } });

    // Asked, then resolved by a person: runs.
    const asked = await submit('asked', 'grep', { pattern: 'nothing-matches-this' }, 5_000);
    expect(asked.body).toMatchObject({ state: 'suspended' });
    // The list is the projection's: it has the approval once the journal folded `suspended`.
    const approval = await eventually(
      async () => {
        const list = await stack.http('GET', '/v1/approvals?tool=grep', TOKENS.acmeApprover);
        return (list.body.approvals as { approvalKey: string; dispatchId: string }[])[0];
      },
      { what: 'the grep approval listed' },
    );
    const resolved = await stack.http(
      'POST',
      `/v1/approvals/${approval.approvalKey}/resolve`,
      TOKENS.acmeApprover,
      { decision: 'allow', reason: 'metrics test', dispatchId: approval.dispatchId },
    );
    expect(resolved.status).toBe(200);
    expect(await settledOutcome(asked.body.dispatchId)).toBe('ok');

    // Asked, and nobody answers: the journal's sweeper applies the timeout decision (deny).
    const timedOut = await submit('timed-out', 'read_file', { path: 'x.txt' }, 0);
    expect(await settledOutcome(timedOut.body.dispatchId)).toBe('denied');

    // Asked, and still waiting when the services are scraped.
    const pending = await submit('pending', 'shell', { command: 'echo pending' }, 5_000);
    expect(pending.body).toMatchObject({ state: 'suspended' });

    // An API error, and a request over NATS.
    expect((await stack.http('GET', '/v1/runs/no-such-run', TOKENS.acmeAgent)).status).toBe(404);
    const reply = await stack.all.gateway.nc.request(
      stack.all.gateway.subjects.api(ApiOperation.ListTools),
      '{}',
      { timeout: 5_000, headers: authorization(TOKENS.acmeAgent) },
    );
    expect(reply.json<{ ok: boolean }>().ok).toBe(true);

    // The journal has folded every dispatch: five settled, and the parked one suspended.
    await eventually(
      async () => {
        const samples = (await scrape(stack.all.journal.url)).samples;
        const settled = total(samples, JournalMetricName.DispatchesSettled);
        const verdicts = total(samples, JournalMetricName.Verdicts);
        return settled === 5 && verdicts === 6 ? true : undefined;
      },
      { timeoutMs: 30_000, what: 'the journal counting every dispatch' },
    );
  });
  afterAll(() => stack?.stop());

  it('serves the Prometheus text format with default process metrics on each of the five services', async () => {
    for (const { service, url } of services) {
      const { contentType, samples } = await scrape(url);
      expect([service, contentType]).toEqual([
        service,
        expect.stringMatching(/^text\/plain;.*version=0\.0\.4/),
      ]);
      expect([service, find(samples, 'process_cpu_user_seconds_total').length]).toEqual([
        service,
        1,
      ]);
      expect([service, find(samples, 'nodejs_heap_size_used_bytes')[0]!.value]).toEqual([
        service,
        expect.any(Number),
      ]);
    }
  });

  it('has every series each dashboard panel and alert rule selects, with values', async () => {
    const samples = await scrapeAll();
    const queries = shippedQueries();
    expect(queries.length).toBeGreaterThan(25);
    const missing: string[] = [];
    let checked = 0;
    for (const { where, expr } of queries) {
      for (const selector of selectorsOf(expr)) {
        checked++;
        const series = samples.filter(
          (s) => s.name === selector.metric && matchesLabels(selector.matchers, s.labels),
        );
        if (!series.length || !series.every((s) => Number.isFinite(s.value)))
          missing.push(`${where}: ${selector.text}`);
      }
    }
    expect(checked).toBeGreaterThan(queries.length);
    expect(missing).toEqual([]);
  });

  it('counts each dispatch once, in the journal: outcomes by code, verdicts by layer and rule kind, latencies', async () => {
    const journal = (await scrape(stack.all.journal.url)).samples;
    const settled = (outcome: string, code: string) =>
      total(journal, JournalMetricName.DispatchesSettled, {
        outcome,
        code,
        tenant: 'acme',
      });
    expect(settled('ok', 'ok')).toBe(2);
    expect(settled('error', 'tool-failed') + settled('error', 'path-outside-scope')).toBe(1);
    expect(settled('denied', 'denied')).toBe(2);
    expect(
      find(journal, JournalMetricName.DispatchesSettled, { outcome: 'ok', tool: 'list_dir' }),
    ).toHaveLength(1);
    expect(
      total(journal, JournalMetricName.Verdicts, {
        verdict: 'deny',
        decided_by: 'deny-rule',
        rule_kind: 'rule',
      }),
    ).toBe(1);
    expect(
      total(journal, JournalMetricName.Verdicts, { verdict: 'ask', decided_by: 'ask-rule' }),
    ).toBe(3);
    expect(total(journal, JournalMetricName.Verdicts, { verdict: 'allow' })).toBe(2);

    const count = (name: string, labels: Record<string, string>) =>
      total(journal, `${name}_count`, labels);
    expect(count(JournalMetricName.DispatchLatencySeconds, { path: 'direct' })).toBe(3);
    expect(count(JournalMetricName.DispatchLatencySeconds, { path: 'approval' })).toBe(2);
    expect(count(JournalMetricName.DispatchHopSeconds, { hop: 'requested-decided' })).toBe(6);
    expect(count(JournalMetricName.DispatchHopSeconds, { hop: 'decided-started' })).toBe(2);
    expect(count(JournalMetricName.DispatchHopSeconds, { hop: 'resolved-started' })).toBe(1);
    expect(count(JournalMetricName.DispatchHopSeconds, { hop: 'started-settled' })).toBe(3);
    expect(
      total(journal, `${JournalMetricName.DispatchLatencySeconds}_sum`, { path: 'approval' }),
    ).toBeGreaterThan(0.3);

    // Only the journal measures dispatches, so a sum over services counts each once.
    const evaluator = (await scrape(stack.all.evaluator.url)).samples;
    expect(find(evaluator, JournalMetricName.DispatchesSettled)).toEqual([]);
    expect(find(evaluator, MetricName.MessagesProcessed, { role: 'journal' })).toEqual([]);
  });

  it('counts approvals by source, times their waits, and shows the pending one and its expiry', async () => {
    const journal = (await scrape(stack.all.journal.url)).samples;
    const resolved = (source: string, decision: string) =>
      total(journal, JournalMetricName.ApprovalsResolved, { source, decision });
    expect(resolved('human', 'allow')).toBe(1);
    expect(resolved('timeout', 'deny')).toBe(1);
    expect(resolved('policy', 'allow')).toBe(0);
    expect(
      total(journal, `${JournalMetricName.ApprovalWaitSeconds}_sum`, { source: 'timeout' }),
    ).toBeGreaterThanOrEqual(0.3);
    expect(find(journal, JournalMetricName.ApprovalsPending, { tenant: 'acme' })[0]?.value).toBe(1);
    const expiry = find(journal, JournalMetricName.ApprovalsNextExpirySeconds, {
      tenant: 'acme',
    })[0]!.value;
    expect(expiry).toBeGreaterThan(3_000);
    expect(expiry).toBeLessThanOrEqual(3_600);
  });

  it('counts replays and API requests by transport, operation and status in the gateway', async () => {
    const gateway = (await scrape(stack.all.gateway.url)).samples;
    expect(
      total(gateway, GatewayMetricName.DispatchSubmissions, {
        status: 'replayed',
        tenant: 'acme',
        tool: 'list_dir',
      }),
    ).toBe(1);
    expect(total(gateway, GatewayMetricName.DispatchSubmissions, { status: 'accepted' })).toBe(6);
    const requests = (labels: Record<string, string>) =>
      total(gateway, GatewayMetricName.ApiRequests, labels);
    expect(requests({ transport: 'http', operation: 'dispatch.submit', status: 'ok' })).toBe(7);
    expect(requests({ transport: 'http', operation: 'run.get', status: 'not-found' })).toBe(1);
    expect(requests({ transport: 'nats', operation: 'tools.list', status: 'ok' })).toBe(1);
    expect(
      total(gateway, `${GatewayMetricName.ApiRequestSeconds}_count`, {
        transport: 'http',
        operation: 'approvals.resolve',
      }),
    ).toBe(1);
  });

  it('times tool runs by executor in the executor, and counts its claims', async () => {
    const executor = (await scrape(stack.all.executor.url)).samples;
    expect(
      total(executor, `${ExecutorMetricName.ToolDurationSeconds}_count`, {
        executor: 'inprocess',
      }),
    ).toBe(3);
    expect(
      total(executor, `${ExecutorMetricName.ToolDurationSeconds}_count`, {
        executor: 'inprocess',
        tool: 'list_dir',
        outcome: 'error',
      }),
    ).toBe(1);
    expect(total(executor, ExecutorMetricName.ExecutorClaims, { outcome: 'claimed' })).toBe(3);
    // Every refusal reason is there from the start, at zero.
    expect(find(executor, ExecutorMetricName.ExecutorRefusals).length).toBeGreaterThan(5);
    expect(total(executor, ExecutorMetricName.ExecutorRefusals)).toBe(0);
  });

  it('reports each durable consumer’s backlog, redeliveries and ack floor, and the projection’s lag and batches', async () => {
    const evaluator = (await scrape(stack.all.evaluator.url)).samples;
    const consumer = `${prefix}_evaluator-requested`;
    for (const name of [
      MetricName.ConsumerPending,
      MetricName.ConsumerAckPending,
      MetricName.ConsumerRedelivered,
      MetricName.ConsumerAckFloor,
    ])
      expect([name, find(evaluator, name, { consumer })]).toEqual([name, [expect.anything()]]);
    // Dead letters start at zero for each event type the consumer reads, so the first one is an increase.
    expect(
      find(evaluator, MetricName.MessagesProcessed, {
        role: 'evaluator',
        event: 'requested',
        outcome: 'dead-letter',
      })[0]?.value,
    ).toBe(0);
    // So do untrusted messages, for every reason each reader refuses them for.
    const untrusted = (samples: Sample[], role: string) =>
      find(samples, MetricName.UntrustedEvents, { role })
        .map((s) => `${s.labels.reason}=${s.value}`)
        .sort();
    const zeros = Object.values(UntrustedReason)
      .map((reason) => `${reason}=0`)
      .sort();
    expect(untrusted(evaluator, 'evaluator')).toEqual(zeros);
    expect(untrusted((await scrape(stack.all.journal.url)).samples, 'request')).toEqual(zeros);

    const journal = await eventually(
      async () => {
        const samples = (await scrape(stack.all.journal.url)).samples;
        return find(samples, JournalMetricName.ProjectionLag)[0]?.value === 0 ? samples : undefined;
      },
      { what: 'the projection caught up' },
    );
    const batches = total(journal, `${JournalMetricName.ProjectionBatchSize}_count`);
    const folded = total(journal, `${JournalMetricName.ProjectionBatchSize}_sum`);
    expect(batches).toBeGreaterThan(0);
    // Every event folded once: as many as the journal consumer acked.
    expect(folded).toBe(
      total(journal, MetricName.MessagesProcessed, { role: 'journal', outcome: 'ack' }),
    );
  });

  it('counts each service’s open NATS connections', async () => {
    const connections = async (url: string) =>
      find((await scrape(url)).samples, MetricName.NatsConnections)[0]?.value;
    // The gateway and the evaluator keep a second connection for their key-value mirrors.
    expect(await connections(stack.all.gateway.url)).toBe(2);
    expect(await connections(stack.all.evaluator.url)).toBe(2);
    expect(await connections(stack.all.journal.url)).toBe(1);
  });
});

function authorization(token: string) {
  const h = headers();
  h.set('Authorization', `Bearer ${token}`);
  return h;
}
