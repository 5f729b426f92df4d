import { createHash, timingSafeEqual } from 'node:crypto';
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
 * Verifies bearer tokens against the configured grants. Tokens are compared as sha256 digests in
 * constant time, and no error message ever contains a token.
 */
export class TokenAuth {
  private readonly grants: { digest: Buffer; principal: Principal }[];

  constructor(grants: readonly TokenGrant[]) {
    this.grants = grants.map((g) => ({
      digest: g.tokenSha256 ? Buffer.from(g.tokenSha256, 'hex') : sha256(g.token!),
      principal: { tenant: g.tenant, identity: g.identity, scopes: new Set(g.scopes) },
    }));
  }

  /** Resolves an `Authorization` header value (`Bearer <token>`). */
  authenticate(authorization: string | undefined | null): Principal {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? '');
    if (!match) throw new ToolgateError(ErrorCode.Unauthorized, 'missing bearer token');
    const digest = sha256(match[1]!);
    let found: Principal | undefined;
    for (const g of this.grants) if (timingSafeEqual(g.digest, digest)) found = g.principal;
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
