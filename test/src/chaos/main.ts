/**
 * `npm run chaos [-- --short] [--cluster]`: the five services as separate processes on a nats-server
 * of the run's own (free loopback port, temp store) and a PostgreSQL schema of its own, a remote tool
 * worker counting executions per dispatch, closed-loop load through the gateway's HTTP API, and a
 * kill -9 of each service in turn and of the broker (each restarted at once, the broker after a
 * second). With `--cluster`, the broker is a 3-node cluster of the run's own with R3 streams, and
 * the broker faults are a graceful step-down of the journal stream's leader, a kill -9 of its node,
 * and a kill -9 of the meta leader's node (each restarted after a second).
 * Prints progress on stderr and ONE JSON line on stdout (see chaos-report.ts); exits 1 when a goal
 * fails. Everything it started is stopped and removed, on success, failure or a signal.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { jetstream, jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { createSubjects, type Subjects } from '@toolgate/contracts';
import { compareProjections, createDb, readJournal, rebuildProjection } from '@toolgate/journal';
import {
  startNatsCluster,
  startNatsServer,
  uniqueName,
  useTestSchema,
  testJournalKeys,
  type NatsCluster,
} from '@toolgate/testing';
import {
  startProcessStack,
  type ProcessStack,
  type ServiceName,
  type ServiceProcess,
} from '../support/process-stack';
import { committedRepository } from '../support/git-repository';
import { stackEnv } from '../support/test-stack';
import {
  CHAOS_GRANTS,
  CHAOS_TENANT,
  CHAOS_TOKENS,
  CHAOS_TOOL,
  CHAOS_TOOL_AFTER,
  CountingWorker,
  LoadDriver,
  SettlementWatch,
  connectToBroker,
  submitUntilAccepted,
} from './chaos-load';
import {
  chaosReport,
  LEADER_CHANGES,
  type ChaosFacts,
  type KillRecord,
  type KillTarget,
} from './chaos-report';

/** What the run notes as it goes, besides what it returns. */
interface RunFacts {
  runFailures: string[];
  /** The services' logs: kept when the run fails (or with CHAOS_KEEP_LOGS set), removed when it passes. */
  logDir?: string;
  startup: ChaosFacts['startup'];
}

interface Mode {
  name: 'short' | 'full';
  /** Load before each kill. */
  warmMs: number;
  /** How long the broker stays down. */
  brokerDownMs: number;
  rounds: number;
  clients: number;
  toolDelayMs: number;
  /** How long, after the load stops, every submitted call has to settle. */
  drainMs: number;
  /** The whole run's bound. */
  budgetMs: number;
}

const MODES: Record<'short' | 'full', Mode> = {
  short: {
    name: 'short',
    warmMs: 1000,
    brokerDownMs: 1000,
    rounds: 1,
    clients: 8,
    toolDelayMs: 100,
    drainMs: 30_000,
    budgetMs: 150_000,
  },
  full: {
    name: 'full',
    warmMs: 6000,
    brokerDownMs: 3000,
    rounds: 3,
    clients: 32,
    toolDelayMs: 200,
    drainMs: 90_000,
    budgetMs: 900_000,
  },
};

/** The order of the kills in each round. */
const TARGETS: readonly KillTarget[] = [
  'tool-executor',
  'permission-evaluator',
  'journal',
  'gateway',
  'worktree',
  'nats-server',
];

/** On a cluster: the leader changes first (the services' kills then run on a settled cluster). */
const CLUSTER_TARGETS: readonly KillTarget[] = [
  'stream-leader-stepdown',
  'stream-leader',
  'meta-leader',
  'tool-executor',
  'permission-evaluator',
  'journal',
  'gateway',
  'worktree',
];

/** Stream replicas on a cluster, as deploy/k8s runs them. */
const CLUSTER_REPLICAS = 3;

/** Load before each leader change, at least. */
const SETTLE_BEFORE_LEADER_CHANGE_MS = 5000;

/** A cluster run's budget, as a multiple of its mode's. */
const CLUSTER_BUDGET_FACTOR = 3;

/** How long the services keep retrying, after each failed once, before their broker starts. */
const BROKER_LATE_BY_MS = 1000;

/** Ack waits of the run: a killed consumer's messages come back after this, not after 30 s. */
const ACK_WAIT_MS = '2000';

