import { INVALID_SPAN_CONTEXT, trace } from '@opentelemetry/api';
import { requestTraceId } from './request-trace';

const TRACE = '0af7651916cd43dd8448eb211c80319c';
const noSpan = trace.wrapSpanContext(INVALID_SPAN_CONTEXT);

describe('requestTraceId', () => {
  it("is the trace the caller's traceparent names when nothing records a span of its own", () => {
    expect(requestTraceId(noSpan, { traceparent: `00-${TRACE}-b7ad6b7169203331-01` })).toBe(TRACE);
    expect(requestTraceId(noSpan, { traceparent: [`00-${TRACE}-b7ad6b7169203331-00`] })).toBe(
      TRACE,
    );
  });

  it('is the recording span’s own trace when there is one', () => {
    const own = trace.wrapSpanContext({
      traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
      spanId: '00f067aa0ba902b7',
      traceFlags: 1,
    });
    expect(requestTraceId(own, { traceparent: `00-${TRACE}-b7ad6b7169203331-01` })).toBe(
      '4bf92f3577b34da6a3ce929d0e0e4736',
    );
  });

  it('is nothing for a missing, malformed or all-zero traceparent', () => {
    for (const traceparent of [
      undefined,
      '',
      'garbage',
      `00-${TRACE.toUpperCase()}-b7ad6b7169203331-01`,
      `00-${'0'.repeat(32)}-b7ad6b7169203331-01`,
      `00-${TRACE}-${'0'.repeat(16)}-01`,
      `00-${TRACE}"><script>-b7ad6b7169203331-01`,
    ])
      expect(requestTraceId(noSpan, { traceparent })).toBeUndefined();
    expect(requestTraceId(noSpan)).toBeUndefined();
  });
});
