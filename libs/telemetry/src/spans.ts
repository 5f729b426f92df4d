import {
  context,
  INVALID_SPAN_CONTEXT,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Link,
  type Span,
  type TimeInput,
} from '@opentelemetry/api';
import type { MsgHdrs } from '@nats-io/transport-node';
import { extractTraceContext } from './nats-header-propagation';
import { tracingInstalled } from './tracing-state';

const TRACER = 'toolgate';

/**
 * Attribute names on Toolgate's spans: the messaging semantic conventions plus our own. The
 * messaging names are still incubating in `@opentelemetry/semantic-conventions` (only its
 * `/incubating` entry has them, which may change in a minor release), so they are written here, as
 * that package advises for incubating names. Values are low-risk by design: ids, names, verdicts,
 * codes — never a call's input, a result or a secret.
 */
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
  ApprovalDecision: 'toolgate.approval.decision',
  ApprovalSource: 'toolgate.approval.source',
} as const;

/**
 * What `fn` gets while nothing is installed (see `setupTelemetry`): the span the API's no-op
 * tracer would start, without starting one. Measured by `npm run bench`: building no-op spans,
 * their attributes and contexts was ~4 % of the dispatch path's CPU and allocations.
 */
const NOT_RECORDING: Span = trace.wrapSpanContext(INVALID_SPAN_CONTEXT);

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
  options: {
    kind?: SpanKind;
    attributes?: Attributes;
    parent?: Context;
    /** When it began, if before now (a wait that started elsewhere). */
    startTime?: TimeInput;
    links?: Link[];
  },
  fn: (span: Span) => Promise<T>,
): Promise<T> {
  if (!tracingInstalled()) return fn(NOT_RECORDING);
  const parent = options.parent ?? context.active();
  const span = tracer().startSpan(
    name,
    {
      kind: options.kind ?? SpanKind.INTERNAL,
      attributes: options.attributes ?? {},
      ...(options.startTime !== undefined ? { startTime: options.startTime } : {}),
      ...(options.links?.length ? { links: options.links } : {}),
    },
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
  if (!tracingInstalled()) return inSpan(destination, {}, fn);
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

/**
 * Resumes a trace that was parked on a message: a span `name` that began at `since`, a child of
 * the context carried by `headers` (the message that parked it), linked to the span active now
 * (whatever ends the wait — an approver's request, a timeout sweep — which lives in a trace of its
 * own). It ends when `fn` does, so it covers the whole wait, and publishes inside `fn` carry the
 * resumed trace onward. Headers without trace context leave the span in the current trace.
 */
export function resumedSpan<T>(
  name: string,
  headers: MsgHdrs | undefined,
  since: TimeInput,
  attributes: Attributes,
  fn: (span: Span) => Promise<T>,
): Promise<T> {
  if (!tracingInstalled()) return inSpan(name, {}, fn);
  const parked = extractTraceContext(headers, ROOT_CONTEXT);
  const now = trace.getSpanContext(context.active());
  if (!trace.getSpanContext(parked)) return inSpan(name, { attributes, startTime: since }, fn);
  return inSpan(
    name,
    {
      parent: parked,
      attributes,
      startTime: since,
      ...(now ? { links: [{ context: now }] } : {}),
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
  if (!tracingInstalled()) return inSpan(destination, {}, fn);
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
