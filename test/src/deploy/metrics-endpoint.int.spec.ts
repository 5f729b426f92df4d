import { MetricName } from '@toolgate/service-kit';
import { eventually } from '@toolgate/testing';
import { startTestStack, TOKENS, type TestStack } from '../support/test-stack';

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

describe('GET /metrics on every service (real NATS and PostgreSQL)', () => {
  let stack: TestStack;
  let prefix: string;

  beforeAll(async () => {
    stack = await startTestStack('metrics');
    prefix = stack.nats.prefix;
    // One call that runs to the end, one that is parked for a human.
    const submit = (callId: string, tool: string, input: unknown, wait: number) =>
      stack.http('POST', '/v1/dispatches', TOKENS.acmeAgent, {
        runId: 'run-metrics',
        callId,
        agent: { agentType: 'coder', label: 'metrics' },
        tool,
        input,
        wait,
      });
    const ok = await submit('call-ok', 'list_dir', { path: '.' }, 10_000);
    expect(ok.body).toMatchObject({ state: 'settled', settled: { outcome: 'ok' } });
    await stack.http('PUT', '/v1/policy', TOKENS.acmeAdmin, {
      document: { engine: { ask: [{ tool: 'shell' }] } },
    });
    const parked = await submit('call-ask', 'shell', { command: 'echo parked' }, 5_000);
    expect(parked.status).toBe(202);
  });
  afterAll(() => stack?.stop());

  it('serves the Prometheus text format with default process metrics on each of the five services', async () => {
    for (const service of [
      stack.all.gateway,
      stack.all.evaluator,
      stack.all.executor,
      stack.all.journal,
      stack.all.worktree,
    ]) {
      const { contentType, samples } = await scrape(service.url);
      expect([service.name, contentType]).toEqual([
        service.name,
        expect.stringMatching(/^text\/plain;.*version=0\.0\.4/),
      ]);
      expect([service.name, find(samples, 'process_cpu_user_seconds_total').length]).toEqual([
        service.name,
        1,
      ]);
      expect([service.name, find(samples, 'nodejs_heap_size_used_bytes')[0]!.value]).toEqual([
        service.name,
        expect.any(Number),
      ]);
    }
  });

  it('counts and times the messages each consumer settled, per role and event type, in its own service only', async () => {
    const evaluator = (await scrape(stack.all.evaluator.url)).samples;
    const requested = find(evaluator, MetricName.MessagesProcessed, {
      role: 'evaluator',
      event: 'requested',
      outcome: 'ack',
    });
    expect(requested).toHaveLength(1);
    expect(requested[0]!.value).toBe(2);
    const count = find(evaluator, `${MetricName.MessageProcessingSeconds}_count`, {
      role: 'evaluator',
      event: 'requested',
    });
    expect(count[0]?.value).toBe(2);
    const inf = find(evaluator, `${MetricName.MessageProcessingSeconds}_bucket`, {
      role: 'evaluator',
      event: 'requested',
      le: '+Inf',
    });
    expect(inf[0]?.value).toBe(2);
    expect(
      find(evaluator, `${MetricName.MessageProcessingSeconds}_sum`, { role: 'evaluator' })[0]!
        .value,
    ).toBeGreaterThan(0);
    // The all-in-one process runs five registries: the evaluator's knows nothing of the journal's consumer.
    expect(find(evaluator, MetricName.MessagesProcessed, { role: 'journal' })).toEqual([]);

    const executor = (await scrape(stack.all.executor.url)).samples;
    expect(
      find(executor, MetricName.MessagesProcessed, {
        role: 'executor',
        event: 'decided',
        outcome: 'ack',
      })[0]?.value,
    ).toBeGreaterThanOrEqual(1);

    const journal = await eventually(async () => {
      const samples = (await scrape(stack.all.journal.url)).samples;
      // The journal folds in stream order: the parked call's `suspended` is the last event of the two.
      const suspended = find(samples, MetricName.MessagesProcessed, {
        role: 'journal',
        event: 'suspended',
        outcome: 'ack',
      });
      return suspended[0]?.value === 1 ? samples : undefined;
    });
    expect(
      find(journal, MetricName.MessagesProcessed, {
        role: 'journal',
        event: 'settled',
        outcome: 'ack',
      })[0]!.value,
    ).toBe(1);
    expect(
      find(journal, MetricName.MessagesProcessed, {
        role: 'journal',
        event: 'requested',
        outcome: 'ack',
      })[0]!.value,
    ).toBe(2);
  });

  it('reports each durable consumer’s pending and ack-pending counts from the broker', async () => {
    const evaluator = (await scrape(stack.all.evaluator.url)).samples;
    const pending = find(evaluator, MetricName.ConsumerPending, {
      consumer: `${prefix}_evaluator-requested`,
    });
    const ackPending = find(evaluator, MetricName.ConsumerAckPending, {
      consumer: `${prefix}_evaluator-requested`,
    });
    expect(pending).toHaveLength(1);
    expect(ackPending).toHaveLength(1);
    expect(pending[0]!.value).toBeGreaterThanOrEqual(0);
    const journal = (await scrape(stack.all.journal.url)).samples;
    expect(
      find(journal, MetricName.ConsumerPending, { consumer: `${prefix}_journal` }),
    ).toHaveLength(1);
  });

  it('exposes the pending approvals per tenant from the journal projection, and drops a tenant when none is left', async () => {
    const parked = await eventually(async () => {
      const samples = (await scrape(stack.all.journal.url)).samples;
      const acme = find(samples, MetricName.ApprovalsPending, { tenant: 'acme' });
      return acme[0]?.value === 1 ? acme : undefined;
    });
    expect(parked).toHaveLength(1);
    const list = await stack.http('GET', '/v1/approvals', TOKENS.acmeApprover);
    const approval = (list.body.approvals as { approvalKey: string; dispatchId: string }[])[0]!;
    const resolved = await stack.http(
      'POST',
      `/v1/approvals/${approval.approvalKey}/resolve`,
      TOKENS.acmeApprover,
      {
        decision: 'deny',
        reason: 'metrics test',
        dispatchId: approval.dispatchId,
      },
    );
    expect(resolved.status).toBe(200);
    await eventually(async () => {
      const samples = (await scrape(stack.all.journal.url)).samples;
      return find(samples, MetricName.ApprovalsPending, { tenant: 'acme' }).length === 0
        ? true
        : undefined;
    });
    // Only the journal owns the projection, so only it reports the gauge's series.
    const evaluator = (await scrape(stack.all.evaluator.url)).samples;
    expect(find(evaluator, MetricName.ApprovalsPending)).toEqual([]);
  });
});
