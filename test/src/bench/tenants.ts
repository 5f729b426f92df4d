import { performance } from 'node:perf_hooks';
import { ApiOperation } from '@toolgate/contracts';
import { tenantToken, type BenchStack } from './bench-stack';
import { submitter } from './dispatch';
import { percentile, pool, round, since } from './stats';

export interface TenantsResult {
  /** Tenants with a policy of their own (and the bench's tool registered). */
  tenants: number;
  /** Rules in each tenant's policy. */
  policyRules: number;
  /** The bench tenant's sequential dispatch latency with nothing else going on… */
  quietP50Ms: number;
  quietP99Ms: number;
  /** …and while other tenants' policies are replaced and each used at once (its chain compiled). */
  stormP50Ms: number;
  stormP99Ms: number;
  /** Policy replacements per second during the storm (each followed by a dispatch of that tenant). */
  reloadsPerSec: number;
  /** `stormP99Ms / quietP99Ms`. */
  stormP99VsQuiet: number;
  samples: number;
}

/** A realistic tenant policy (~20 rules: argv, domains, risks, an expression), revision `rev`. */
function tenantPolicy(tenant: string, rev: number): Record<string, unknown> {
  return {
    engine: {
      deny: [
        {
          tool: 'shell',
          argv: ['rm -rf **', 'sudo **', 'git push --force **', 'dd **', 'mkfs **'],
        },
        { domains: ['evil.example', `*.${tenant}.blocked.example`] },
        { tool: ['drop_database', 'delete_bucket'], reason: `revision ${rev}` },
        { tool: 'shell', argv: ['wget **', 'nc **', 'chmod 777 **'] },
        { risk: 'destructive' },
      ],
      ask: [
        { tool: ['deploy_service', 'create_release'] },
        { tool: 'shell', argv: ['npm publish **', 'git push **', 'docker **', 'kubectl apply **'] },
        { domains: ['*.internal.example'] },
        { tool: 'write_file', risk: 'write' },
        { tool: 'db_query', risk: 'write' },
      ],
      expressions: [{ when: 'tool == "transfer" && input.amount > 1000', effect: 'deny' }],
    },
  };
}
const POLICY_RULES = 21;
const STORM_LANES = 4;

/**
 * Many tenants, each with its own policy: the bench tenant dispatches one call at a time, first on
 * a quiet stack, then during a reload storm — other tenants' policies replaced one after another,
 * each followed by a dispatch of that tenant, so its new revision is compiled by the evaluator
 * (and checked by the executor) while the bench tenant's calls go through. A policy reload must
 * not stall other tenants: compare the two p99s.
 */
export async function benchTenants(
  stack: BenchStack,
  opts: { tenants: number; quick: boolean },
): Promise<TenantsResult> {
  const submit = submitter(stack);
  await pool(opts.tenants, 16, async (i) => {
    const { tenant, token } = tenantToken(i);
    await stack.registerTools(token);
    await stack.api(ApiOperation.PutPolicy, { document: tenantPolicy(tenant, 0) }, 30_000, token);
  });
  // Every tenant used once, so the storm's compiles are of a changed revision, not a first one.
  await pool(opts.tenants, 32, async (i) => {
    await submit(`tenant-warm`, 10_000, tenantToken(i).token);
  });

  const samples = opts.quick ? 100 : 1000;
  const sequential = async (runId: string) => {
    const times: number[] = [];
    for (let i = 0; i < samples; i++) {
      const t = performance.now();
      const reply = await submit(runId, 10_000);
      times.push(since(t));
      if (reply.settled?.outcome !== 'ok')
        throw new Error(`tenants: a dispatch did not settle ok: ${JSON.stringify(reply)}`);
    }
    return times;
  };
  for (let i = 0; i < 50; i++) await submit('tenants-warmup', 10_000);
  const quiet = await sequential('tenants-quiet');

  let stop = false;
  let reloads = 0;
  let rev = 0;
  // Four reloaders at once, each replacing a policy and dispatching as its tenant, in turn.
  const storm = Promise.all(
    Array.from({ length: STORM_LANES }, async () => {
      while (!stop) {
        const i = ++rev % opts.tenants;
        const { tenant, token } = tenantToken(i);
        await stack.api(
          ApiOperation.PutPolicy,
          { document: tenantPolicy(tenant, rev) },
          30_000,
          token,
        );
        await submit(`tenant-storm`, 10_000, token);
        reloads++;
      }
    }),
  );
  const stormStart = performance.now();
  const loud = await sequential('tenants-storm');
  stop = true;
  const stormSeconds = since(stormStart) / 1000;
  await storm;

  const quietP99Ms = round(percentile(quiet, 99));
  const stormP99Ms = round(percentile(loud, 99));
  return {
    tenants: opts.tenants,
    policyRules: POLICY_RULES,
    quietP50Ms: round(percentile(quiet, 50)),
    quietP99Ms,
    stormP50Ms: round(percentile(loud, 50)),
    stormP99Ms,
    reloadsPerSec: Math.round(reloads / stormSeconds),
    stormP99VsQuiet: round(stormP99Ms / quietP99Ms, 2),
    samples,
  };
}
