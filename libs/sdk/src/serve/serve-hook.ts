import type { KeyObject } from 'node:crypto';
import { headers as natsHeaders, type Msg, type NatsConnection } from '@nats-io/transport-node';
import {
  ed25519PrivateKey,
  RemoteAuthHeader,
  signHookReply,
  RemoteHookReplySchema,
  RemoteHookRequestSchema,
  assertSubjectToken,
  type RemoteHookReply,
  type RemoteHookRequest,
  type Subjects,
} from '@toolgate/contracts';
import { Attr, annotate, consumerSpan } from '@toolgate/telemetry';
import { serveQueue, type Served } from './serve-queue';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * What a hook answers: a verdict (`allow`, `deny`, `ask`; a canUseTool may not ask), a substitute
 * input (`{ modifiedInput }`, the chain goes on with it), or nothing (`undefined`: pass, the chain
 * goes on unchanged).
 */
export type HookAnswer =
  | 'allow'
  | 'deny'
  | 'ask'
  | { verdict: 'allow' | 'deny' | 'ask'; reason?: string }
  | { modifiedInput: unknown }
  | undefined;

/** A hook's handler: called once per request, with the call as the permission chain has it. */
export type HookHandler = (request: RemoteHookRequest) => HookAnswer | Promise<HookAnswer>;

export interface ServeHookOptions {
  /** Called when the handler throws or a request does not parse (the call is then denied). */
  onError?: (err: unknown, request: RemoteHookRequest | undefined) => void;
  /**
   * The hook's Ed25519 private key (a KeyObject, PEM, or base64 PKCS8): every reply is signed over
   * the request's nonce, the request's digest and the reply, so the evaluator can tell this hook's
   * answers from anyone else's. Its public key is the hook's `publicKey` in the policy. Without
   * it replies are unsigned, which only a hook marked `unauthenticated` accepts.
   */
  signingKey?: KeyObject | string | undefined;
}

/** A running hook. `stop()` takes no new requests and resolves once the in-flight ones replied. */
export type ServedHook = Served;

/**
 * Serves a remote hook (or canUseTool) named `name` in the tenant's policy (`remote.engine.hooks`
 * or `remote.profiles.<p>.hooks`, or `canUseTool`), in a queue group so several replicas share the
 * requests. Fails closed: a handler that throws, a request that does not parse and an answer that
 * is not one of the {@link HookAnswer} shapes are answered `deny` at once (the evaluator would deny
 * at its timeout anyway). The handler must answer within the hook's timeout (`timeoutMs` in the
 * policy, default 5 s).
 */
export function serveHook(
  nc: NatsConnection,
  subjects: Subjects,
  tenant: string,
  name: string,
  handler: HookHandler,
  options: ServeHookOptions = {},
): ServedHook {
  assertSubjectToken('hook name', name);
  const subject = subjects.hook(tenant, name);
  const key = options.signingKey && ed25519PrivateKey(options.signingKey, 'signingKey');
  async function handle(msg: Msg): Promise<void> {
    const reply = await consumerSpan(
      subject,
      msg.headers,
      { [Attr.MessagingConsumerGroup]: subject },
      async () => {
        const answer = await answerOf(msg.data);
        annotate({ [Attr.Verdict]: answer.verdict ?? (answer.modifiedInput ? 'modify' : 'pass') });
        return answer;
      },
    );
    if (!msg.reply) return;
    const body = encoder.encode(JSON.stringify(reply));
    const nonce = msg.headers?.get(RemoteAuthHeader.HookNonce);
    if (key && nonce) {
      const h = natsHeaders();
      h.set(RemoteAuthHeader.HookSignature, signHookReply(key, nonce, msg.data, body));
      msg.respond(body, { headers: h });
    } else msg.respond(body);
  }

  async function answerOf(data: Uint8Array): Promise<RemoteHookReply> {
    let request: RemoteHookRequest | undefined;
    try {
      request = RemoteHookRequestSchema.parse(JSON.parse(decoder.decode(data)));
      annotate({ [Attr.Tool]: request.toolName });
      return toReply(await handler(request));
    } catch (err) {
      options.onError?.(err, request);
      return { verdict: 'deny' };
    }
  }

  return serveQueue(nc, subject, subject, handle);
}

/** The wire reply for an answer; anything else is a handler bug and throws (the call is denied). */
function toReply(answer: HookAnswer): RemoteHookReply {
  if (answer === undefined) return {};
  if (answer === 'allow' || answer === 'deny' || answer === 'ask') return { verdict: answer };
  if (typeof answer === 'object' && answer !== null && 'verdict' in answer) {
    return RemoteHookReplySchema.parse({ verdict: answer.verdict, reason: answer.reason });
  }
  if (typeof answer === 'object' && answer !== null && 'modifiedInput' in answer) {
    return RemoteHookReplySchema.parse({ modifiedInput: answer.modifiedInput });
  }
  throw new TypeError(
    `a hook answered ${JSON.stringify(answer)}: not allow, deny, ask, { modifiedInput } or undefined`,
  );
}
