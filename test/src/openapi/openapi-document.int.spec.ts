import { readFileSync } from 'node:fs';
import {
  CLIENT_TYPES_PATH,
  generateClientTypes,
  runPackageBin,
  withDocumentFile,
} from './client-types';

/**
 * The gateway's OpenAPI document as a contract: it passes Redocly's recommended ruleset with no
 * error, and the client types checked in beside this spec are the ones it generates today. It needs
 * no server, but runs two tools as processes (10-20 s), so it is not part of the unit tier.
 */

interface LintReport {
  totals: { errors: number; warnings: number };
  problems: { ruleId: string; severity: string; message: string }[];
}

it("passes Redocly's recommended ruleset with no error", () => {
  const report = withDocumentFile((file) => {
    const out = runPackageBin(
      '@redocly/cli',
      ['lint', file, '--extends=recommended', '--format=json'],
      {
        // No telemetry, update check or notice: the lint runs offline.
        REDOCLY_TELEMETRY: 'off',
        REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true',
        REDOCLY_SUPPRESS_NOTIFICATIONS: 'true',
      },
    );
    return JSON.parse(out.slice(out.indexOf('{'))) as LintReport;
  });
  const errors = report.problems.filter((p) => p.severity === 'error');
  expect(errors).toEqual([]);
  expect(report.totals.errors).toBe(0);
  // The one known warning: /v1/approvals/{key}/resolve and /v1/approvals/link/{token} could both
  // match /v1/approvals/link/resolve (no approval key is "link": keys are 64 hex digits).
  expect(report.problems.map((p) => p.ruleId)).toEqual(['no-ambiguous-paths']);
});

it('has its client types checked in fresh (npm run openapi:client rewrites them)', () => {
  expect(readFileSync(CLIENT_TYPES_PATH, 'utf8')).toBe(generateClientTypes());
});
