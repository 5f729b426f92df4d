import { context, trace } from '@opentelemetry/api';
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace-base';
import { setupTelemetry } from './telemetry-setup';

describe('setupTelemetry', () => {
  const saved = {
    endpoint: process.env.OTEL_EXPORTER_OTLP_ENDPOINT,
    traces: process.env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
  };
  beforeAll(() => {
    delete process.env.OTEL_EXPORTER_OTLP_ENDPOINT;
    delete process.env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT;
  });
  afterAll(() => {
    if (saved.endpoint !== undefined) process.env.OTEL_EXPORTER_OTLP_ENDPOINT = saved.endpoint;
    if (saved.traces !== undefined) process.env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT = saved.traces;
  });

  it('installs no provider and no context manager when spans would go nowhere', async () => {
    const telemetry = setupTelemetry({ serviceName: 'setup-spec' });
    const span = trace.getTracer('setup-spec').startSpan('unexported');
    expect(span.isRecording()).toBe(false);
    // No context manager: a context entered with `with` is not the active one inside it.
    const seen = context.with(trace.setSpan(context.active(), span), () => context.active());
    expect(trace.getSpan(seen)).toBeUndefined();
    span.end();
    await telemetry.shutdown();
  });

  it('records and exports spans, in their context, once an exporter is given', async () => {
    const exporter = new InMemorySpanExporter();
    const telemetry = setupTelemetry({ serviceName: 'setup-spec', exporter, simple: true });
    const span = trace.getTracer('setup-spec').startSpan('exported');
    expect(span.isRecording()).toBe(true);
    const seen = context.with(trace.setSpan(context.active(), span), () => context.active());
    expect(trace.getSpan(seen)).toBe(span);
    span.end();
    expect(exporter.getFinishedSpans().map((s) => s.name)).toEqual(['exported']);
    await telemetry.shutdown();
  });
});
