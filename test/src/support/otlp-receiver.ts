import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
// The OTLP/JSON shapes as OpenTelemetry's own transformer declares them (the package keeps them
// internal, but they are the types its JSON serializer writes: our exporter's bodies).
import type {
  IAnyValue,
  IKeyValue,
} from '@opentelemetry/otlp-transformer/build/src/common/internal-types';
import {
  ESpanKind,
  type IExportTraceServiceRequest,
  type ISpan,
} from '@opentelemetry/otlp-transformer/build/src/trace/internal-types';

export { ESpanKind };

/** One exported span, flattened: ids as hex, attributes as plain values, times in nanoseconds. */
export interface ReceivedSpan {
  /** The exporting process's `service.name`. */
  service: string;
  traceId: string;
  spanId: string;
  /** Undefined for a root span. */
  parentSpanId: string | undefined;
  name: string;
  kind: ESpanKind;
  attributes: Record<string, string | number | boolean | undefined>;
  links: { traceId: string; spanId: string }[];
  startNs: bigint;
  endNs: bigint;
  /** OTLP status code (0 unset, 1 ok, 2 error). */
  statusCode: number;
}

/** An OTLP/HTTP trace receiver on loopback (what a collector's `otlp` receiver is to the services). */
export interface OtlpReceiver {
  /** The base URL, for `OTEL_EXPORTER_OTLP_ENDPOINT` (exporters post to `<url>/v1/traces`). */
  readonly url: string;
  /** Every span received so far. */
  spans(): readonly ReceivedSpan[];
  /** The spans of one trace. */
  trace(traceId: string): ReceivedSpan[];
  /** Requests refused (not `POST /v1/traces` with a JSON body): a test expects none. */
  readonly refused: readonly string[];
  close(): Promise<void>;
}

/**
 * Starts a receiver for OTLP/HTTP with JSON bodies (`http/json`, what
 * `@opentelemetry/exporter-trace-otlp-http` sends). Anything else is answered 415 and recorded in
 * `refused`, so a test sees an exporter speaking another protocol instead of waiting for spans.
 */
export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const received: ReceivedSpan[] = [];
  const refused: string[] = [];
  const server: Server = createServer((req, res) => {
    void read(req).then((body) => {
      const type = req.headers['content-type'] ?? '';
      if (
        req.method !== 'POST' ||
        req.url !== '/v1/traces' ||
        !type.startsWith('application/json')
      ) {
        refused.push(`${req.method} ${req.url} ${type}`);
        res.writeHead(415).end();
        return;
      }
      const request = JSON.parse(body) as IExportTraceServiceRequest;
      received.push(...flatten(request));
      // An empty ExportTraceServiceResponse: everything accepted.
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    spans: () => received,
    trace: (traceId) => received.filter((s) => s.traceId === traceId),
    refused,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((err) => (err ? reject(err) : resolve()));
      }),
  };
}

function read(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function flatten(request: IExportTraceServiceRequest): ReceivedSpan[] {
  return (request.resourceSpans ?? []).flatMap((rs) => {
    const service = String(attributes(rs.resource?.attributes ?? [])['service.name']);
    return rs.scopeSpans.flatMap((ss) => (ss.spans ?? []).map((s) => span(service, s)));
  });
}

function span(service: string, s: ISpan): ReceivedSpan {
  return {
    service,
    traceId: hex(s.traceId),
    spanId: hex(s.spanId),
    parentSpanId: s.parentSpanId ? hex(s.parentSpanId) || undefined : undefined,
    name: s.name,
    kind: s.kind,
    attributes: attributes(s.attributes),
    links: s.links.map((l) => ({ traceId: hex(l.traceId), spanId: hex(l.spanId) })),
    startNs: BigInt(String(s.startTimeUnixNano)),
    endNs: BigInt(String(s.endTimeUnixNano)),
    statusCode: s.status.code,
  };
}

/** OTLP/JSON writes ids as hex strings (the protobuf encoding as bytes). */
function hex(id: string | Uint8Array): string {
  return typeof id === 'string' ? id : Buffer.from(id).toString('hex');
}

function attributes(kvs: IKeyValue[]): ReceivedSpan['attributes'] {
  return Object.fromEntries(kvs.map((kv) => [kv.key, value(kv.value)]));
}

function value(v: IAnyValue): string | number | boolean | undefined {
  if (v.stringValue != null) return v.stringValue;
  if (v.boolValue != null) return v.boolValue;
  // OTLP/JSON may write a 64-bit integer as a string.
  if (v.intValue != null) return Number(v.intValue);
  if (v.doubleValue != null) return v.doubleValue;
  return undefined;
}