const runStartedAt = Date.now();
const log = (line: string) =>
  process.stderr.write(`chaos: [${((Date.now() - runStartedAt) / 1000).toFixed(1)} s] ${line}\n`);
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

const cleanups: { what: string; run: () => Promise<unknown> }[] = [];
async function cleanUp(): Promise<void> {
  while (cleanups.length) {
    const c = cleanups.pop()!;
    try {
      await c.run();
    } catch (err) {
      log(`cleanup of ${c.what} failed: ${(err as Error).message}`);
    }
  }
}

/** What the run observed, besides what the report adds. */
type Observed = Omit<ChaosFacts, 'durationMs' | 'runFailures' | 'mode' | 'startup' | 'broker'>;

/** Where the services run: the stack, its broker's nodes, and how a broker fault is struck. */
interface Deployment {
  stack: ProcessStack;
  servers: string[];
  subjects: Subjects;
  schema: { url: string; schema: string };
  targets: readonly KillTarget[];
  /** Strikes a broker fault (not a service kill); resolves with how to recover from it. */
  strikeBroker(target: KillTarget): Promise<Strike>;
}

/** A fault struck: which leaderships the target held, and how to bring it back. */
interface Strike {
  led?: string[];
  recover(): Promise<void>;
}

/** The environment every service of a run gets, on `natsUrl`. */
async function runEnvironment(
  natsUrl: string,
  prefix: string,
  schema: { url: string; schema: string },
) {
  const workdir = await committedRepository('toolgate-chaos-', { 'README.md': '# chaos\n' });
  cleanups.push({
    what: 'the host repository',
    run: async () => {
      await rm(workdir, { recursive: true, force: true });
      await rm(`${workdir}-worktrees`, { recursive: true, force: true });
    },
  });
  return {
    ...stackEnv({ prefix, url: natsUrl }, schema, workdir, CHAOS_GRANTS),
    WORKTREE_REPO: workdir,
    EXECUTOR_ACK_WAIT_MS: ACK_WAIT_MS,
    EVALUATOR_ACK_WAIT_MS: ACK_WAIT_MS,
    JOURNAL_ACK_WAIT_MS: ACK_WAIT_MS,
  };
}

/** One nats-server with R1 streams, started after the services (which must come up by themselves). */
async function deployOnOneNode(mode: Mode, facts: RunFacts): Promise<Deployment> {
  // Reserved, not started: the services are started first and must come up by themselves.
  const nats = await startNatsServer({ start: false });
  cleanups.push({ what: 'the nats-server', run: () => nats.cleanup() });
  const schema = await useTestSchema('chaos');
  cleanups.push({ what: `schema ${schema.schema}`, run: () => schema.cleanup() });
  const prefix = uniqueName('chaos');
  log(`broker ${nats.url}, prefix ${prefix}, schema ${schema.schema} (${mode.name} run)`);
  const env = await runEnvironment(nats.url, prefix, schema);
  const logDir = await mkdtemp(path.join(tmpdir(), 'toolgate-chaos-logs-'));
  facts.logDir = logDir;
  // Meanwhile, on the side: a service with a bad setting must exit at once.
  const badSetting = badConfigurationExits(env, logDir);

  const stack = await startProcessStack({ waitReady: false, env, logDir });
  cleanups.push({ what: 'the services', run: () => stack.stop() });
  // The broker comes up once every service has failed to reach it at least once (and said so).
  const retried = (s: ServiceProcess) =>
    /start-up attempt 1 failed: .*connection refused/.test(s.output());
  const all = [...stack.services.values()];
  const deadline = Date.now() + 30_000;
  while (!all.every(retried) && all.every((s) => s.running) && Date.now() < deadline)
    await sleep(50);
  // …and each keeps retrying while it is away: none gives up.
  await sleep(BROKER_LATE_BY_MS);
  const gaveUp = all.filter((s) => !s.running).map((s) => s.name);
  const silent = all.filter((s) => !retried(s)).map((s) => s.name);
  await nats.start();
  await stack.waitReady();
  const startup = {
    cameUpAfterBroker: gaveUp.length === 0 && silent.length === 0,
    permanentFailureExits: false,
  };
  facts.startup = startup;
  if (!startup.cameUpAfterBroker)
    facts.runFailures.push(
      `started before the broker: gave up: ${gaveUp.join(', ') || 'none'}; logged no retry: ${silent.join(', ') || 'none'}`,
    );
  log(`services up by themselves once the broker came up; logs in ${stack.logDir}`);
  startup.permanentFailureExits = await badSetting;
  return {
    stack,
    servers: [nats.url],
    subjects: createSubjects(prefix),
    schema,
    targets: TARGETS,
    async strikeBroker() {
      await nats.kill();
      return {
        async recover() {
          await sleep(mode.brokerDownMs);
          await nats.start();
          await stack.waitReady(60_000);
        },
      };
    },
  };
}

