import { RESOLVE_LINK_ERROR_HEADER, verifyWebhookSignature } from '@toolgate/contracts';
import { eventually } from '@toolgate/testing';
import { settled } from '../support/dispatch-probes';
import { type TestStack } from '../support/test-stack';
import {
  journalOf,
  park,
  startWebhookStack,
  type CountingTool,
  type Delivery,
} from './approval-helpers';

const SECRET = 'webhook-secret-0123456789';
const LINK_SECRET = 'link-secret-0123456789abc';

/**
 * Approvals reach people: a real HTTP receiver gets each approval:pending and approval:resolved,
 * signed, retried after a failure, in a Slack-compatible shape; the links in a pending message
 * resolve the call through the same first-resolution-wins path, once.
 */
describe('approvals: webhooks and resolve-by-link', () => {
  let rig: Awaited<ReturnType<typeof startWebhookStack>>;
  let stack: TestStack;
  let gated: CountingTool;
  let deliveries: Delivery[];

  beforeAll(async () => {
    // Answers 503 to the first attempt of each delivery: every one is retried.
    rig = await startWebhookStack('approvals-webhooks', {
      secret: SECRET,
      failFirst: true,
      env: {
        GATEWAY_APPROVAL_LINK_SECRET: LINK_SECRET,
        GATEWAY_PUBLIC_URL: 'http://gateway.invalid/',
      },
    });
    ({ stack, gated } = rig);
    deliveries = rig.receiver.deliveries;
  });
  afterAll(() => rig?.stop());

  /** The link's path on this stack's gateway (the message names the public URL). */
  const onStack = (link: string) => `${stack.all.gateway.url}${new URL(link).pathname}`;

  it('posts a signed, Slack-compatible approval:pending after retrying, whose allow link resolves the call once', async () => {
    const parked = await park(stack, 'gated');
    const pending = await eventually(
      () =>
        deliveries.find(
          (d) => d.event === 'approval:pending' && d.body.dispatchId === parked.dispatchId,
        ),
      { timeoutMs: 20_000, what: 'approval:pending delivered' },
    );
    // Signed with the secret over the exact body; a changed body or another key does not verify.
    const now = Math.floor(Date.now() / 1000);
    expect(verifyWebhookSignature(SECRET, pending.signature, pending.raw, now)).toBe(true);
    expect(verifyWebhookSignature(SECRET, pending.signature, `${pending.raw} `, now)).toBe(false);
    expect(
      verifyWebhookSignature('another-secret-0123456', pending.signature, pending.raw, now),
    ).toBe(false);
    // Retried: the receiver refused the first attempt of this delivery.
    expect(rig.receiver.refused.has(pending.id)).toBe(true);
    // The hint published again (anyone on the bus may): delivered again under the same id, so a
    // receiver that deduplicates on it sees this approval's pending once.
    stack.nats.nc.publish(
      stack.nats.subjects.approvals('acme', 'pending'),
      JSON.stringify({
        approvalKey: parked.approval.approvalKey,
        dispatchId: parked.dispatchId,
        runId: parked.runId,
      }),
    );
    const repeated = await eventually(
      () => {
        const all = deliveries.filter(
          (d) => d.event === 'approval:pending' && d.body.dispatchId === parked.dispatchId,
        );
        return all.length === 2 ? all : undefined;
      },
      { timeoutMs: 20_000, what: 'the repeated approval:pending delivered' },
    );
    expect(repeated.map((d) => d.id)).toEqual([pending.id, pending.id]);
    // Slack's incoming-webhook shape, and Toolgate's fields.
    expect(pending.body.text).toContain(`gated in run ${parked.runId}`);
    expect(pending.body.blocks[0]).toMatchObject({ type: 'section', text: { type: 'mrkdwn' } });
    expect(pending.body).toMatchObject({
      tenant: 'acme',
      runId: parked.runId,
      approvalKey: parked.approval.approvalKey,
      inputDigest: parked.approval.inputDigest,
      policyRevision: parked.approval.policyRevision,
    });
    const links = pending.body.links!;
    expect(new URL(links.allow).origin).toBe('http://gateway.invalid');

    // Opening the page decides nothing (a link preview must not).
    const page = await fetch(onStack(links.allow));
    expect(page.status).toBe(200);
    expect(page.headers.get('content-security-policy')).toContain("default-src 'none'");
    expect(await page.text()).toContain('Allow this call');
    expect((await journalOf(stack, parked)).resolved).toBeUndefined();

    // A tampered link is refused; the real one resolves; a second use hears who won.
    const tampered = links.deny.replace(/.$/, (c) => (c === 'A' ? 'B' : 'A'));
    const refused = await fetch(onStack(tampered), { method: 'POST' });
    expect(refused.status).toBe(404);
    expect(refused.headers.get(RESOLVE_LINK_ERROR_HEADER)).toBe('not-found');
    const allowed = await fetch(onStack(links.allow), { method: 'POST' });
    expect(allowed.status).toBe(200);
    expect(await allowed.text()).toContain('Allowed as approval-link');
    const again = await fetch(onStack(links.deny), { method: 'POST' });
    expect(again.status).toBe(409);
    expect(again.headers.get(RESOLVE_LINK_ERROR_HEADER)).toBe('already-resolved');
    const reopened = await fetch(onStack(links.deny));
    expect(reopened.status).toBe(409);
    expect(reopened.headers.get(RESOLVE_LINK_ERROR_HEADER)).toBe('already-resolved');
    expect(await again.text()).toContain('Already resolved by approval-link: allow');
    expect((await settled(stack, parked.dispatchId)).dispatch.outcome).toBe('ok');
    expect(gated.runsOf(parked.input.n)).toBe(1);
    expect((await journalOf(stack, parked)).resolved).toBe(1);

    const resolved = await eventually(
      () =>
        deliveries.find(
          (d) => d.event === 'approval:resolved' && d.body.dispatchId === parked.dispatchId,
        ),
      { timeoutMs: 20_000, what: 'approval:resolved delivered' },
    );
    expect(resolved.body).toMatchObject({ decision: 'allow', resolvedBy: 'approval-link' });
    expect(resolved.body.links).toBeUndefined();
  });

  it('refuses an expired or foreign link, and sends nothing for a forged notification', async () => {
    const { signResolveLink } = await import('@toolgate/contracts');
    const parked = await park(stack, 'gated');
    const claims = {
      tenant: 'acme',
      runId: parked.runId,
      dispatchId: parked.dispatchId,
      approvalKey: parked.approval.approvalKey,
      inputDigest: parked.approval.inputDigest,
      decision: 'allow' as const,
    };
    const expired = signResolveLink(LINK_SECRET, {
      ...claims,
      exp: Math.floor(Date.now() / 1000) - 1,
    });
    const foreign = signResolveLink('not-the-link-secret-xyz', { ...claims, exp: 2e9 });
    // Signed with the link secret, but claims bent after signing: the signature no longer holds.
    const [payload, mac] = signResolveLink(LINK_SECRET, { ...claims, exp: 2e9 }).split('.');
    const bent = `${Buffer.from(
      Buffer.from(payload!, 'base64url').toString('utf8').replace('"allow"', '"deny"'),
    ).toString('base64url')}.${mac}`;
    const malformed = ['x', 'a.b', `${'A'.repeat(3000)}.${'B'.repeat(43)}`, '%00'];
    for (const token of [expired, foreign, bent, ...malformed]) {
      for (const method of ['GET', 'POST']) {
        const res = await fetch(`${stack.all.gateway.url}/v1/approvals/link/${token}`, { method });
        expect({ token, method, status: res.status }).toEqual({ token, method, status: 404 });
        expect(res.headers.get(RESOLVE_LINK_ERROR_HEADER)).toBe('not-found');
      }
    }
    expect((await journalOf(stack, parked)).resolved).toBeUndefined();

    // A notification naming a call that is not parked: read from the journal first, nothing sent.
    const before = deliveries.length;
    stack.nats.nc.publish(
      stack.nats.subjects.approvals('acme', 'pending'),
      JSON.stringify({ approvalKey: 'f'.repeat(64), dispatchId: 'nope', runId: 'nope' }),
    );
    // The real one for this call arrives; the forged one never does.
    await eventually(
      () =>
        deliveries.find(
          (d) => d.event === 'approval:pending' && d.body.dispatchId === parked.dispatchId,
        ),
      { timeoutMs: 20_000, what: 'approval:pending delivered' },
    );
    await new Promise((resolve) => setTimeout(resolve, 2500));
    expect(deliveries.slice(before).filter((d) => d.body.dispatchId === 'nope')).toEqual([]);
  });
});
