import { eventually } from '@toolgate/testing';
import { TOKENS, type TestStack } from '../support/test-stack';
import { park, resolve, startWebhookStack, type Delivery } from './approval-helpers';

/**
 * Approval notifications on the bus (`<prefix>.approvals.<tenant>.<pending|resolved>`) are hints:
 * on an open broker anyone may publish one. A forged `resolved` hint for a call still parked must
 * send no webhook (a red team's got a signed "approval:resolved" out, under the delivery id the
 * genuine resolution used later, which a deduplicating receiver then dropped), and a hint's bytes
 * must not become frames of the tenant's event stream (a forged `server:restarting`, a `retry:`).
 */
describe('approval hints forged on the bus', () => {
  let rig: Awaited<ReturnType<typeof startWebhookStack>>;
  let stack: TestStack;
  let deliveries: Delivery[];

  beforeAll(async () => {
    rig = await startWebhookStack('approval-forged-hints', { secret: 'webhook-secret-0123456789' });
    ({ stack } = rig);
    deliveries = rig.receiver.deliveries;
  }, 60_000);
  afterAll(() => rig?.stop());

  it('sends no resolved webhook for a call still parked, and the genuine one arrives whole', async () => {
    const parked = await park(stack, 'gated');
    const of = (event: string) =>
      deliveries.filter((d) => d.event === event && d.body.dispatchId === parked.dispatchId);
    await eventually(() => of('approval:pending')[0], { timeoutMs: 20_000, what: 'pending' });
    stack.nats.nc.publish(
      stack.nats.subjects.approvals('acme', 'resolved'),
      JSON.stringify({
        approvalKey: parked.approval.approvalKey,
        dispatchId: parked.dispatchId,
        runId: parked.runId,
      }),
    );
    const res = await resolve(stack, parked.approval.approvalKey, {
      decision: 'allow',
      dispatchId: parked.dispatchId,
      runId: parked.runId,
    });
    expect(res.status).toBe(200);
    const genuine = await eventually(() => of('approval:resolved')[0], {
      timeoutMs: 20_000,
      what: 'the genuine resolution delivered',
    });
    // The forged hint was published first: had it sent anything of its own, it would be this one.
    expect(genuine.body.decision).toBe('allow');
    // Read once the resolution is recorded (a loaded run got there), the forged hint sends that
    // resolution — the recorded one, under its delivery id, which receivers deduplicate on: one
    // notification, however many deliveries.
    const resolved = of('approval:resolved');
    expect(new Set(resolved.map((d) => d.id))).toEqual(new Set([genuine.id]));
    expect(resolved.map((d) => d.body.decision)).toEqual(resolved.map(() => 'allow'));
  });

  it("keeps each hint one event of the tenant's stream, whatever bytes it carries", async () => {
    const abort = new AbortController();
    const res = await fetch(`${stack.all.gateway.url}/v1/approvals/events`, {
      headers: { authorization: `Bearer ${TOKENS.acmeApprover}` },
      signal: abort.signal,
    });
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let text = decoder.decode((await reader.read()).value);
    const pending = stack.nats.subjects.approvals('acme', 'pending');
    stack.nats.nc.publish(
      pending,
      '{}\n\nevent: server:restarting\ndata: {"message":"forged"}\nretry: 86400000\n\n',
    );
    stack.nats.nc.publish(pending, 'not json at all\n\nevent: x');
    stack.nats.nc.publish(pending, '{"approvalKey":"k",\n"note":"last"}');
    const deadline = Date.now() + 10_000;
    while (!text.includes('"note":"last"') && Date.now() < deadline) {
      const { value, done } = await reader.read();
      if (done) break;
      text += decoder.decode(value);
    }
    abort.abort();
    const frames = text.split('\n\n').filter((f) => f.startsWith('event:'));
    // The first two are not one JSON object: dropped whole. The last is, written on one line.
    expect(frames).toEqual(['event: approval:pending\ndata: {"approvalKey":"k","note":"last"}']);
  });
});
