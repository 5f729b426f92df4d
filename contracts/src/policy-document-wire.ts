import { z } from 'zod';
import { mergeableJson } from './json-limits';

/**
 * A policy document as the API carries it (`PUT /v1/policy`'s `document`, `GET /v1/policy`, a
 * what-if's `candidate`): any JSON object here, with no key at any depth `__proto__`,
 * `constructor` or `prototype`. Its real schema is the permission chain's (`StoredPolicySchema`
 * in policy-runtime), which validates it when it is put; the OpenAPI document spells that schema
 * out wherever this one is used (`components.schemas.PolicyDocument`).
 */
export const PolicyDocumentWireSchema = mergeableJson(z.record(z.string(), z.unknown()));