/**
 * A 3-node cluster of the run's own with R3 streams (deploy/k8s's shape). The late-broker start-up
 * is the single-node run's to check: here the cluster is up first.
 */
async function deployOnCluster(mode: Mode, facts: RunFacts): Promise<Deployment> {
  const cluster = await startNatsCluster({ label: 'chaos', size: CLUSTER_REPLICAS });
  cleanups.push({ what: 'the nats cluster', run: () => cluster.cleanup() });
  const schema = await useTestSchema('chaos');
  cleanups.push({ what: `schema ${schema.schema}`, run: () => schema.cleanup() });
  const prefix = uniqueName('chaos');
  const subjects = createSubjects(prefix);
  const stream = subjects.journal.stream;
  log(
    `cluster ${cluster.url}, prefix ${prefix}, schema ${schema.schema} (${mode.name} run, R${CLUSTER_REPLICAS})`,
  );
  const env = {
    ...(await runEnvironment(cluster.url, prefix, schema)),
    TOOLGATE_STREAM_REPLICAS: String(CLUSTER_REPLICAS),
  };
  const logDir = await mkdtemp(path.join(tmpdir(), 'toolgate-chaos-logs-'));
  facts.logDir = logDir;
  // Compiling five services from their sources at once takes a minute on a busy 2-core machine.
  const stack = await startProcessStack({ env, logDir, readyTimeoutMs: 180_000 });
  cleanups.push({ what: 'the services', run: () => stack.stop() });
  log(`services up on the cluster; logs in ${stack.logDir}`);
  const nc = await cluster.connect('chaos-leaders');
  /** Brings a killed node back after the broker's down time, and waits for the cluster and the stack. */
  const restart = (node: NatsCluster['nodes'][number]) => async () => {
    await sleep(mode.brokerDownMs);
    await node.start();
    await cluster.ready(60_000);
    await stack.waitReady(60_000);
  };
  return {
    stack,
    servers: cluster.servers,
    subjects,
    schema,
    targets: CLUSTER_TARGETS,
    async strikeBroker(target) {
      if (target === 'stream-leader-stepdown') {
        const before = await cluster.streamPlacement(stream);
        const after = await cluster.stepDown(stream);
        log(`stream leader stepped down: ${before.leader.name} → ${after.leader.name}`);
        return { led: ['stream'], recover: () => stack.waitReady(60_000) };
      }
      if (target === 'stream-leader') {
        const { leader } = await cluster.streamPlacement(stream);
        const meta = await cluster.metaLeader();
        await leader.kill();
        return { led: meta === leader ? ['stream', 'meta'] : ['stream'], recover: restart(leader) };
      }
      // The meta leader: moved off the stream's leader first (a graceful meta step-down), so the
      // kill shows what losing the meta leader alone costs.
      let meta = await cluster.metaLeader();
      for (let i = 0; i < 5 && meta === (await cluster.streamPlacement(stream)).leader; i++) {
        await nc
          .request('$JS.API.META.LEADER.STEPDOWN', undefined, { timeout: 2000 })
          .catch(() => undefined);
        await sleep(1000);
        meta = await cluster.metaLeader();
      }
      const { leader } = await cluster.streamPlacement(stream);
      await meta.kill();
      return { led: meta === leader ? ['meta', 'stream'] : ['meta'], recover: restart(meta) };
    },
  };
}

