import { Controller, Inject, Param, Res } from '@nestjs/common';
import type { Response } from 'express';
import {
  hasErrorCode,
  ErrorCode,
  hiddenFindings,
  hiddenWarning,
  RESOLVE_LINK_ERROR_HEADER,
  revealText,
  ToolgateError,
  verifyResolveLink,
  type ResolveLinkClaims,
} from '@toolgate/contracts';
import { GatewayApi } from '../api/gateway-api';
import { GATEWAY_LINKS, type ApprovalLinkSettings } from './approval-link.settings';
import { toHttpError } from './error.filter';
import { Route } from './route.decorator';

/**
 * Resolve-by-link: the pages a webhook's Allow/Deny buttons open. A link is a signed, expiring
 * grant of one decision on one parked call. GET shows the call (its input revealed as the console
 * shows it) and a button; only the POST resolves — a link preview or a prefetch never decides —
 * and it goes through the same resolution as the API (the input digest checked, the first
 * resolution wins at the broker), so a link is used once: after it, every link of that call
 * answers who resolved it. The resolution is journaled as the configured link identity.
 */
@Controller()
export class ApprovalLinkController {
  constructor(
    @Inject(GatewayApi) private readonly api: GatewayApi,
    @Inject(GATEWAY_LINKS) private readonly settings: ApprovalLinkSettings,
  ) {}

  @Route('approvalLinkPage')
  async page(@Param('token') token: string, @Res() res: Response): Promise<void> {
    const claims = this.claims(token);
    if (!claims) return refuse(res, 'Link not valid', LINK_NOT_VALID);
    const principal = this.principal(claims);
    let body: string;
    try {
      const detail = await this.api.approvals.get(principal, {
        key: claims.approvalKey,
        dispatchId: claims.dispatchId,
        runId: claims.runId,
      });
      const a = detail.approval;
      if (a.status !== 'pending')
        return refuse(res, 'Already resolved', alreadyResolved(a.resolvedBy, a.decision));
      const warning = hiddenWarning(hiddenFindings(a.input));
      body =
        `<p>${esc(a.toolName ?? '?')} in run <code>${esc(a.runId)}</code>, policy revision ${a.policyRevision}.</p>` +
        (warning ? `<p class="warn"><strong>Warning:</strong> ${esc(warning)}</p>` : '') +
        `<pre>${esc(revealText(JSON.stringify(a.input, null, 2)))}</pre>` +
        `<form method="post"><button type="submit">${claims.decision === 'allow' ? 'Allow' : 'Deny'} this call</button></form>`;
    } catch (err) {
      return refuse(res, 'Not found', err);
    }
    send(res, 200, `${claims.decision === 'allow' ? 'Allow' : 'Deny'} this call?`, body, true);
  }

  @Route('approvalLinkResolve')
  async resolve(@Param('token') token: string, @Res() res: Response): Promise<void> {
    const claims = this.claims(token);
    if (!claims) return refuse(res, 'Link not valid', LINK_NOT_VALID);
    try {
      const { resolved } = await this.api.approvals.resolve(this.principal(claims), {
        key: claims.approvalKey,
        decision: claims.decision,
        dispatchId: claims.dispatchId,
        runId: claims.runId,
        inputDigest: claims.inputDigest,
        reason: 'resolved by link',
      });
      send(
        res,
        200,
        resolved.decision === 'allow' ? 'Allowed' : 'Denied',
        `${resolved.decision === 'allow' ? 'Allowed' : 'Denied'} as ${resolved.by}.`,
      );
    } catch (err) {
      if (hasErrorCode(err, ErrorCode.AlreadyResolved)) {
        const d = (err as ToolgateError).details ?? {};
        return refuse(res, 'Already resolved', alreadyResolved(d.by, d.decision));
      }
      refuse(res, 'Not resolved', err);
    }
  }

  private claims(token: string): ResolveLinkClaims | null {
    if (!this.settings.secret) return null;
    return verifyResolveLink(this.settings.secret, token, Math.floor(Date.now() / 1000));
  }

  private principal(claims: ResolveLinkClaims) {
    return {
      tenant: claims.tenant,
      identity: this.settings.identity,
      scopes: new Set(['approve'] as const),
    };
  }
}

const LINK_NOT_VALID = new ToolgateError(
  ErrorCode.NotFound,
  'This link is unknown or has expired.',
);

function alreadyResolved(by: unknown, decision: unknown): ToolgateError {
  return new ToolgateError(
    ErrorCode.AlreadyResolved,
    `Already resolved by ${String(by ?? '?')}: ${String(decision ?? '?')}.`,
  );
}

/**
 * A refusal as a page: the status the gateway's one table gives its code, the code in
 * {@link RESOLVE_LINK_ERROR_HEADER}, and the wire message (generic for an internal error).
 */
function refuse(res: Response, title: string, err: unknown): void {
  const { status, error } = toHttpError(err);
  res.setHeader(RESOLVE_LINK_ERROR_HEADER, error.code);
  send(res, status, title, error.message);
}

function esc(text: string): string {
  return text.replace(
    /[&<>"']/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!,
  );
}

/** A small page with no script (`html` is text unless `escaped`): a strict CSP, no referrer (the link is a credential). */
function send(res: Response, status: number, title: string, html: string, escaped = false): void {
  res.status(status);
  res.setHeader(
    'Content-Security-Policy',
    "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'",
  );
  res.setHeader('Referrer-Policy', 'no-referrer');
  res.setHeader('Cache-Control', 'no-store');
  res.setHeader('X-Content-Type-Options', 'nosniff');
  res.type('html');
  res.send(
    `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>${esc(title)}</title>` +
      `<style>body{font-family:system-ui,sans-serif;max-width:40rem;margin:2rem auto;padding:0 1rem}pre{white-space:pre-wrap;overflow-wrap:anywhere;background:#f4f4f4;padding:.6rem;unicode-bidi:isolate;direction:ltr}.warn{background:#fff4d6;padding:.5rem}</style>` +
      `</head><body><h1>${esc(title)}</h1>${escaped ? html : `<p>${esc(html)}</p>`}</body></html>`,
  );
}
