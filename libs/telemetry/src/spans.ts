import {
  context,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Span,
} from '@opentelemetry/api';
import type { MsgHdrs } from '@nats-io/transport-node';
import { extractTraceContext } from './nats-header-propagation';

const TRACER = 'toolgate';

/** Attribute names on Toolgate's spans (messaging semantic conventions plus our own). */
export const Attr = {
  MessagingSystem: 'messaging.system',
  MessagingOperation: 'messaging.operation.type',
  MessagingDestination: 'messaging.destination.name',
  MessagingConsumerGroup: 'messaging.consumer.group.name',
  MessageId: 'messaging.message.id',
  Tenant: 'toolgate.tenant',
  RunId: 'toolgate.run_id',
  DispatchId: 'toolgate.dispatch_id',
  Tool: 'toolgate.tool',
  Verdict: 'toolgate.verdict',
  DecidedBy: 'toolgate.decided_by',
  Rule: 'toolgate.rule',
  Risk: 'toolgate.risk',
  Executor: 'toolgate.executor',
  Outcome: 'toolgate.outcome',
  ErrorCode: 'toolgate.error_code',
  PolicyRevision: 'toolgate.policy_revision',
} as const;

/** The tracer every Toolgate span comes from. */
function tracer() {
  return trace.getTracer(TRACER);
}

/**
 * Runs `fn` inside a span; records a thrown error on it (status ERROR) and rethrows. The span is
 * the active one inside `fn`, so publishes from there carry it in their headers.
 */
export async function inSpan<T>(
  name: string,
  options: { kind?: SpanKind; attributes?: Attributes; parent?: Context },
  fn: (span: Span) => Promise<T>,
): Promise<T> {
  const parent = options.parent ?? context.active();
  const span = tracer().startSpan(
    name,
    { kind: options.kind ?? SpanKind.INTERNAL, attributes: options.attributes ?? {} },
    parent,
  );
  try {
    return await context.with(trace.setSpan(parent, span), () => fn(span));
  } catch (err) {
    recordFailure(span, err);
    throw err;
  } finally {
    span.end();
  }
}

/** Records `err` on `span` as an exception event and sets the span's status to ERROR. */
export function recordFailure(span: Span, err: unknown): void {
  span.recordException(err as Error);
  span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error)?.message });
}

/** A CONSUMER span in the context carried by the message headers (`process <destination>`). */
export function consumerSpan<T>(
  destination: string,
  headers: MsgHdrs | undefined,
  attributes: Attributes,
  fn: (span: Span) => Promise<T>,
): Promise<T> {
  return inSpan(
    `process ${destination}`,
    {
      kind: SpanKind.CONSUMER,
      parent: extractTraceContext(headers),
      attributes: {
        [Attr.MessagingSystem]: 'nats',
        [Attr.MessagingOperation]: 'process',
        [Attr.MessagingDestination]: destination,
        ...attributes,
      },
    },
    fn,
  );
}

/** A PRODUCER span around a publish (`send <destination>`). */
export function producerSpan<T>(
  destination: string,
  attributes: Attributes,
  fn: (span: Span) => Promise<T>,
): Promise<T> {
  return inSpan(
    `send ${destination}`,
    {
      kind: SpanKind.PRODUCER,
      attributes: {
        [Attr.MessagingSystem]: 'nats',
        [Attr.MessagingOperation]: 'send',
        [Attr.MessagingDestination]: destination,
        ...attributes,
      },
    },
    fn,
  );
}

/** Sets attributes on the active span, skipping undefined values (a no-op when nothing is recording). */
export function annotate(attributes: Record<string, string | number | boolean | undefined>): void {
  const span = trace.getActiveSpan();
  if (!span) return;
  for (const [key, value] of Object.entries(attributes))
    if (value !== undefined) span.setAttribute(key, value);
}
