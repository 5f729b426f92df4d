import { context, propagation, trace, TraceFlags, type SpanContext } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { headers } from '@nats-io/transport-node';
import {
  extractTraceContext,
  injectTraceContext,
  natsHeaderGetter,
  natsHeaderSetter,
} from './nats-header-propagation';

const remote: SpanContext = {
  traceId: '0af7651916cd43dd8448eb211c80319c',
  spanId: 'b7ad6b7169203331',
  traceFlags: TraceFlags.SAMPLED,
};

describe('NATS header propagation with real message headers', () => {
  beforeAll(() => {
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  });
  afterAll(() => {
    propagation.disable();
  });

  it('the setter writes and the getter reads back, listing the keys', () => {
    const h = headers();
    natsHeaderSetter.set(
      h,
      'traceparent',
      '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
    );
    natsHeaderSetter.set(h, 'tracestate', 'vendor=1');
    expect(natsHeaderGetter.get(h, 'traceparent')).toEqual([
      '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
    ]);
    expect(natsHeaderGetter.keys(h).sort()).toEqual(['traceparent', 'tracestate']);
  });

  it('the getter answers undefined for a missing key and for absent headers', () => {
    expect(natsHeaderGetter.get(headers(), 'traceparent')).toBeUndefined();
    expect(natsHeaderGetter.get(undefined, 'traceparent')).toBeUndefined();
    expect(natsHeaderGetter.keys(undefined)).toEqual([]);
  });

  it('inject then extract round-trips a span context through headers', () => {
    const ctx = trace.setSpanContext(context.active(), { ...remote, traceState: undefined });
    const h = injectTraceContext(headers(), ctx);
    expect(h.get('traceparent')).toBe(`00-${remote.traceId}-${remote.spanId}-01`);

    const extracted = trace.getSpanContext(extractTraceContext(h));
    expect(extracted).toMatchObject({ ...remote, isRemote: true });
  });

  it('injectTraceContext creates headers when none are given', () => {
    const ctx = trace.setSpanContext(context.active(), remote);
    expect(injectTraceContext(undefined, ctx).get('traceparent')).toContain(remote.traceId);
  });

  it('extracting from absent or traceless headers leaves the base context alone', () => {
    expect(trace.getSpanContext(extractTraceContext(undefined))).toBeUndefined();
    expect(trace.getSpanContext(extractTraceContext(headers()))).toBeUndefined();
    const base = trace.setSpanContext(context.active(), remote);
    expect(trace.getSpanContext(extractTraceContext(headers(), base))).toEqual(remote);
  });
});
