import { TOKENS, type TestStack } from './test-stack';

/** What `POST /v1/tools` registers; the executor is always `remote`. */
export interface RemoteToolDefinition {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
  policy?: Record<string, unknown>;
}

/** A remote tool worker running on the test's own NATS connection. */
export interface ServedTool {
  /** Stops answering (the registration stays). */
  stop(): void;
}

/**
 * Serves `tool` for a tenant from the test's own NATS connection and registers it there (failing
 * unless the gateway answers 201). Each request's input goes to `answer`, whose value (or promised
 * value) is the reply: `{ ok: true, result }` or `{ ok: false, error }`; `undefined` leaves the
 * request unanswered, as a worker that hangs or died would.
 */
export async function serveRemoteTool(
  stack: TestStack,
  tool: RemoteToolDefinition,
  answer: (input: unknown) => unknown,
  { tenant = 'acme', token = TOKENS.acmeAdmin }: { tenant?: string; token?: string } = {},
): Promise<ServedTool> {
  const { subject, queue } = stack.nats.subjects.remoteTool(tenant, tool.name);
  const sub = stack.nats.nc.subscribe(subject, {
    queue,
    callback: (err, msg) => {
      if (err) return;
      const { input } = JSON.parse(new TextDecoder().decode(msg.data)) as { input: unknown };
      void Promise.resolve(answer(input)).then((reply) => {
        if (reply !== undefined) msg.respond(JSON.stringify(reply));
      });
    },
  });
  const reg = await stack.http('POST', '/v1/tools', token, {
    tool: { ...tool, policy: { ...tool.policy, executor: 'remote' } },
  });
  if (reg.status !== 201) {
    sub.unsubscribe();
    throw new Error(`registering ${tool.name}: ${reg.status} ${JSON.stringify(reg.body)}`);
  }
  return { stop: () => sub.unsubscribe() };
}

/** A served tool whose calls wait until `release()`. */
export interface HeldTool extends ServedTool {
  /** Lets every call, waiting or still to come, answer `{ ok: true, result }`. */
  release(): void;
}

/**
 * Serves a remote tool `name` (60 s timeout) whose every call is held until `release()`, then
 * answers `{ ok: true, result }`: for a test that needs a dispatch still running.
 */
export async function serveHeldTool(
  stack: TestStack,
  name: string,
  result: unknown,
  parameters: Record<string, unknown> = { type: 'object', properties: {} },
): Promise<HeldTool> {
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  const served = await serveRemoteTool(
    stack,
    { name, description: 'Answers when released.', parameters, policy: { timeoutMs: 60_000 } },
    () => held.then(() => ({ ok: true, result })),
  );
  return { stop: served.stop, release };
}
