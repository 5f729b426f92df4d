import { Kvm } from '@nats-io/kv';
import { eventually } from '@toolgate/testing';
import { settled } from '../support/dispatch-probes';
import { serveRemoteTool, type RemoteToolDefinition } from '../support/remote-tool';
import { startTestStack, TOKENS, type TestStack } from '../support/test-stack';

const agent = { agentType: 'coder', label: 'input-validation' };
let seq = 0;
const unique = (label: string) => `${label}-${process.pid}-${++seq}`;

const greet = (name = 'greet'): RemoteToolDefinition => ({
  name,
  description: 'Greets someone by name.',
  parameters: {
    type: 'object',
    properties: { name: { type: 'string', minLength: 1 } },
    required: ['name'],
  },
});

/**
 * Every call's input is checked against its contract before any executor sees it, remote tools
 * included: a worker only ever receives input that its registered schema accepts.
 */
describe('input validation before dispatch (gateway → evaluator → executor → remote worker)', () => {
  let stack: TestStack;

  beforeAll(async () => {
    stack = await startTestStack('inputcheck');
  });
  afterAll(() => stack.stop());

  /** Serves a tool and records every input its worker receives. */
  async function worker(def: RemoteToolDefinition, token: string = TOKENS.acmeAdmin) {
    const received: unknown[] = [];
    const tenant = token === TOKENS.globexAdmin ? 'globex' : 'acme';
    const served = await serveRemoteTool(
      stack,
      def,
      (input) => {
        received.push(input);
        return { ok: true, result: { hello: (input as { name?: unknown }).name } };
      },
      { tenant, token },
    );
    return { received, stop: () => served.stop() };
  }

  const submit = (tool: string, input: unknown, token: string = TOKENS.acmeAgent) =>
    stack.http('POST', '/v1/dispatches', token, {
      runId: unique('run'),
      callId: unique('call'),
      agent,
      tool,
      input,
      wait: 10_000,
    });

  it('settles {"nme":1} for a remote tool that requires name as invalid-arguments; the worker never sees it', async () => {
    const w = await worker(greet('greet_strict'));
    try {
      const bad = await submit('greet_strict', { nme: 1 });
      expect(bad.status).toBe(200);
      expect(bad.body.settled).toMatchObject({
        outcome: 'error',
        error: { code: 'invalid-arguments', details: { tool: 'greet_strict' } },
      });
      expect(JSON.stringify(bad.body.settled.error.details.issues)).toContain('name');
      const view = await settled(stack, bad.body.dispatchId);
      // Refused before the executor journals a start: nothing ran.
      expect(view.events.map((e) => e.event.type)).not.toContain('started');

      const good = await submit('greet_strict', { name: 'Ada' });
      expect(good.body.settled).toMatchObject({ outcome: 'ok', result: { hello: 'Ada' } });
      expect(w.received).toEqual([{ name: 'Ada' }]);
    } finally {
      w.stop();
    }
  });

  it('checks the input a hook modified: a hook that makes it invalid settles invalid-arguments, the worker is not called', async () => {
    const w = await worker(greet('greet_hooked'), TOKENS.globexAdmin);
    const hook = stack.nats.nc.subscribe(stack.nats.subjects.hook('globex', 'rewrite'), {
      callback: (_err, msg) => {
        const { input } = msg.json<{ input: Record<string, unknown> }>();
        // Renames the field the schema requires: the verdict is reached on an invalid input.
        msg.respond(JSON.stringify({ modifiedInput: { nme: input.name } }));
      },
    });
    try {
      await stack.nats.nc.flush();
      const put = await stack.http('PUT', '/v1/policy', TOKENS.globexAdmin, {
        document: { remote: { engine: { hooks: [{ name: 'rewrite', unauthenticated: true }] } } },
      });
      expect(put.status).toBe(200);
      const res = await eventually(
        async () => {
          const r = await submit('greet_hooked', { name: 'Ada' }, TOKENS.globexAdmin);
          return r.body?.settled?.error?.code === 'invalid-arguments' ? r : undefined;
        },
        { timeoutMs: 15_000, what: 'the hook policy in force' },
      );
      expect(res.body.settled).toMatchObject({
        outcome: 'error',
        error: { code: 'invalid-arguments' },
      });
      // Calls submitted before the policy was in force ran unmodified; no input without the
      // required name ever reached the worker.
      expect(w.received.filter((input) => !Object.hasOwn(input as object, 'name'))).toEqual([]);
    } finally {
      hook.unsubscribe();
      w.stop();
      await stack.http('PUT', '/v1/policy', TOKENS.globexAdmin, { document: {} });
    }
  });

  describe('a tool re-registered between submit and run: the call is checked against the contract it was submitted against', () => {
    const tool = 'greet_evolving';
    let w: Awaited<ReturnType<typeof worker>>;

    beforeAll(async () => {
      const put = await stack.http('PUT', '/v1/policy', TOKENS.acmeAdmin, {
        document: { engine: { ask: [{ tool }] } },
      });
      expect(put.status).toBe(200);
      // Until the evaluator has the policy, calls run instead of parking: wait for it here.
      const first = await worker(greet(tool));
      try {
        await eventually(
          async () =>
            (await submit(tool, { name: 'probe' })).body?.state === 'suspended' ? true : undefined,
          { timeoutMs: 15_000, what: 'the ask policy in force' },
        );
      } finally {
        first.stop();
      }
    });
    afterEach(() => w?.stop());

    /** Submits a call that the policy parks, and returns its dispatch id and approval key. */
    async function park(input: unknown): Promise<{ dispatchId: string; key: string }> {
      const res = await submit(tool, input);
      expect(res.body.state).toBe('suspended');
      const dispatchId = res.body.dispatchId as string;
      const key = await eventually(
        async () => {
          const list = await stack.http('GET', '/v1/approvals', TOKENS.acmeApprover);
          return (
            list.body?.approvals as { dispatchId: string; approvalKey: string }[] | undefined
          )?.find((a) => a.dispatchId === dispatchId)?.approvalKey;
        },
        { timeoutMs: 15_000, what: 'the approval listed' },
      );
      return { dispatchId, key };
    }

    async function approve(key: string): Promise<void> {
      const res = await stack.http('POST', `/v1/approvals/${key}/resolve`, TOKENS.acmeApprover, {
        decision: 'allow',
      });
      expect(res.status).toBe(200);
    }

    const v2 = (): RemoteToolDefinition => ({
      ...greet(tool),
      parameters: {
        type: 'object',
        properties: { nme: { type: 'integer' } },
        required: ['nme'],
      },
    });

    it('an input valid under the old contract runs, although the new one would refuse it', async () => {
      w = await worker(greet(tool));
      const parked = await park({ name: 'Grace' });
      w.stop();
      w = await worker(v2());
      await approve(parked.key);
      const view = await settled(stack, parked.dispatchId);
      expect(view.dispatch.outcome).toBe('ok');
      expect(w.received).toEqual([{ name: 'Grace' }]);
    });

    it('an input invalid under the old contract is refused, although the new one would accept it', async () => {
      w = await worker(greet(tool));
      const parked = await park({ nme: 7 });
      w.stop();
      w = await worker(v2());
      await approve(parked.key);
      const view = await settled(stack, parked.dispatchId);
      expect(view.dispatch).toMatchObject({
        outcome: 'error',
        error: { code: 'invalid-arguments' },
      });
      expect(w.received).toEqual([]);
    });

    it('fails closed when the contract the call names is nowhere to be found', async () => {
      // A contract no executor has checked an input against yet (validators are cached by hash).
      w = await worker({ ...greet(tool), description: 'Greets someone; its contract is lost.' });
      const parked = await park({ name: 'Linus' });
      const submitted = (await settledOrParked(parked.dispatchId)).contractHash;
      w.stop();
      w = await worker(v2());
      const kv = await new Kvm(stack.nats.nc).open(stack.nats.subjects.toolsBucket);
      await kv.purge(`_contract.${submitted}`);
      await approve(parked.key);
      const view = await settled(stack, parked.dispatchId);
      expect(view.dispatch).toMatchObject({ outcome: 'error', error: { code: 'unknown-tool' } });
      expect(w.received).toEqual([]);
    });

    /** The contract hash a dispatch was submitted against, from its `requested` event. */
    async function settledOrParked(dispatchId: string): Promise<{ contractHash: string }> {
      const d = await stack.http('GET', `/v1/dispatches/${dispatchId}`, TOKENS.acmeAgent);
      const requested = (
        d.body.events as { event: { type: string; tool?: { contractHash: string } } }[]
      ).find((e) => e.event.type === 'requested');
      return { contractHash: requested!.event.tool!.contractHash };
    }
  });
});
