import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, TraceFlags } from '@opentelemetry/api';
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace-base';
import { headers } from '@nats-io/transport-node';
import { injectTraceContext } from './nats-header-propagation';
import { annotate, Attr, consumerSpan, inSpan, producerSpan, resumedSpan } from './spans';
import { setupTelemetry, type Telemetry } from './telemetry-setup';

describe('spans, read from an in-memory exporter', () => {
  const exporter = new InMemorySpanExporter();
  let telemetry: Telemetry;

  beforeAll(() => {
    telemetry = setupTelemetry({ serviceName: 'telemetry-spec', exporter, simple: true });
  });
  afterEach(() => exporter.reset());
  afterAll(async () => {
    await telemetry.shutdown();
  });

  const finished = (name: string) => {
    const spans = exporter.getFinishedSpans().filter((s) => s.name === name);
    expect(spans).toHaveLength(1);
    return spans[0]!;
  };

  it('inSpan returns the result, ends the span and makes it the active one inside', async () => {
    const result = await inSpan('work', { attributes: { a: 1 } }, async (span) => {
      expect(trace.getActiveSpan()).toBe(span);
      annotate({ [Attr.Tool]: 'read_file', skipped: undefined });
      return 42;
    });
    expect(result).toBe(42);
    const span = finished('work');
    expect(span.kind).toBe(SpanKind.INTERNAL);
    expect(span.attributes).toEqual({ a: 1, [Attr.Tool]: 'read_file' });
    expect(span.status.code).toBe(SpanStatusCode.UNSET);
  });

  it('inSpan records a thrown error as an exception event, sets status ERROR and rethrows', async () => {
    const boom = new Error('disk full');
    await expect(inSpan('failing', {}, () => Promise.reject(boom))).rejects.toBe(boom);
    const span = finished('failing');
    expect(span.status).toEqual({ code: SpanStatusCode.ERROR, message: 'disk full' });
    expect(span.events).toEqual([
      expect.objectContaining({
        name: 'exception',
        attributes: expect.objectContaining({
          'exception.message': 'disk full',
          'exception.type': 'Error',
        }),
      }),
    ]);
  });

  it('consumerSpan continues the trace carried in the message headers', async () => {
    const parent = {
      traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
      spanId: '00f067aa0ba902b7',
      traceFlags: TraceFlags.SAMPLED,
    };
    const h = injectTraceContext(headers(), trace.setSpanContext(ROOT_CONTEXT, parent));
    await consumerSpan(
      'toolgate.journal.requested',
      h,
      { [Attr.DispatchId]: 'd1' },
      async () => undefined,
    );
    const span = finished('process toolgate.journal.requested');
    expect(span.kind).toBe(SpanKind.CONSUMER);
    expect(span.spanContext().traceId).toBe(parent.traceId);
    expect(span.parentSpanContext?.spanId).toBe(parent.spanId);
    expect(span.attributes).toEqual({
      [Attr.MessagingSystem]: 'nats',
      [Attr.MessagingOperation]: 'process',
      [Attr.MessagingDestination]: 'toolgate.journal.requested',
      [Attr.DispatchId]: 'd1',
    });
  });

  it('a producer span inside a consumer span propagates one trace to the next hop', async () => {
    let outgoing = headers();
    await producerSpan('toolgate.journal.decided', {}, async () => {
      outgoing = injectTraceContext(headers());
    });
    const send = finished('send toolgate.journal.decided');
    expect(send.kind).toBe(SpanKind.PRODUCER);
    expect(send.attributes[Attr.MessagingOperation]).toBe('send');

    await consumerSpan('toolgate.journal.decided', outgoing, {}, async () => undefined);
    const process = finished('process toolgate.journal.decided');
    expect(process.spanContext().traceId).toBe(send.spanContext().traceId);
    expect(process.parentSpanContext?.spanId).toBe(send.spanContext().spanId);
  });

  it('consumerSpan without trace headers starts a new root trace and records failures too', async () => {
    await expect(
      consumerSpan('toolgate.journal.settled', undefined, {}, () =>
        Promise.reject(new Error('poison')),
      ),
    ).rejects.toThrow('poison');
    const span = finished('process toolgate.journal.settled');
    expect(span.parentSpanContext).toBeUndefined();
    expect(span.status.code).toBe(SpanStatusCode.ERROR);
  });

  it('resumedSpan continues the parked trace from its headers, starts at `since` and links to the resumer', async () => {
    const parked = {
      traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
      spanId: '00f067aa0ba902b7',
      traceFlags: TraceFlags.SAMPLED,
    };
    const h = injectTraceContext(headers(), trace.setSpanContext(ROOT_CONTEXT, parked));
    const since = new Date(Date.now() - 60_000);
    await inSpan('approver', {}, () =>
      resumedSpan('approval wait', h, since, { [Attr.DispatchId]: 'd1' }, async () =>
        producerSpan('toolgate.journal.resolved', {}, async () => undefined),
      ),
    );
    const wait = finished('approval wait');
    const approver = finished('approver');
    expect(wait.spanContext().traceId).toBe(parked.traceId);
    expect(wait.parentSpanContext?.spanId).toBe(parked.spanId);
    expect(wait.links.map((l) => l.context.spanId)).toEqual([approver.spanContext().spanId]);
    expect(wait.startTime[0]).toBe(Math.floor(since.getTime() / 1000));
    expect(wait.attributes).toEqual({ [Attr.DispatchId]: 'd1' });
    // What is published while resuming belongs to the parked trace.
    const send = finished('send toolgate.journal.resolved');
    expect(send.parentSpanContext?.spanId).toBe(wait.spanContext().spanId);
  });

  it('resumedSpan without trace headers stays in the current trace, unlinked', async () => {
    await inSpan('sweep', {}, () =>
      resumedSpan('approval wait', headers(), new Date(), {}, async () => undefined),
    );
    const wait = finished('approval wait');
    const sweep = finished('sweep');
    expect(wait.parentSpanContext?.spanId).toBe(sweep.spanContext().spanId);
    expect(wait.links).toEqual([]);
  });
});

describe('spans while no tracer provider is installed', () => {
  it('run their function with a span that records nothing, pass its result and failure through, and carry no caller context on', async () => {
    const caller = headers();
    caller.set('traceparent', '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01');
    const seen = await consumerSpan('t.in', caller, { a: 1 }, async (span) => {
      expect(span.isRecording()).toBe(false);
      expect(trace.getActiveSpan()).toBeUndefined();
      return producerSpan('t.out', {}, async () => {
        const out = injectTraceContext(headers());
        return out.get('traceparent');
      });
    });
    expect(seen).toBe('');
    const boom = new Error('disk full');
    await expect(
      resumedSpan('wait', caller, 0, {}, async () => {
        throw boom;
      }),
    ).rejects.toBe(boom);
    // A synchronous throw still rejects the promise the caller awaits, as an async span does.
    const sync = inSpan('sync', {}, (() => {
      throw boom;
    }) as () => Promise<never>);
    await expect(sync).rejects.toBe(boom);
  });
});
