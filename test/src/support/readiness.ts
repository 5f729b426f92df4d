import { eventually } from '@toolgate/testing';
import type { TestStack } from './test-stack';

/** A service's /readyz: its status and its checks. */
export async function readyz(url: string) {
  const res = await fetch(`${url}/readyz`);
  return { status: res.status, body: (await res.json()) as { checks: Record<string, boolean> } };
}

/** The five services of a stack, as `/readyz` is asked of each. */
export function servicesOf(stack: TestStack) {
  const { all } = stack;
  return [all.gateway, all.evaluator, all.executor, all.journal, all.worktree];
}

/** Waits until `/readyz` of each of `services` answers 503; its checks, one per service. */
export async function until503(
  services: readonly { name: string; url: string }[],
): Promise<Record<string, boolean>[]> {
  const checks: Record<string, boolean>[] = [];
  for (const s of services) {
    checks.push(
      await eventually(
        async () => {
          const r = await readyz(s.url);
          return r.status === 503 ? r.body.checks : undefined;
        },
        { what: `${s.name}'s /readyz to answer 503` },
      ),
    );
  }
  return checks;
}
