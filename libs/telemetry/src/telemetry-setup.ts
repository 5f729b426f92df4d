import { propagation, trace } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  BatchSpanProcessor,
  SimpleSpanProcessor,
  type SpanExporter,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { ATTR_SERVICE_NAME } from '@opentelemetry/semantic-conventions';
import { setTracingInstalled } from './tracing-state';

export interface TelemetryOptions {
  /** The resource's `service.name`, unless `OTEL_SERVICE_NAME` names it (as `deploy/` does). */
  serviceName: string;
  /** Where spans go; when omitted, OTLP/HTTP if `OTEL_EXPORTER_OTLP_ENDPOINT` is set, else nowhere. */
  exporter?: SpanExporter;
  /** Export each span as it ends (tests); batches otherwise. */
  simple?: boolean;
}

export interface Telemetry {
  shutdown(): Promise<void>;
  forceFlush(): Promise<void>;
}

let installed: { provider: NodeTracerProvider } | undefined;

/** What `setupTelemetry` answers when spans go nowhere: there is nothing to flush or shut down. */
const TRACING_OFF: Telemetry = {
  shutdown: async () => undefined,
  forceFlush: async () => undefined,
};

/**
 * Installs the global tracer provider and W3C propagator once per process. In the all-in-one
 * process every service shares it; each span names its service through its attributes.
 *
 * With no exporter (none given, no `OTEL_EXPORTER_OTLP_ENDPOINT`) nothing is installed: spans stay
 * the API's no-ops and no context manager runs. A provider without an exporter would record every
 * span only to drop it, and its context manager (AsyncLocalStorage, which on Node 20 hooks every
 * promise) taxes the whole process — measured by `npm run bench`, which starts its stack as the
 * services' mains do. The price: a process that exports nothing does not carry a caller's trace
 * context on to what it publishes either (docs/configuration.md says so).
 */
export function setupTelemetry(options: TelemetryOptions): Telemetry {
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  if (installed) return wrap(installed.provider);
  const exporter = options.exporter ?? otlpFromEnv();
  if (!exporter) return TRACING_OFF;
  const processors: SpanProcessor[] = [
    options.simple ? new SimpleSpanProcessor(exporter) : new BatchSpanProcessor(exporter),
  ];
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({
      [ATTR_SERVICE_NAME]: process.env.OTEL_SERVICE_NAME || options.serviceName,
    }),
    spanProcessors: processors,
  });
  provider.register();
  installed = { provider };
  setTracingInstalled(true);
  return wrap(provider);
}

function wrap(provider: NodeTracerProvider): Telemetry {
  return {
    shutdown: async () => {
      await provider.shutdown();
      trace.disable();
      installed = undefined;
      setTracingInstalled(false);
    },
    forceFlush: () => provider.forceFlush(),
  };
}

function otlpFromEnv(): SpanExporter | undefined {
  if (!process.env.OTEL_EXPORTER_OTLP_ENDPOINT && !process.env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)
    return undefined;
  // Loaded lazily: the exporter pulls in protobuf machinery nobody needs without an endpoint.
  type OtlpModule = typeof import('@opentelemetry/exporter-trace-otlp-http');
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const otlp = require('@opentelemetry/exporter-trace-otlp-http') as OtlpModule;
  const { OTLPTraceExporter } = otlp;
  return new OTLPTraceExporter();
}
