import {
  context,
  propagation,
  type Context,
  type TextMapGetter,
  type TextMapSetter,
} from '@opentelemetry/api';
import { headers as natsHeaders, type MsgHdrs } from '@nats-io/transport-node';

/** Reads W3C trace context (`traceparent`, `tracestate`) from NATS message headers. */
export const natsHeaderGetter: TextMapGetter<MsgHdrs | undefined> = {
  keys: (carrier) => (carrier ? carrier.keys() : []),
  get: (carrier, key) => {
    if (!carrier) return undefined;
    const values = carrier.values(key);
    return values.length ? values : undefined;
  },
};

/** Writes W3C trace context into NATS message headers. */
export const natsHeaderSetter: TextMapSetter<MsgHdrs> = {
  set: (carrier, key, value) => carrier.set(key, value),
};

/** Injects the active (or given) context into `headers`, creating them when absent. */
export function injectTraceContext(
  headers: MsgHdrs = natsHeaders(),
  ctx: Context = context.active(),
): MsgHdrs {
  propagation.inject(ctx, headers, natsHeaderSetter);
  return headers;
}

/** The context carried by a message's headers, on top of the current one. */
export function extractTraceContext(
  headers: MsgHdrs | undefined,
  base: Context = context.active(),
): Context {
  return propagation.extract(base, headers, natsHeaderGetter);
}
