import type { KeyObject } from 'node:crypto';
import type { NatsConnection } from '@nats-io/transport-node';
import { createInbox, headers as natsHeaders } from '@nats-io/transport-node';
import {
  ed25519PublicKey,
  freshNonce,
  RemoteAuthHeader,
  RemoteHookReplySchema,
  verifyHookReply,
  type Verdict,
  type RemoteHookReply,
  type RemoteHookRequest,
  type Subjects,
} from '@toolgate/contracts';
import type {
  CanUseTool,
  CanUseToolResult,
  HookContext,
  NamedHook,
  ReasonedVerdict,
} from '@toolgate/permissions';
import { Attr, injectTraceContext, producerSpan } from '@toolgate/telemetry';
import type { z } from 'zod';
import type { RemoteClosure } from './stored-policy';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

export type { RemoteHookRequest };

/** How a hook's replies are checked: against its public key, or not at all (`unauthenticated`). */
type ReplyCheck = { kind: 'signed'; key: KeyObject } | { kind: 'unsigned' } | { kind: 'refused' };

function replyCheckOf(spec: RemoteClosure): ReplyCheck {
  if (spec.publicKey !== undefined) {
    try {
      return { kind: 'signed', key: ed25519PublicKey(spec.publicKey, 'publicKey') };
    } catch {
      return { kind: 'refused' };
    }
  }
  return spec.unauthenticated ? { kind: 'unsigned' } : { kind: 'refused' };
}

/**
 * Asks a remote hook or canUseTool service (the contracts' request and reply shapes). A signed
 * hook's request carries a fresh nonce, and the first reply whose signature over (nonce, request
 * digest, reply) verifies with the hook's key is taken: a forger answering first, a replayed reply
 * and an unsigned one are ignored. Anything but a well-formed, valid reply in time throws, and the
 * chain denies.
 */
async function ask(
  nc: NatsConnection,
  subject: string,
  body: RemoteHookRequest,
  timeoutMs: number,
  check: ReplyCheck,
): Promise<RemoteHookReply> {
  if (check.kind === 'refused') {
    throw new Error('it has no valid publicKey in the policy and is not marked unauthenticated');
  }
  const payload = encoder.encode(JSON.stringify(body));
  // The team's hook joins the dispatch's trace: its request carries this span as `traceparent`.
  const data = await producerSpan(subject, { [Attr.Tool]: body.toolName }, () =>
    check.kind === 'unsigned'
      ? nc
          .request(subject, payload, {
            timeout: timeoutMs,
            headers: injectTraceContext(natsHeaders()),
          })
          .then((m) => m.data)
      : firstSignedReply(nc, subject, payload, timeoutMs, check.key),
  );
  const parsed = RemoteHookReplySchema.safeParse(JSON.parse(decoder.decode(data)));
  if (!parsed.success) throw new Error(`malformed reply: ${describeIssues(parsed.error)}`);
  return parsed.data;
}

/**
 * Publishes the request with a fresh nonce on an inbox of its own and waits for the first reply
 * signed by `key` over this nonce and this request. Stops a little before the hook's deadline, so
 * that the chain's reason is this one (how many replies were refused) rather than a bare timeout.
 */
function firstSignedReply(
  nc: NatsConnection,
  subject: string,
  payload: Uint8Array,
  timeoutMs: number,
  key: KeyObject,
): Promise<Uint8Array> {
  const nonce = freshNonce();
  const inbox = createInbox();
  const headers = injectTraceContext(natsHeaders());
  headers.set(RemoteAuthHeader.HookNonce, nonce);
  return new Promise<Uint8Array>((resolve, reject) => {
    let refused = 0;
    const sub = nc.subscribe(inbox, {
      callback: (err, msg) => {
        if (err) return finish(() => reject(err));
        if (msg.headers?.hasError) return finish(() => reject(new Error('no hook is serving it')));
        const signature = msg.headers?.get(RemoteAuthHeader.HookSignature) || undefined;
        if (verifyHookReply(key, nonce, payload, msg.data, signature)) {
          finish(() => resolve(msg.data));
        } else refused++;
      },
    });
    const timer = setTimeout(
      () =>
        finish(() =>
          reject(
            new Error(
              refused === 0
                ? `no reply within ${timeoutMs} ms`
                : `no reply signed with its publicKey within ${timeoutMs} ms (${refused} unsigned, mis-signed or replayed ignored)`,
            ),
          ),
        ),
      Math.max(1, timeoutMs - Math.min(100, Math.floor(timeoutMs / 10))),
    );
    function finish(settle: () => void): void {
      clearTimeout(timer);
      sub.unsubscribe();
      settle();
    }
    nc.publish(subject, payload, { reply: inbox, headers });
  });
}

/**
 * What was wrong with a reply, for the deny reason: where and what (an unrecognised key names the
 * key: `{ "decision": "deny" }` is a typo of `verdict`), never the values. Bounded.
 */
function describeIssues(error: z.ZodError): string {
  const text = error.issues
    .slice(0, 3)
    .map((i) => `${i.path.map(String).join('.') || '(reply)'}: ${i.message}`)
    .join('; ');
  return text.length > 200 ? `${text.slice(0, 199)}…` : text;
}

function interpret(
  reply: RemoteHookReply,
  allowAsk: boolean,
): Verdict | ReasonedVerdict | { modifiedInput: unknown } | undefined {
  if (reply.modifiedInput !== undefined) return { modifiedInput: reply.modifiedInput };
  if (reply.verdict === 'ask' && !allowAsk) throw new Error('canUseTool may not answer ask');
  if (reply.verdict !== undefined && reply.reason !== undefined && reply.reason !== '')
    return { verdict: reply.verdict, reason: reply.reason };
  return reply.verdict;
}

/**
 * What a hook and a canUseTool closure share: the subject the team's service answers on, the
 * closure's deadline, how its replies are checked, and the reply read as the chain's answer (a
 * canUseTool may not ask).
 */
function remoteClosure(
  nc: NatsConnection,
  subjects: Subjects,
  tenant: string,
  spec: RemoteClosure,
  defaultTimeoutMs: number,
) {
  const subject = subjects.hook(tenant, spec.name);
  const timeoutMs = spec.timeoutMs ?? defaultTimeoutMs;
  const check = replyCheckOf(spec);
  return {
    timeoutMs,
    ask: async (
      kind: RemoteHookRequest['kind'],
      toolName: string,
      input: unknown,
      context: HookContext,
    ) =>
      interpret(
        await ask(nc, subject, { kind, tenant, toolName, input, context }, timeoutMs, check),
        kind === 'hook',
      ),
  };
}

/** A hook closure that asks a team's service on the bus; the chain's deadline bounds it too. */
export function remoteHook(
  nc: NatsConnection,
  subjects: Subjects,
  tenant: string,
  spec: RemoteClosure,
  defaultTimeoutMs: number,
): NamedHook {
  const closure = remoteClosure(nc, subjects, tenant, spec, defaultTimeoutMs);
  return {
    name: `remote:${spec.name}`,
    timeoutMs: closure.timeoutMs,
    run: (toolName: string, input: unknown, context: HookContext) =>
      closure.ask('hook', toolName, input, context),
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
  const closure = remoteClosure(nc, subjects, tenant, spec, defaultTimeoutMs);
  return async (toolName, input, context) => {
    const verdict = await closure.ask('canUseTool', toolName, input, context);
    if (verdict === 'ask') return 'deny';
    if (typeof verdict === 'object' && 'verdict' in verdict && verdict.verdict === 'ask')
      return { verdict: 'deny', reason: verdict.reason };
    return verdict as CanUseToolResult;
  };
}
