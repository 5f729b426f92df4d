import { request } from 'node:http';
import type { JetStreamManager } from '@nats-io/jetstream';
import type { TokenGrant } from '@toolgate/gateway';
import { journalPartitionOf, type Subjects } from '@toolgate/contracts';
import type { TestStack } from './test-stack';

/** A tenant of a partitioned-journal spec: its token and the partition its journal lives in. */
export interface PartitionTenant {
  tenant: string;
  token: string;
  partition: number;
}

/**
 * `perPartition` tenants in each of `partitions` partitions (the first names, in order, that hash
 * there), each with a dispatch token of its own: every partition is exercised, whatever the hash.
 */
export function tenantsPerPartition(partitions: number, perPartition: number): PartitionTenant[] {
  const chosen: PartitionTenant[] = [];
  const count = new Array<number>(partitions).fill(0);
  for (let i = 0; chosen.length < partitions * perPartition; i++) {
    const tenant = `team-${i}`;
    const partition = journalPartitionOf(tenant, partitions);
    if (count[partition]! >= perPartition) continue;
    count[partition]!++;
    chosen.push({ tenant, token: `${tenant}-dispatch-token-0123456789`, partition });
  }
  return chosen;
}

/** The grants of {@link tenantsPerPartition}'s tenants (dispatch scope). */
export function grantsOf(tenants: readonly PartitionTenant[]): TokenGrant[] {
  return tenants.map(({ tenant, token }) => ({
    token,
    tenant,
    scopes: ['dispatch'],
    identity: `${tenant}-agent`,
  }));
}

/**
 * POSTs `body` as JSON to the stack's gateway, as {@link TestStack.http} does, over `node:http`
 * (kept-alive connections of its global agent): the cluster specs make thousands of these, and
 * `fetch` costs this process five times the CPU of a plain request for each.
 */
function postJson(
  stack: TestStack,
  route: string,
  token: string,
  body: unknown,
): Promise<{ status: number; body: any }> {
  return new Promise((resolve, reject) => {
    const req = request(
      `${stack.all.gateway.url}${route}`,
      {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('error', reject);
        res.on('end', () => {
          try {
            resolve({ status: res.statusCode!, body: text ? JSON.parse(text) : undefined });
          } catch (err) {
            reject(err);
          }
        });
      },
    );
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

/** Submits a call, then the same call again (another client's retry), and waits for its outcome. */
export async function submitTwice(
  stack: TestStack,
  token: string,
  runId: string,
  callId: string,
): Promise<{ first: { status: number; body: any }; again: { status: number; body: any } }> {
  const body = {
    runId,
    callId,
    agent: { agentType: 'coder' },
    tool: 'list_dir',
    input: { path: '.' },
  };
  const first = await postJson(stack, '/v1/dispatches', token, { ...body, wait: false });
  const again = await postJson(stack, '/v1/dispatches', token, { ...body, wait: 20_000 });
  return { first, again };
}

/**
 * Each tenant submits `calls` calls of `runId` (c0, c1, …) one after another, every tenant at once,
 * each call twice ({@link submitTwice}); the answers per tenant, in `tenants`' order.
 */
export function submitEachTenantTwice(
  stack: TestStack,
  tenants: readonly { token: string }[],
  runId: string,
  calls: number,
): Promise<Awaited<ReturnType<typeof submitTwice>>[][]> {
  return Promise.all(
    tenants.map(async ({ token }) => {
      const mine: Awaited<ReturnType<typeof submitTwice>>[] = [];
      for (let i = 0; i < calls; i++) mine.push(await submitTwice(stack, token, runId, `c${i}`));
      return mine;
    }),
  );
}

/** What went wrong among answers of {@link submitTwice} (all zero when each call was answered right). */
export function answerFaults(results: readonly Awaited<ReturnType<typeof submitTwice>>[]) {
  const t = { errors: 0, notAccepted: 0, notReplayed: 0, notOk: 0 };
  for (const { first, again } of results) {
    if (first.status >= 400 || again.status >= 400) t.errors++;
    else {
      if (first.body.status !== 'accepted') t.notAccepted++;
      if (again.body.status !== 'replayed') t.notReplayed++;
      if (again.body.settled?.outcome !== 'ok') t.notOk++;
    }
  }
  return t;
}

/** The distinct error answers among answers of {@link submitTwice}: what a failure says. */
export function errorAnswers(results: readonly Awaited<ReturnType<typeof submitTwice>>[]) {
  const seen = new Set<string>();
  for (const { first, again } of results)
    for (const answer of [first, again])
      if (answer.status >= 400)
        seen.add(`${answer.status} ${answer.body?.error?.code}: ${answer.body?.error?.message}`);
  return [...seen];
}

/**
 * A tenant's journal messages in each partition's stream: per stream, per dispatch, per event type.
 * Read from every partition, so one in the wrong place is seen.
 */
export async function tenantEventsByPartition(
  jsm: JetStreamManager,
  subjects: Subjects,
  tenant: string,
): Promise<Map<number, Map<string, Record<string, number>>>> {
  const found = new Map<number, Map<string, Record<string, number>>>();
  for (const partition of subjects.journal.partitions) {
    const info = await jsm.streams.info(partition.stream, {
      // Any partition token, this tenant: what the stream holds of it, wherever it came from.
      subjects_filter: `${subjects.prefix}.journal.*.${tenant}.>`,
    });
    const byDispatch = new Map<string, Record<string, number>>();
    for (const [subject, n] of Object.entries(info.state.subjects ?? {})) {
      const [dispatchId, type] = subject.split('.').slice(-2) as [string, string];
      byDispatch.set(dispatchId, { ...byDispatch.get(dispatchId), [type]: n });
    }
    if (byDispatch.size) found.set(partition.index, byDispatch);
  }
  return found;
}

/** Dispatches of a tenant's partition that do not hold each of the four events exactly once. */
export function notOnceEach(byDispatch: Map<string, Record<string, number>>): string[] {
  return [...byDispatch.entries()]
    .filter(([, c]) => ['requested', 'decided', 'started', 'settled'].some((t) => c[t] !== 1))
    .map(([id, c]) => `${id}: ${JSON.stringify(c)}`);
}

/**
 * What is wrong with where each tenant's journal events live (empty when nothing is): a tenant
 * found in another partition than its own, another number of dispatches than `calls`, a dispatch
 * without each of its four events exactly once ({@link notOnceEach}).
 */
export async function partitionPlacementFaults(
  jsm: JetStreamManager,
  subjects: Subjects,
  tenants: readonly PartitionTenant[],
  calls: number,
): Promise<string[]> {
  const faults: string[] = [];
  for (const { tenant, partition } of tenants) {
    const found = await tenantEventsByPartition(jsm, subjects, tenant);
    const where = [...found.keys()];
    if (where.length !== 1 || where[0] !== partition)
      faults.push(`${tenant}: in partitions ${where.join(', ')}, not only ${partition}`);
    const own = found.get(partition);
    if (own?.size !== calls) faults.push(`${tenant}: ${own?.size ?? 0} dispatches, not ${calls}`);
    if (own) faults.push(...notOnceEach(own).map((f) => `${tenant} ${f}`));
  }
  return faults;
}
