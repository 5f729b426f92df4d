/** What the error cap refused a dispatch on: the run's failures in a row, and the cap. */
export interface ErrorCapFacts {
  failures: number;
  consecutive: number;
}

/**
 * The `rule` of a decision the run's error cap made, not the policy chain: the permission
 * evaluator records it on the `decided` deny (and its `settled`); the settlement reads it back as
 * an `error-cap` error, and a policy what-if leaves such a call out (no policy decided it).
 */
export function errorCapRule(cap: ErrorCapFacts) {
  return { source: 'error-cap', kind: 'error-cap', errorCap: cap } as const;
}

/**
 * The error-cap facts of a recorded decision's rule when the error cap made the decision (the
 * shape {@link errorCapRule} writes), else null: any other rule, or none. The one reading of it.
 */
export function errorCapOfRule(rule: unknown): ErrorCapFacts | null {
  if (typeof rule !== 'object' || rule === null) return null;
  const { source, errorCap } = rule as { source?: unknown; errorCap?: Partial<ErrorCapFacts> };
  if (source !== 'error-cap') return null;
  if (typeof errorCap?.failures !== 'number' || typeof errorCap.consecutive !== 'number')
    return null;
  return { failures: errorCap.failures, consecutive: errorCap.consecutive };
}
