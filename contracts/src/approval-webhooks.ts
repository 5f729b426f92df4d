import { createHmac, timingSafeEqual } from 'node:crypto';
import type { ApprovalView } from './api';

/**
 * Approvals reach people where they are: the gateway POSTs each `approval:pending` and
 * `approval:resolved` to the configured webhook URLs, signed, retried with backoff, as JSON a Slack
 * incoming webhook accepts (`text` and `blocks`) with Toolgate's own fields beside them; a pending
 * approval's message carries signed, expiring links that resolve it through the same
 * first-resolution-wins path as the API.
 *
 * Published by the gateway (one replica per notification: a queue group); consumed by any HTTP
 * receiver. Delivery is at least once: a receiver deduplicates on {@link WEBHOOK_DELIVERY_HEADER}.
 */

/** `t=<unix seconds>,v1=<hex HMAC-SHA256 over "<t>.<body>">` with the webhook secret. */
export const WEBHOOK_SIGNATURE_HEADER = 'x-toolgate-signature';
/** `approval:pending` or `approval:resolved`. */
export const WEBHOOK_EVENT_HEADER = 'x-toolgate-event';
/** One id per approval and event (pending, resolved): the same on every retry and every repeat. */
export const WEBHOOK_DELIVERY_HEADER = 'x-toolgate-delivery';

/** Which parked call an approval is: the fields of {@link ApprovalView} that name it. */
type ApprovalIdentity = Pick<
  ApprovalView,
  'tenant' | 'runId' | 'dispatchId' | 'approvalKey' | 'inputDigest'
>;

/** A webhook body: Slack's `text`/`blocks`, and the approval as Toolgate's fields. */
export interface ApprovalWebhookBody
  extends ApprovalIdentity, Pick<ApprovalView, 'policyRevision' | 'expiresAt'> {
  text: string;
  blocks: unknown[];
  event: 'approval:pending' | 'approval:resolved';
  toolName: string;
  /** The input's headline (command, path...) with hidden characters escaped. */
  summary: string;
  decision?: 'allow' | 'deny';
  resolvedBy?: string;
  /** For a pending approval: the pages that allow or deny it (each a signed, expiring link). */
  links?: { allow: string; deny: string };
}

/** The signature header's value for `body` sent at `unixSeconds`. */
export function webhookSignature(secret: string, unixSeconds: number, body: string): string {
  const mac = createHmac('sha256', secret).update(`${unixSeconds}.${body}`).digest('hex');
  return `t=${unixSeconds},v1=${mac}`;
}

/**
 * Whether a received body carries a valid signature no older than `toleranceSeconds` (what a
 * receiver checks before trusting a delivery; constant-time compare).
 */
export function verifyWebhookSignature(
  secret: string,
  header: string | undefined,
  body: string,
  nowSeconds: number,
  toleranceSeconds = 300,
): boolean {
  const m = /^t=(\d{1,12}),v1=([0-9a-f]{64})$/.exec(header ?? '');
  if (!m) return false;
  const t = Number(m[1]);
  if (Math.abs(nowSeconds - t) > toleranceSeconds) return false;
  const expected = Buffer.from(webhookSignature(secret, t, body).slice(-64), 'hex');
  return timingSafeEqual(expected, Buffer.from(m[2]!, 'hex'));
}

/**
 * On a resolve link's page that refuses (an unknown or expired link, an approval already resolved,
 * a resolution refused): the error's stable code, for a tool that opens links (the page itself is
 * for a person).
 */
export const RESOLVE_LINK_ERROR_HEADER = 'x-toolgate-error';

/** What a resolve link grants: one decision on one parked call, until it expires. */
export interface ResolveLinkClaims extends ApprovalIdentity {
  decision: 'allow' | 'deny';
  /** Expiry, unix seconds. */
  exp: number;
}

/** A link token: base64url(claims JSON) `.` base64url(HMAC-SHA256 of that with the link secret). */
export function signResolveLink(secret: string, claims: ResolveLinkClaims): string {
  const payload = Buffer.from(JSON.stringify(claims)).toString('base64url');
  const mac = createHmac('sha256', secret).update(payload).digest('base64url');
  return `${payload}.${mac}`;
}

/** The claims of a link token signed with `secret` and not expired at `nowSeconds`, else null. */
export function verifyResolveLink(
  secret: string,
  token: string,
  nowSeconds: number,
): ResolveLinkClaims | null {
  const m = /^([A-Za-z0-9_-]{1,2048})\.([A-Za-z0-9_-]{43})$/.exec(token);
  if (!m) return null;
  // Compared as text: the signature's one canonical encoding. (Decoding would ignore the last
  // character's two spare bits, so four spellings of a signature would all pass.)
  const expected = Buffer.from(
    createHmac('sha256', secret).update(m[1]!).digest('base64url'),
    'latin1',
  );
  const given = Buffer.from(m[2]!, 'latin1');
  if (!timingSafeEqual(given, expected)) return null;
  let claims: ResolveLinkClaims;
  try {
    claims = JSON.parse(Buffer.from(m[1]!, 'base64url').toString('utf8')) as ResolveLinkClaims;
  } catch {
    return null;
  }
  if (typeof claims.exp !== 'number' || claims.exp < nowSeconds) return null;
  if (claims.decision !== 'allow' && claims.decision !== 'deny') return null;
  return claims;
}
