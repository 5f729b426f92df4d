import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import {
  hiddenFindings,
  inputPreview,
  revealText,
  signResolveLink,
  WEBHOOK_DELIVERY_HEADER,
  WEBHOOK_EVENT_HEADER,
  WEBHOOK_SIGNATURE_HEADER,
  webhookSignature,
  type ApprovalDetail,
  type ApprovalWebhookBody,
  type Subjects,
} from '@toolgate/contracts';
import type { ApprovalResolver } from './approval-resolver';

/** Where and how approvals are sent out (see the gateway's config). */
export interface ApprovalWebhookSettings {
  urls: string[];
  secret: string;
  /** Links are added when both are set. */
  linkSecret?: string | undefined;
  publicUrl?: string | undefined;
  linkTtlMs: number;
  attempts: number;
  backoffMs: number;
}

const decoder = new TextDecoder();

/**
 * Sends each approval notification of the gateway's tenants to the configured webhooks. A
 * notification on the bus is only a hint (anyone who may publish on the subject can send one): the
 * approval it names is read from the journal before anything is sent, so a forged one sends
 * nothing. One gateway replica handles each notification (a queue group). Each delivery is signed
 * and retried with exponential backoff on a failure or a non-2xx answer, up to `attempts`.
 */
export class ApprovalNotifier {
  private readonly subs: Subscription[] = [];
  private readonly inFlight = new Set<Promise<void>>();
  private readonly abort = new AbortController();

  constructor(
    private readonly nc: NatsConnection,
    private readonly subjects: Subjects,
    private readonly tenants: readonly string[],
    private readonly resolver: ApprovalResolver,
    private readonly settings: ApprovalWebhookSettings,
    private readonly now: () => Date,
  ) {}

  start(): void {
    for (const tenant of new Set(this.tenants)) {
      this.subs.push(
        this.nc.subscribe(this.subjects.approvals(tenant, '*'), {
          queue: `${this.subjects.prefix}-gateway-webhooks`,
          callback: (err, msg) => {
            if (err) return;
            const task = this.notify(tenant, msg.subject, msg.data).catch(() => undefined);
            this.inFlight.add(task);
            void task.finally(() => this.inFlight.delete(task));
          },
        }),
      );
    }
  }

  /** Stops listening and abandons the retries still waiting; waits for the sends in flight. */
  async stop(): Promise<void> {
    for (const sub of this.subs) sub.unsubscribe();
    this.abort.abort();
    await Promise.allSettled([...this.inFlight]);
  }

  private async notify(tenant: string, subject: string, data: Uint8Array): Promise<void> {
    const hint = JSON.parse(decoder.decode(data)) as Record<string, unknown>;
    const { approvalKey: key, dispatchId, runId } = hint;
    if (typeof key !== 'string' || typeof dispatchId !== 'string' || typeof runId !== 'string')
      return;
    const principal = { tenant, identity: 'webhooks', scopes: new Set(['approve'] as const) };
    const detail = await this.resolver.get(principal, { key, dispatchId, runId });
    const event = subject.endsWith('.pending') ? 'approval:pending' : 'approval:resolved';
    // A hint only says when to look (anyone may publish one on an open broker): what is sent is
    // what the journal holds — a parked call for `pending`, a recorded resolution for `resolved`.
    if (detail.approval.status !== (event === 'approval:pending' ? 'pending' : 'resolved')) return;
    const body = JSON.stringify(this.body(event, detail));
    const delivery = deliveryId(event, detail.approval);
    await Promise.all(this.settings.urls.map((url) => this.deliver(url, event, delivery, body)));
  }

