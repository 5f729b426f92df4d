import type { NatsConnection } from '@nats-io/transport-node';
import { headers as natsHeaders } from '@nats-io/transport-node';
import {
  RemoteHookReplySchema,
  type RemoteHookReply,
  type RemoteHookRequest,
  type Subjects,
} from '@toolgate/contracts';
import type { CanUseTool, HookContext, NamedHook } from '@toolgate/permissions';
import { Attr, injectTraceContext, producerSpan } from '@toolgate/telemetry';
import type { RemoteClosure } from './stored-policy';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

export type { RemoteHookRequest };

/**
 * Asks a remote hook or canUseTool service (the contracts' request and reply shapes). Anything
 * but a well-formed reply in time throws, and the chain denies.
 */
async function ask(
  nc: NatsConnection,
  subject: string,
  body: RemoteHookRequest,
  timeoutMs: number,
): Promise<RemoteHookReply> {
  // The team's hook joins the dispatch's trace: its request carries this span as `traceparent`.
  const reply = await producerSpan(subject, { [Attr.Tool]: body.toolName }, () =>
    nc.request(subject, encoder.encode(JSON.stringify(body)), {
      timeout: timeoutMs,
      headers: injectTraceContext(natsHeaders()),
    }),
  );
  const parsed = RemoteHookReplySchema.safeParse(JSON.parse(decoder.decode(reply.data)));
  if (!parsed.success) throw new Error('malformed reply');
  return parsed.data;
}

function interpret(
  reply: RemoteHookReply,
  allowAsk: boolean,
): 'allow' | 'deny' | 'ask' | { modifiedInput: unknown } | undefined {
  if (reply.modifiedInput !== undefined) return { modifiedInput: reply.modifiedInput };
  if (reply.verdict === 'ask' && !allowAsk) throw new Error('canUseTool may not answer ask');
  return reply.verdict;
}

/** A hook closure that asks a team's service on the bus; the chain's deadline bounds it too. */
export function remoteHook(
  nc: NatsConnection,
  subjects: Subjects,
  tenant: string,
  spec: RemoteClosure,
  defaultTimeoutMs: number,
): NamedHook {
  const subject = subjects.hook(tenant, spec.name);
  const timeoutMs = spec.timeoutMs ?? defaultTimeoutMs;
  return {
    name: `remote:${spec.name}`,
    timeoutMs,
    run: async (toolName: string, input: unknown, context: HookContext) =>
      interpret(
        await ask(nc, subject, { kind: 'hook', tenant, toolName, input, context }, timeoutMs),
        true,
      ),
  };
}

/** A canUseTool closure served by a team's service on the bus. */
export function remoteCanUseTool(
  nc: NatsConnection,
  subjects: Subjects,
  tenant: string,
  spec: RemoteClosure,
  defaultTimeoutMs: number,
): CanUseTool {
  const subject = subjects.hook(tenant, spec.name);
  const timeoutMs = spec.timeoutMs ?? defaultTimeoutMs;
  return async (toolName, input, context) => {
    const verdict = interpret(
      await ask(nc, subject, { kind: 'canUseTool', tenant, toolName, input, context }, timeoutMs),
      false,
    );
    return verdict === 'ask' ? 'deny' : verdict;
  };
}
