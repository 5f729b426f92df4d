import { createHash } from 'node:crypto';
import { ErrorCode, ToolgateError, type Scope } from '@toolgate/contracts';
import type { TokenGrant } from '../config';

/** Who is calling: resolved from a bearer token. */
export interface Principal {
  tenant: string;
  identity: string;
  scopes: ReadonlySet<Scope>;
}

const sha256 = (s: string) => createHash('sha256').update(s, 'utf8').digest();

/**
 * Verifies bearer tokens against the configured grants. Grants are looked up by the sha256 digest
 * of the presented token — one map lookup, however many tenants there are (a scan compared every
 * grant on every request) — so the only comparison whose timing depends on a secret is between
 * digests, which tells nothing about a token (finding a token from its digest's prefix is a
 * preimage attack on sha256). No error message ever contains a token.
 */
export class TokenAuth {
  private readonly grants = new Map<string, Principal>();

  constructor(grants: readonly TokenGrant[]) {
    for (const g of grants) {
      const digest = g.tokenSha256 ? g.tokenSha256.toLowerCase() : sha256(g.token!).toString('hex');
      // A later grant of the same token wins, as it did when every grant was compared in turn.
      this.grants.set(digest, {
        tenant: g.tenant,
        identity: g.identity,
        scopes: new Set(g.scopes),
      });
    }
  }

  /** Resolves an `Authorization` header value (`Bearer <token>`). */
  authenticate(authorization: string | undefined | null): Principal {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? '');
    if (!match) throw new ToolgateError(ErrorCode.Unauthorized, 'missing bearer token');
    const found = this.grants.get(sha256(match[1]!).toString('hex'));
    if (!found) throw new ToolgateError(ErrorCode.Unauthorized, 'invalid bearer token');
    return found;
  }

  /**
   * Throws `forbidden` unless the principal may do what `access` names: a scope (admin holds every
   * scope), `read` (any of dispatch, approve, admin: the tenant's dispatches, runs and approvals
   * are read by its agents and its approvers alike), or `any` (an authenticated token).
   */
  static require(principal: Principal, access: Access): void {
    if (access === 'any' || principal.scopes.has('admin')) return;
    if (access === 'read') {
      if (principal.scopes.has('dispatch') || principal.scopes.has('approve')) return;
    } else if (principal.scopes.has(access)) return;
    const message =
      access === 'read'
        ? 'this token lacks a "dispatch" or "approve" scope'
        : `this token lacks the "${access}" scope`;
    throw new ToolgateError(ErrorCode.Forbidden, message, { details: { scope: access } });
  }
}

/** What an operation needs of a token: one scope, any reading scope, or only to be valid. */
export type Access = Scope | 'read' | 'any';