  /** The message: Slack's `text` and `blocks`, with the approval's fields beside them. */
  private body(event: ApprovalWebhookBody['event'], detail: ApprovalDetail): ApprovalWebhookBody {
    const a = detail.approval;
    const preview = inputPreview(a.input);
    const summary = revealText(preview.summary ?? preview.json);
    const hidden = hiddenFindings(a.input).length > 0;
    const tool = a.toolName ?? '?';
    const links = event === 'approval:pending' ? this.links(a) : undefined;
    const text =
      event === 'approval:pending'
        ? `Approval needed: ${tool} in run ${a.runId}: ${summary}${hidden ? ' (⚠ hidden characters, shown escaped)' : ''}`
        : `Approval ${a.decision === 'allow' ? 'allowed' : 'denied'} by ${a.resolvedBy ?? '?'}: ${tool} in run ${a.runId}`;
    const blocks: unknown[] = [
      { type: 'section', text: { type: 'mrkdwn', text: escapeMrkdwn(text) } },
      {
        type: 'context',
        elements: [
          {
            type: 'mrkdwn',
            text: escapeMrkdwn(
              `policy rev ${a.policyRevision} · input ${a.inputDigest.slice(0, 12)} · expires ${a.expiresAt ?? '?'}`,
            ),
          },
        ],
      },
    ];
    if (links)
      blocks.push({
        type: 'actions',
        elements: [
          { type: 'button', text: { type: 'plain_text', text: 'Allow…' }, url: links.allow },
          { type: 'button', text: { type: 'plain_text', text: 'Deny…' }, url: links.deny },
        ],
      });
    return {
      text,
      blocks,
      event,
      tenant: a.tenant,
      runId: a.runId,
      dispatchId: a.dispatchId,
      approvalKey: a.approvalKey,
      inputDigest: a.inputDigest,
      policyRevision: a.policyRevision,
      toolName: tool,
      summary,
      expiresAt: a.expiresAt,
      ...(a.decision ? { decision: a.decision } : {}),
      ...(a.resolvedBy ? { resolvedBy: a.resolvedBy } : {}),
      ...(links ? { links } : {}),
    };
  }

  /** Signed links to the pages that allow or deny, expiring with the approval or the link TTL. */
  private links(a: ApprovalDetail['approval']): { allow: string; deny: string } | undefined {
    const { linkSecret, publicUrl, linkTtlMs } = this.settings;
    if (!linkSecret || !publicUrl) return undefined;
    const ttlEnd = this.now().getTime() + linkTtlMs;
    const exp = Math.floor(Math.min(ttlEnd, a.expiresAt ? Date.parse(a.expiresAt) : ttlEnd) / 1000);
    const link = (decision: 'allow' | 'deny') =>
      new URL(
        `v1/approvals/link/${signResolveLink(linkSecret, {
          tenant: a.tenant,
          runId: a.runId,
          dispatchId: a.dispatchId,
          approvalKey: a.approvalKey,
          inputDigest: a.inputDigest,
          decision,
          exp,
        })}`,
        publicUrl.endsWith('/') ? publicUrl : `${publicUrl}/`,
      ).toString();
    return { allow: link('allow'), deny: link('deny') };
  }

  private async deliver(url: string, event: string, delivery: string, body: string): Promise<void> {
    const { attempts, backoffMs, secret } = this.settings;
    for (let attempt = 1; attempt <= attempts; attempt++) {
      if (this.abort.signal.aborted) return;
      try {
        const res = await fetch(url, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            [WEBHOOK_EVENT_HEADER]: event,
            [WEBHOOK_DELIVERY_HEADER]: delivery,
            [WEBHOOK_SIGNATURE_HEADER]: webhookSignature(
              secret,
              Math.floor(this.now().getTime() / 1000),
              body,
            ),
          },
          body,
          signal: AbortSignal.any([this.abort.signal, AbortSignal.timeout(10_000)]),
          redirect: 'error',
        });
        await res.arrayBuffer().catch(() => undefined);
        if (res.ok) return;
      } catch {
        // A receiver that is down: retried below.
      }
      if (attempt < attempts) {
        // Stopped: the wait ends at once (an AbortError), and the loop's check returns.
        await sleep(backoffMs * 2 ** (attempt - 1), undefined, { signal: this.abort.signal }).catch(
          () => undefined,
        );
      }
    }
  }
}

/**
 * The delivery id of an approval's notification: the same for every attempt, every replica and
 * every repeat of the hint on the bus (anyone may publish one again), so a receiver that
 * deduplicates on it sees each approval's pending and resolved once. UUID-shaped.
 */
function deliveryId(
  event: ApprovalWebhookBody['event'],
  a: Pick<ApprovalDetail['approval'], 'tenant' | 'runId' | 'dispatchId'>,
): string {
  const hex = createHash('sha256')
    .update(JSON.stringify([event, a.tenant, a.runId, a.dispatchId]))
    .digest('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20, 32)}`;
}

/** Slack's mrkdwn control characters as entities: an input cannot format or mention. */
function escapeMrkdwn(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}
