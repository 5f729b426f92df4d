import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { SpanKind } from '@opentelemetry/api';
import { InMemorySpanExporter, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { eventually } from '@toolgate/testing';
import { setupTelemetry, type Telemetry } from '@toolgate/telemetry';
import { startTestStack, TOKENS, type TestStack } from '../support/test-stack';

describe('one dispatch is one trace across all four services', () => {
  const exporter = new InMemorySpanExporter();
  let telemetry: Telemetry;
  let stack: TestStack;

  beforeAll(async () => {
    telemetry = setupTelemetry({ serviceName: 'toolgate-test', exporter, simple: true });
    stack = await startTestStack('tracing');
    await writeFile(path.join(stack.workdir, 'traced.txt'), 'traced\n');
  });
  afterAll(async () => {
    await stack.stop();
    await telemetry.shutdown();
  });

  it('continues the caller traceparent through gateway, evaluator, executor and journal', async () => {
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    const res = await fetch(`${stack.all.gateway.url}/v1/dispatches`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${TOKENS.acmeAgent}`,
        'content-type': 'application/json',
        traceparent: `00-${traceId}-00f067aa0ba902b7-01`,
      },
      body: JSON.stringify({
        runId: 'run-trace',
        callId: 'c1',
        agent: { agentType: 'coder' },
        tool: 'read_file',
        input: { path: 'traced.txt' },
        wait: 10_000,
      }),
    });
    const body = (await res.json()) as { dispatchId: string; state: string };
    expect(body.state).toBe('settled');

    const spans = await eventually(
      () => {
        const all = exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === traceId);
        const journalSpans = all.filter(
          (s) =>
            s.kind === SpanKind.CONSUMER &&
            String(s.attributes['messaging.consumer.group.name']).endsWith('_journal'),
        );
        return journalSpans.length >= 4 ? all : undefined;
      },
      { what: 'the journal to process the four events' },
    );

    const named = (pattern: RegExp, kind?: SpanKind): ReadableSpan[] =>
      spans.filter((s) => pattern.test(s.name) && (kind === undefined || s.kind === kind));
    expect(named(/^gateway dispatch\.submit$/, SpanKind.SERVER)).toHaveLength(1);
    for (const event of ['requested', 'decided', 'started', 'settled']) {
      expect(
        named(new RegExp(`^send .*\\.${event}$`), SpanKind.PRODUCER).length,
      ).toBeGreaterThanOrEqual(1);
    }
    const evaluation = spans.find(
      (s) =>
        s.kind === SpanKind.CONSUMER &&
        String(s.attributes['messaging.consumer.group.name']).endsWith('_evaluator-requested'),
    );
    expect(evaluation?.attributes).toMatchObject({
      'toolgate.verdict': 'allow',
      'toolgate.decided_by': 'default',
      'toolgate.tool': 'read_file',
      'toolgate.risk': 'read',
      'toolgate.dispatch_id': body.dispatchId,
    });
    const execution = named(/^execute read_file$/);
    expect(execution).toHaveLength(1);
    expect(execution[0]!.attributes).toMatchObject({
      'toolgate.executor': 'inprocess',
      'toolgate.outcome': 'ok',
    });
    expect(
      spans.some(
        (s) =>
          s.kind === SpanKind.CONSUMER &&
          String(s.attributes['messaging.consumer.group.name']).endsWith('_executor-decided'),
      ),
    ).toBe(true);
    // Every span hangs off the caller's trace: one dispatch, one trace.
    expect(new Set(spans.map((s) => s.spanContext().traceId))).toEqual(new Set([traceId]));
  });
});
