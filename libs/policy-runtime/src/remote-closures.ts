import type { NatsConnection } from '@nats-io/transport-node';
import { headers as natsHeaders } from '@nats-io/transport-node';
import type { Subjects } from '@toolgate/contracts';
import type { CanUseTool, HookContext, NamedHook } from '@toolgate/permissions';
import { injectTraceContext } from '@toolgate/telemetry';
import type { RemoteClosure } from './stored-policy';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * The request a remote hook or canUseTool service receives on `subjects.hook(tenant, name)`.
 * Reply `{ "verdict": "allow" | "deny" | "ask" }`, `{ "modifiedInput": ... }`, or `{}` to pass.
 * canUseTool may not answer `ask`. No answer in time, an error or a malformed reply denies.
 */
export interface RemoteHookRequest {
  kind: 'hook' | 'canUseTool';
  tenant: string;
  toolName: string;
  input: unknown;
  context: HookContext;
}

async function ask(
  nc: NatsConnection,
  subject: string,
  body: RemoteHookRequest,
  timeoutMs: number,
): Promise<unknown> {
  const reply = await nc.request(subject, encoder.encode(JSON.stringify(body)), {
    timeout: timeoutMs,
    headers: injectTraceContext(natsHeaders()),
  });
  return JSON.parse(decoder.decode(reply.data)) as unknown;
}

function interpret(
  reply: unknown,
  allowAsk: boolean,
): 'allow' | 'deny' | 'ask' | { modifiedInput: unknown } | undefined {
  if (reply === null || typeof reply !== 'object' || Array.isArray(reply))
    throw new Error('malformed reply');
  const r = reply as { verdict?: unknown; modifiedInput?: unknown };
  if ('modifiedInput' in r) return { modifiedInput: r.modifiedInput };
  if (r.verdict === undefined) return undefined;
  if (r.verdict === 'allow' || r.verdict === 'deny' || (allowAsk && r.verdict === 'ask'))
    return r.verdict;
  throw new Error(`unexpected verdict ${JSON.stringify(r.verdict)}`);
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