async function run(mode: Mode, facts: RunFacts, onCluster: boolean): Promise<Observed> {
  const { stack, servers, subjects, schema, targets, strikeBroker } = onCluster
    ? await deployOnCluster(mode, facts)
    : await deployOnOneNode(mode, facts);

  const nc = await connectToBroker(servers, 'chaos-harness');
  cleanups.push({ what: 'the harness connection', run: () => nc.close() });
  const worker = await CountingWorker.start(servers, subjects, mode.toolDelayMs);
  cleanups.push({ what: 'the worker', run: () => worker.stop() });
  const watch = new SettlementWatch(nc, subjects);
  cleanups.push({ what: 'the settlement watch', run: async () => watch.stop() });
  await registerTool(stack.gatewayUrl);

  const load = new LoadDriver(() => stack.gatewayUrl, watch, {
    clients: mode.clients,
    settleWaitMs: 15_000,
  });
  load.start();
  const kills: KillRecord[] = [];
  const probes = new Map<string, { runId: string }>();
  for (let round = 0; round < mode.rounds; round++) {
    for (const target of targets) {
      // Before a leader change, long enough that the last fault's cost is not measured as its own.
      await sleep(
        LEADER_CHANGES.includes(target)
          ? Math.max(mode.warmMs, SETTLE_BEFORE_LEADER_CHANGE_MS)
          : mode.warmMs,
      );
      const kill = await killAndRecover(target, kills.length, {
        stack,
        strikeBroker,
        worker,
        watch,
        probes,
      });
      kills.push(kill);
      log(
        `${target === 'stream-leader-stepdown' ? 'stepped down' : 'killed'} ${target}${kill.led ? ` (led ${kill.led.join(', ')})` : ''}: ${kill.inFlight.length} in flight, ready again after ${kill.timeToReadyMs} ms, serving after ${kill.timeToRecoverMs} ms (${kill.failedProbes} calls failed meanwhile)`,
      );
      if (kill.timeToRecoverMs === null) facts.runFailures.push(`${target} did not recover`);
    }
  }
  await load.stop();
  const watchesFollowed = await hotReloadAfterKills(stack.gatewayUrl, watch, probes);
  if (!watchesFollowed)
    facts.runFailures.push(
      'a tool registered or a policy put after the kills did not take effect (a KV watch did not resume)',
    );
  const submitted = new Map([...load.submitted, ...probes]);
  const probeIds = new Set(probes.keys());
  log(`load stopped: ${submitted.size} dispatches submitted; waiting for every one to settle`);

  const jsm = await jetstreamManager(nc);
  const settledCount = await drain(jsm, subjects, submitted, mode.drainMs);
  const outcomes = await readOutcomes(nc, subjects, settledCount);
  const lastEventOfLost = new Map<string, string>();
  for (const [id, { runId }] of submitted) {
    if (settledCount.has(id)) continue;
    lastEventOfLost.set(id, await lastEventOf(jsm, subjects, runId, id));
  }
  const projectionDifferences = await compareWithRebuild(nc, jsm, subjects, schema, facts);
  return {
    submitted,
    probeIds,
    settledCount,
    outcomes,
    executions: worker.executions,
    kills,
    lastEventOfLost,
    projectionDifferences,
    submittedAt: load.submittedAt,
    settledAt: watch.settledAt,
    unavailableAt: load.unavailableAt,
  };
}

/**
 * A permanent start-up failure is not retried: a service with a setting that does not parse exits
 * at once (status 1) and says what is wrong — while the broker it would need is not even up.
 */
async function badConfigurationExits(env: NodeJS.ProcessEnv, logDir: string): Promise<boolean> {
  const bad = await startProcessStack({
    waitReady: false,
    logDir,
    services: ['permission-evaluator'],
    env: { ...env, EVALUATOR_CONCURRENCY: '0' },
  });
  const evaluator = bad.service('permission-evaluator');
  // A bound, not a measure: compiling the service from its sources takes seconds on a busy machine.
  // "At once" is what the output shows: one failure line, no retries.
  const exit = await Promise.race([evaluator.exited(), sleep(60_000).then(() => undefined)]);
  await evaluator.kill();
  const said =
    /failed to start, not retrying: invalid configuration: .*EVALUATOR_CONCURRENCY/s.test(
      evaluator.output(),
    );
  log(
    `a bad setting: ${exit ? `exited with ${exit.code}` : 'still running after 60 s'}, ${said ? 'saying which' : `said: ${evaluator.output()}`}`,
  );
  return exit?.code === 1 && said && !/start-up attempt/.test(evaluator.output());
}

