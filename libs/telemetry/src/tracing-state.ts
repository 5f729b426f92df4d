/**
 * Whether a tracer provider is installed (by `setupTelemetry`). Kept apart from the set-up, which
 * imports the OpenTelemetry SDK, so that code which only makes spans (the SDK's workers) does not
 * load or depend on it.
 */
let installed = false;

/**
 * Whether a tracer provider is installed. Without one every span is a no-op and no context manager
 * carries a span across an `await`, so `inSpan` skips building spans and contexts altogether.
 */
export function tracingInstalled(): boolean {
  return installed;
}

/** Set by `setupTelemetry` when it installs a provider, and when it shuts it down. */
export function setTracingInstalled(value: boolean): void {
  installed = value;
}
