import {
  defaultTextMapGetter,
  isSpanContextValid,
  ROOT_CONTEXT,
  trace,
  type Span,
  type SpanContext,
} from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';

/** Parses `traceparent` itself, so the answer does not depend on a global propagator being set. */
const w3c = new W3CTraceContextPropagator();

/**
 * The W3C trace a request belongs to: `span`'s when it records one (tracing installed: it
 * continues the caller's trace or starts its own), else the trace the caller's `traceparent` in
 * `carrier` names; undefined when neither is valid (a malformed or all-zero `traceparent` names
 * nothing).
 */
export function requestTraceId(
  span: Span,
  carrier?: Record<string, string | string[] | undefined>,
): string | undefined {
  const own = validTraceId(span.spanContext());
  if (own || !carrier) return own;
  return validTraceId(
    trace.getSpanContext(w3c.extract(ROOT_CONTEXT, carrier, defaultTextMapGetter)),
  );
}

function validTraceId(context: SpanContext | undefined): string | undefined {
  return context && isSpanContextValid(context) ? context.traceId : undefined;
}