/**
 * Registers a chaos tool, trying again while the gateway has not seen the executor's announcement
 * in its registry mirror yet (`executor-unregistered`, right after a start).
 */
async function registerTool(gatewayUrl: string, name = CHAOS_TOOL): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const res = await fetch(`${gatewayUrl}/v1/tools`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${CHAOS_TOKENS.admin}`,
        'content-type': 'application/json',
      },
      body: JSON.stringify({
        tool: {
          name,
          description: 'Echoes its input after a short delay (chaos run).',
          parameters: {
            type: 'object',
            properties: { client: { type: 'integer' }, n: { type: 'integer' } },
          },
          policy: { executor: 'remote', risk: 'read', timeoutMs: 10_000 },
        },
      }),
    });
    if (res.status === 201) return;
    const text = await res.text();
    if (!text.includes('executor-unregistered') || Date.now() > deadline)
      throw new Error(`registering ${name}: ${res.status} ${text}`);
    await sleep(250);
  }
}

/**
 * After every kill (the broker's included), what is kept in KV must still reach the services: a
 * tool registered now runs, and a policy put now is applied. Each service mirrors its buckets with a
 * watch that has to survive the broker's restart.
 */
async function hotReloadAfterKills(
  gatewayUrl: string,
  watch: SettlementWatch,
  probes: Map<string, { runId: string }>,
): Promise<boolean> {
  const runId = 'after-kills';
  const dispatch = async (callId: string) => {
    const dispatchId = await submitUntilAccepted(
      () => gatewayUrl,
      { runId, callId, tool: CHAOS_TOOL_AFTER, input: { n: 1 } },
      () => false,
    );
    probes.set(dispatchId!, { runId });
    await watch.waitFor(runId, dispatchId!, 20_000);
    return watch.outcome(runId, dispatchId!);
  };
  const putPolicy = (document: unknown) =>
    fetch(`${gatewayUrl}/v1/policy`, {
      method: 'PUT',
      headers: {
        authorization: `Bearer ${CHAOS_TOKENS.admin}`,
        'content-type': 'application/json',
      },
      body: JSON.stringify({ document }),
    });
  await registerTool(gatewayUrl, CHAOS_TOOL_AFTER);
  const ran = await dispatch('registered-after');
  await putPolicy({
    engine: { deny: [{ tool: CHAOS_TOOL_AFTER, reason: 'chaos: denied after the kills' }] },
  });
  const denied = await dispatch('denied-after');
  await putPolicy({});
  log(
    `after the kills: a new tool ${ran === 'ok' ? 'ran' : `gave ${ran}`}, a new deny rule ${denied === 'denied' ? 'denied' : `gave ${denied}`}`,
  );
  return ran === 'ok' && denied === 'denied';
}

/**
 * Kills one target with SIGKILL (or, for `stream-leader-stepdown`, asks the stream's leader to step
 * down), notes what was in flight, restarts it, and measures how long until it is ready and until a
 * call submitted right after the kill settles.
 */
async function killAndRecover(
  target: KillTarget,
  index: number,
  ctx: {
    stack: ProcessStack;
    strikeBroker: Deployment['strikeBroker'];
    worker: CountingWorker;
    watch: SettlementWatch;
    probes: Map<string, { runId: string }>;
  },
): Promise<KillRecord> {
  const { stack, worker, watch } = ctx;
  const killedAt = Date.now();
  const isBroker = target === 'nats-server' || LEADER_CHANGES.includes(target);
  let strike: Strike;
  if (isBroker) strike = await ctx.strikeBroker(target);
  else {
    const service = stack.service(target as ServiceName);
    await service.kill();
    strike = {
      async recover() {
        await service.start();
        await service.waitReady(60_000);
      },
    };
  }
  // Requests already on the wire when the target died reach the worker within a moment.
  await sleep(150);
  const inFlight = worker.inFlight(watch.settled);

  // Serving again = a call submitted after the kill settles ok. A call that settles as an error
  // while the target is away (the worktree service unreachable, say) is followed by another.
  let failedProbes = 0;
  // A run per probe: the error cap would stop a run whose calls keep failing while a target is away.
  const probe = (attempt: number) => {
    const runId = `probe-${index}-${attempt}`;
    const callId = 'probe';
    return target === 'worktree'
      ? // The worktree service is on a call's path only under worktree isolation.
        { runId, callId, tool: 'list_dir', input: { path: '.' }, isolation: { kind: 'worktree' } }
      : { runId, callId, tool: CHAOS_TOOL, input: { probe: index, attempt } };
  };
  const recovered = (async () => {
    const deadline = killedAt + 60_000;
    for (let attempt = 0; Date.now() < deadline; attempt++) {
      const call = probe(attempt);
      const { runId } = call;
      const dispatchId = await submitUntilAccepted(
        () => stack.gatewayUrl,
        call,
        () => Date.now() > deadline,
      );
      if (!dispatchId) return null;
      ctx.probes.set(dispatchId, { runId });
      if (!(await watch.waitFor(runId, dispatchId, deadline - Date.now()))) return null;
      if ((await watch.outcome(runId, dispatchId)) === 'ok') return Date.now() - killedAt;
      failedProbes++;
      await sleep(250);
    }
    return null;
  })();

  let timeToReadyMs: number | null = null;
  try {
    await strike.recover();
    timeToReadyMs = Date.now() - killedAt;
  } catch (err) {
    log(`${target} did not come back: ${(err as Error).message}`);
  }
  const timeToRecoverMs = await recovered;
  return {
    target,
    at: killedAt,
    ...(strike.led ? { led: strike.led } : {}),
    inFlight,
    timeToReadyMs,
    timeToRecoverMs,
    failedProbes,
  };
}

/** Waits until every submitted dispatch has a `settled` in the stream (or the time is up); returns the counts. */
async function drain(
  jsm: JetStreamManager,
  subjects: Subjects,
  submitted: ReadonlyMap<string, unknown>,
  drainMs: number,
): Promise<Map<string, number>> {
  const deadline = Date.now() + drainMs;
  for (;;) {
    const counts = await settledCounts(jsm, subjects);
    const missing = [...submitted.keys()].filter((id) => !counts.has(id)).length;
    if (missing === 0 || Date.now() > deadline) {
      if (missing) log(`${missing} dispatches still unsettled after ${drainMs} ms`);
      return counts;
    }
    await sleep(500);
  }
}

/** `settled` messages per dispatch id, as the stream holds them (its per-subject counts). */
async function settledCounts(
  jsm: JetStreamManager,
  subjects: Subjects,
): Promise<Map<string, number>> {
  const info = await jsm.streams.info(subjects.journal.stream, {
    subjects_filter: subjects.journal.ofType('settled'),
  });
  const counts = new Map<string, number>();
  for (const [subject, n] of Object.entries(info.state.subjects ?? {})) {
    const dispatchId = subject.split('.')[4];
    if (dispatchId) counts.set(dispatchId, n);
  }
  return counts;
}

/** The outcome of every settled dispatch, read from its `settled` event. */
async function readOutcomes(
  nc: NatsConnection,
  subjects: Subjects,
  settled: ReadonlyMap<string, number>,
): Promise<Map<string, { outcome: string; errorCode?: string }>> {
  const outcomes = new Map<string, { outcome: string; errorCode?: string }>();
  for await (const entry of readJournal(jetstream(nc), subjects, { keys: testJournalKeys() })) {
    const e = entry.event;
    if (e.type !== 'settled' || !settled.has(e.dispatchId) || outcomes.has(e.dispatchId)) continue;
    outcomes.set(e.dispatchId, {
      outcome: e.outcome,
      ...(e.outcome !== 'ok' && e.error ? { errorCode: e.error.code } : {}),
    });
  }
  return outcomes;
}

/** The last event type the journal holds for a dispatch ('none' when it has nothing). */
async function lastEventOf(
  jsm: JetStreamManager,
  subjects: Subjects,
  runId: string,
  dispatchId: string,
): Promise<string> {
  const info = await jsm.streams.info(subjects.journal.stream, {
    subjects_filter: subjects.journal.forKey(CHAOS_TENANT, runId, dispatchId),
  });
  let last = 'none';
  let lastSeq = 0;
  for (const subject of Object.keys(info.state.subjects ?? {})) {
    const msg = await jsm.streams.getMessage(subjects.journal.stream, { last_by_subj: subject });
    if (msg && msg.seq > lastSeq) {
      lastSeq = msg.seq;
      last = subject.split('.').pop() ?? 'none';
    }
  }
  return last;
}

/**
 * Waits for the journal's projection to fold the whole stream, rebuilds a projection from the
 * stream into a fresh schema and compares the two row by row; returns the number of differences.
 */
async function compareWithRebuild(
  nc: NatsConnection,
  jsm: JetStreamManager,
  subjects: Subjects,
  schema: { url: string; schema: string },
  facts: { runFailures: string[] },
): Promise<number | null> {
  const lastSeq = (await jsm.streams.info(subjects.journal.stream)).state.last_seq;
  const live = await createDb({ url: schema.url, schema: schema.schema, migrate: false });
  const fresh = await useTestSchema('chaosrebuild');
  const rebuilt = await createDb({ url: fresh.url, schema: fresh.schema });
  try {
    const deadline = Date.now() + 60_000;
    for (;;) {
      const row = await live.db
        .selectFrom('audit_log')
        .select((eb) => eb.fn.max('seq').as('max'))
        .executeTakeFirst();
      if (Number(row?.max ?? 0) >= lastSeq) break;
      if (Date.now() > deadline) {
        facts.runFailures.push(`the projection did not fold up to stream sequence ${lastSeq}`);
        return null;
      }
      await sleep(250);
    }
    await rebuildProjection(
      rebuilt.db,
      readJournal(jetstream(nc), subjects, { keys: testJournalKeys() }),
    );
    const differences = await compareProjections(live.db, rebuilt.db);
    for (const d of differences.slice(0, 5)) log(`projection difference: ${JSON.stringify(d)}`);
    return differences.length;
  } finally {
    await live.db.destroy();
    await rebuilt.db.destroy();
    await fresh.cleanup();
  }
}

async function main(): Promise<number> {
  const mode = MODES[process.argv.includes('--short') ? 'short' : 'full'];
  const onCluster = process.argv.includes('--cluster');
  const startedAt = Date.now();
  const facts: RunFacts = {
    runFailures: [],
    startup: onCluster ? null : { cameUpAfterBroker: false, permanentFailureExits: false },
  };
  let observed: Observed | undefined;
  // Eight services' starts from source and three nodes on a busy 2-core machine: more time.
  const budgetMs = onCluster ? mode.budgetMs * CLUSTER_BUDGET_FACTOR : mode.budgetMs;
  const budget = sleep(budgetMs).then(() => 'budget' as const);
  try {
    const outcome = await Promise.race([
      run(mode, facts, onCluster).then((o) => (observed = o)),
      budget,
    ]);
    if (outcome === 'budget')
      facts.runFailures.push(`the run did not finish within ${budgetMs} ms`);
  } catch (err) {
    facts.runFailures.push(`the run failed: ${(err as Error).stack ?? err}`);
  }
  await cleanUp();
  const report = chaosReport({
    mode: mode.name,
    broker: onCluster ? 'cluster' : 'one node',
    submittedAt: observed?.submittedAt ?? new Map(),
    settledAt: observed?.settledAt ?? new Map(),
    unavailableAt: observed?.unavailableAt ?? [],
    submitted: observed?.submitted ?? new Map(),
    probeIds: observed?.probeIds ?? new Set(),
    settledCount: observed?.settledCount ?? new Map(),
    outcomes: observed?.outcomes ?? new Map(),
    executions: observed?.executions ?? new Map(),
    kills: observed?.kills ?? [],
    lastEventOfLost: observed?.lastEventOfLost ?? new Map(),
    projectionDifferences: observed?.projectionDifferences ?? null,
    durationMs: Date.now() - startedAt,
    runFailures: facts.runFailures,
    startup: facts.startup,
  });
  process.stdout.write(`${JSON.stringify(report)}\n`);
  if (facts.logDir) {
    if (report.ok && !process.env.CHAOS_KEEP_LOGS)
      await rm(facts.logDir, { recursive: true, force: true });
    else log(`the services' logs are in ${facts.logDir}`);
  }
  return report.ok ? 0 : 1;
}

let interrupted = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (interrupted) process.exit(130);
    interrupted = true;
    log(`${signal}: cleaning up`);
    void cleanUp().then(() => process.exit(130));
  });
}

void main().then(
  (code) => process.exit(code),
  (err) => {
    log(`failed: ${(err as Error).stack ?? err}`);
    process.exit(1);
  },
);
