import { readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect, headers as natsHeaders, type NatsConnection } from '@nats-io/transport-node';
import { z } from 'zod';
import { ensureJournalStreams, isPermissionViolation, requestReply } from '@toolgate/bus';
import {
  createSubjects,
  generateKeySet,
  JOURNAL_EVENT_TYPES,
  ServiceIdentity,
  ServiceKeys,
  type JournalEvent,
} from '@toolgate/contracts';
import { createClient, tool, type ToolgateClient } from '@toolgate/sdk';
import { startJournal } from '@toolgate/journal';
import { startWithRetry } from '@toolgate/service-kit';
import { eventually, useTestSchema, type TestSchema } from '@toolgate/testing';
import { startToolExecutor } from '@toolgate/tool-executor';
import { jsonLines } from '../support/cli-run';
import { committedRepository } from '../support/git-repository';
import { removeWorkdir, stackEnv, TEST_GRANTS, TOKENS } from '../support/test-stack';
import {
  optionsAsUser,
  SERVICE_USERS,
  PRODUCES,
  publish,
  runCliAsOps,
  SHIPPED_NATS_CONF,
  singleNodeConfig,
  startServicesAsUsers,
  startShippedNats,
  type ServicesAsUsers,
  type ShippedNats,
  violations,
  UserConnections,
} from './shipped-nats';

/**
 * deploy/nats/nats.conf run for real: nats-server 2.9 on the shipped file made single-node (see
 * `singleNodeConfig`), every service connected as its own user, a team as `team-acme` and an
 * operator as `ops`, all on the prefix the file names (`toolgate`). The whole pipeline works with
 * no permission violation; then each user tries what its user must not do, and the broker refuses.
 */

const subjects = createSubjects('toolgate');
const encoder = new TextEncoder();

const SHOUT = [
  '// @tool shout',
  '// @description Reads a note and shouts it',
  '// @param path string required "the note"',
  '// @requires read_file',
  'const text = (await read_file(params.path)).trim().toUpperCase();',
  'return { text };',
].join('\n');

/**
 * How a request ended: `refused` when the broker refused it for the user's permissions (the
 * client fails the request with the violation as its cause), else `answered` or the error's name.
 */
async function request(nc: NatsConnection, subject: string, body = '{}'): Promise<string> {
  return nc.request(subject, encoder.encode(body), { timeout: 5000 }).then(
    () => 'answered',
    (err: unknown) => (isPermissionViolation(err) ? 'refused' : (err as Error).name),
  );
}

/** Whether the broker refused a subscription (its -ERR arrives before the flush's PONG). */
async function subscriptionRefused(nc: NatsConnection, subject: string): Promise<boolean> {
  const sub = nc.subscribe(subject, { callback: () => undefined });
  await nc.flush();
  const refused = sub.isClosed();
  if (!refused) sub.unsubscribe();
  return refused;
}

describe('deploy/nats/nats.conf run for real (one node)', () => {
  let dir: string;
  let nats: ShippedNats;
  let schema: TestSchema;
  let workdir: string;
  let scriptsDir: string;
  let services: ServicesAsUsers | undefined;
  let team: NatsConnection;
  let client: ToolgateClient;
  const teamEvents: JournalEvent[] = [];
  /** A deployment's signing keys (`toolgate keys generate`), required by every service. */
  const keys = generateKeySet();
  const users = new UserConnections(() => nats);
  /** The server's log once the pipeline ran, before any attack. */
  let logAfterPipeline = '';

  const as = users.as.bind(users);
  const asService = (user: keyof typeof SERVICE_USERS) =>
    as(SERVICE_USERS[user].user, SERVICE_USERS[user].passwordVariable);

  const http = async (method: string, route: string, token: string, body?: unknown) => {
    const res = await fetch(`${services!.gatewayUrl}${route}`, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : undefined };
  };
  let callSeq = 0;
  const dispatch = (tool: string, input: unknown, extra: Record<string, unknown> = {}) =>
    http('POST', '/v1/dispatches', TOKENS.acmeAgent, {
      runId: 'run-conf',
      callId: `call-${++callSeq}`,
      agent: { agentType: 'coder', label: 'natsconf' },
      tool,
      input,
      wait: 15_000,
      ...extra,
    });
  const settledOf = (dispatchId: string) =>
    eventually(
      async () => {
        const h = await http('GET', `/v1/dispatches/${dispatchId}`, TOKENS.acmeAgent);
        const events = (h.body?.events ?? []) as { event: JournalEvent }[];
        return events.find((e) => e.event.type === 'settled')?.event;
      },
      { timeoutMs: 20_000, what: `the settlement of ${dispatchId}` },
    );

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'toolgate-natsconf-'));
    nats = await startShippedNats(dir);
    schema = await useTestSchema('natsconf');
    workdir = await committedRepository('toolgate-natsconf-work-');
    scriptsDir = path.join(dir, 'scripts');
    await mkdir(scriptsDir);
    await writeFile(
      path.join(scriptsDir, 'double.js'),
      '// @tool double\n// @description Doubles a number\n// @param n number required "n"\nreturn params.n * 2;',
    );
    services = await startServicesAsUsers(
      nats,
      {
        ...stackEnv({ prefix: 'toolgate', url: nats.server.url }, schema, workdir, TEST_GRANTS),
        JOURNAL_SWEEP_INTERVAL_MS: '100',
        EXECUTOR_SCRIPTS_DIR: scriptsDir,
      },
      keys,
    );

    // The team: a remote tool served with the SDK, a remote hook, its own journal followed.
    team = await as('team-acme', 'TOOLGATE_NATS_TEAM_ACME_PASSWORD', {
      inboxPrefix: '_INBOX_acme',
    });
    client = await createClient({
      nc: team,
      prefix: 'toolgate',
      token: TOKENS.acmeAdmin,
      tenant: 'acme',
    });
    const lookup = tool({
      name: 'trace_lookup',
      description: 'Looks a key up in the team’s store.',
      parameters: z.object({ key: z.string() }),
      risk: 'read',
      async execute({ key }) {
        return { key, value: key.toUpperCase() };
      },
    });
    await client.registerTool(lookup);
    client.serveTool(lookup);
    team.subscribe(subjects.hook('acme', 'audit'), {
      callback: (_e, m) => {
        m.respond('{}');
      },
    });
    team.subscribe(subjects.journal.forTenant('acme'), {
      callback: (_e, m) => {
        teamEvents.push(m.json<JournalEvent>());
      },
    });
    await team.flush();
  }, 60_000);

  afterAll(async () => {
    await users.closeAll();
    await client?.close().catch(() => undefined);
    await services?.stop();
    await nats?.server.cleanup();
    await schema?.cleanup();
    if (workdir) await removeWorkdir(workdir);
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('is the shipped file without the cluster-only settings, byte for byte otherwise', () => {
    const shipped = readFileSync(SHIPPED_NATS_CONF, 'utf8');
    const single = singleNodeConfig(shipped, {
      storeDir: '/tmp/store',
      logFile: '/tmp/nats.log',
      httpPort: 18222,
    });
    expect(single).not.toMatch(/^(cluster|server_name|pid_file)\b/m);
    expect(single).toMatch(/^\s*store_dir: "\/tmp\/store"$/m);
    expect(single).toMatch(/^http_port: 18222$/m);
    // Accounts, users and permissions: the shipped text itself.
    const accounts = shipped.slice(shipped.indexOf('\naccounts {'));
    expect(single).toContain(accounts);
    expect(shipped.length - single.length).toBeLessThan(1000);
  });

  it('admits no one without a password', async () => {
    await expect(
      connect({ servers: nats.server.url, reconnect: false, maxReconnectAttempts: 0 }),
    ).rejects.toMatchObject({ name: 'AuthorizationError' });
  });

  it('runs the whole pipeline with every service under its own user, and no permission violation', async () => {
    const put = await http('PUT', '/v1/policy', TOKENS.acmeAdmin, {
      document: {
        engine: {
          ask: [
            { id: 'look-first', tool: 'list_dir' },
            { id: 'timed', tool: 'grep', approvalTimeoutMs: 300, onTimeout: 'allow' },
          ],
        },
        remote: { engine: { hooks: [{ name: 'audit', unauthenticated: true }] } },
      },
    });
    expect(put.status).toBe(200);

    // A builtin, a remote tool (the team's worker), a tool error (the executor's error streak).
    const read = await dispatch('read_file', { path: 'hello.txt' });
    expect(read.body.settled).toMatchObject({ outcome: 'ok' });
    expect(JSON.stringify(read.body.settled.result)).toContain('hello, toolgate');
    const remote = await dispatch('trace_lookup', { key: 'k1' });
    expect(remote.body.settled).toMatchObject({ outcome: 'ok', result: { value: 'K1' } });
    const missing = await dispatch('read_file', { path: 'missing.txt' });
    expect(missing.body.settled).toMatchObject({ outcome: 'error' });
    const reset = await http('POST', '/v1/runs/run-conf/error-cap/reset', TOKENS.acmeAdmin, {});
    expect(reset.status).toBeLessThan(300);

    // A script: installed by the gateway, its host call decided by the executor (with the hook).
    const installed = await http('PUT', '/v1/tools/scripts/shout', TOKENS.acmeAdmin, {
      source: SHOUT,
    });
    expect(installed.status).toBe(200);
    const shout = await dispatch('shout', { path: 'hello.txt' });
    expect(shout.body.settled).toMatchObject({
      outcome: 'ok',
      result: { text: 'HELLO, TOOLGATE' },
    });
    const doubled = await dispatch('double', { n: 21 });
    expect(doubled.body.settled).toMatchObject({ outcome: 'ok', result: 42 });

    // Parked, then resolved through the approvals API; another resolved by the timeout sweeper.
    const parked = await dispatch('list_dir', { path: '.' }, { wait: 0 });
    expect(parked.status).toBe(202);
    const approval = await eventually(async () => {
      const list = await http('GET', '/v1/approvals?runId=run-conf', TOKENS.acmeApprover);
      return (list.body?.approvals as { dispatchId: string; approvalKey: string }[])?.find(
        (a) => a.dispatchId === parked.body.dispatchId,
      );
    });
    const resolved = await http(
      'POST',
      `/v1/approvals/${approval.approvalKey}/resolve`,
      TOKENS.acmeApprover,
      { decision: 'allow' },
    );
    expect(resolved.status).toBe(200);
    expect(await settledOf(parked.body.dispatchId)).toMatchObject({ outcome: 'ok' });
    const timed = await dispatch('grep', { pattern: 'hello', path: '.' }, { wait: 0 });
    expect(await settledOf(timed.body.dispatchId)).toMatchObject({ outcome: 'ok' });

    // A worktree-isolated call, and its patch collected (the worktree's object store).
    const isolated = await dispatch(
      'write_file',
      { path: 'fix.txt', content: 'fixed\n' },
      { isolation: { kind: 'worktree' } },
    );
    expect(isolated.body.settled).toMatchObject({ outcome: 'ok' });
    const acquired = await eventually(async () =>
      teamEvents.find((e) => e.type === 'worktree-acquired'),
    );
    if (acquired.type !== 'worktree-acquired') throw new Error('not a worktree event');
    // An operator collects the tree's patch (a request signed with the ops key).
    const collected = await requestReply(
      await as('ops', 'TOOLGATE_NATS_OPS_PASSWORD'),
      subjects.worktree('collect'),
      { worktreeId: acquired.worktreeId },
      {
        ok: z.object({ ok: z.literal(true), artifact: z.object({}).passthrough() }),
        timeoutMs: 10_000,
        peer: 'the worktree service',
        sign: {
          keys: ServiceKeys.ofSet(ServiceIdentity.Ops, keys),
          responder: ServiceIdentity.Worktree,
        },
      },
    );
    expect(collected.artifact).toBeDefined();

    // The SDK's own dispatch (the team's inbox and journal), the gateway's what-if.
    const viaSdk = await client.dispatch({
      runId: 'run-sdk',
      callId: 'c1',
      agent: { agentType: 'coder' },
      tool: 'trace_lookup',
      input: { key: 'k2' },
    });
    expect(await viaSdk.result).toMatchObject({ outcome: 'ok', result: { value: 'K2' } });
    const whatif = await http('POST', '/v1/policy/whatif', TOKENS.acmeAdmin, {
      candidate: { engine: { deny: [{ tool: 'read_file' }] } },
    });
    expect(whatif.status).toBe(200);
    expect(whatif.body.calls).toBeGreaterThan(0);

    // The operator, as `ops`: stats, tail, a rebuild the journal service runs and answers.
    const cli = (argv: string[]) => runCliAsOps(nats, keys, argv);
    const stats = await cli(['journal', 'stats', '--json']);
    expect(stats.code).toBe(0);
    expect(JSON.parse(stats.stdout).eventsByType.settled).toBeGreaterThanOrEqual(8);
    const tail = await cli(['journal', 'tail', '--since', '10m', '--count', '3', '--json']);
    expect(tail.code).toBe(0);
    // Each event verified with the ops key (the CLI marks what it cannot verify).
    const tailed = jsonLines(tail.stdout) as { trusted: boolean }[];
    expect(tailed.map((e) => e.trusted)).toEqual([true, true, true]);
    const rebuild = await cli(['journal', 'rebuild', '--json']);
    expect(rebuild).toMatchObject({ code: 0 });
    expect(JSON.parse(rebuild.stdout)).toMatchObject({ switched: true });

    // Each service's connections (its main one, its KV or policy or start-up fold one) as its user.
    const connz = (await (await fetch(`${nats.monitorUrl}/connz?auth=true&limit=1024`)).json()) as {
      connections: { name?: string; authorized_user?: string }[];
    };
    const userOf = new Map<string, Set<string>>();
    for (const c of connz.connections) {
      const service =
        /^toolgate-(gateway|permission-evaluator|tool-executor|journal|worktree)\b/.exec(
          c.name ?? '',
        )?.[1];
      if (service) userOf.set(service, (userOf.get(service) ?? new Set()).add(c.authorized_user!));
    }
    expect(Object.fromEntries([...userOf].map(([s, users]) => [s, [...users]]))).toEqual(
      Object.fromEntries(Object.entries(SERVICE_USERS).map(([s, { user }]) => [s, [user]])),
    );

    logAfterPipeline = nats.log();
    expect(violations(logAfterPipeline)).toEqual([]);
  }, 60_000);

  it('refuses every user the journal event types its service does not produce', async () => {
    const users: [string, string][] = [
      ...Object.values(SERVICE_USERS).map((u) => [u.user, u.passwordVariable] as [string, string]),
      ['ops', 'TOOLGATE_NATS_OPS_PASSWORD'],
      ['team-acme', 'TOOLGATE_NATS_TEAM_ACME_PASSWORD'],
    ];
    const refusedTypes: Record<string, string[]> = {};
    for (const [user, password] of users) {
      const nc = await as(
        user,
        password,
        user === 'team-acme' ? { inboxPrefix: '_INBOX_acme' } : {},
      );
      refusedTypes[user] = [];
      for (const type of JOURNAL_EVENT_TYPES) {
        if (PRODUCES[user]!.includes(type)) continue;
        const outcome = await publish(
          nc,
          subjects.journal.event('acme', 'run-forged', 'forged', type),
        );
        if (outcome === 'refused') refusedTypes[user]!.push(type);
      }
    }
    for (const [user] of users) {
      expect([user, refusedTypes[user]]).toEqual([
        user,
        JOURNAL_EVENT_TYPES.filter((t) => !PRODUCES[user]!.includes(t)),
      ]);
    }
    // A team and the gateway, by name: no decision, resolution or settlement of their own.
    expect(refusedTypes['team-acme']).toEqual(
      expect.arrayContaining(['decided', 'resolved', 'settled']),
    );
    expect(refusedTypes.gateway).toEqual(expect.arrayContaining(['decided', 'settled']));
    // Nothing forged reached the journal.
    const jsm = await jetstreamManager(await as('ops', 'TOOLGATE_NATS_OPS_PASSWORD'));
    const info = await jsm.streams.info(subjects.journal.stream, {
      subjects_filter: subjects.journal.forRun('acme', 'run-forged'),
    });
    expect(info.state.subjects ?? {}).toEqual({});
  });

  it('keeps the team to its tenant: no other tenant’s subjects, no JetStream, no queries, no shared inbox', async () => {
    const nc = await as('team-acme', 'TOOLGATE_NATS_TEAM_ACME_PASSWORD', {
      inboxPrefix: '_INBOX_acme',
    });
    for (const subject of [
      'toolgate.tools.globex.>',
      'toolgate.hooks.globex.>',
      'toolgate.journal.globex.>',
      'toolgate.journal.>',
      'toolgate.api.>',
      '_INBOX.>',
      '_INBOX_globex.>',
    ])
      expect([subject, await subscriptionRefused(nc, subject)]).toEqual([subject, true]);
    expect(await subscriptionRefused(nc, 'toolgate.tools.acme.anything')).toBe(false);
    for (const subject of [
      subjects.query('run.get'),
      subjects.remoteTool('globex', 'lookup').subject,
      '$JS.API.INFO',
      `$JS.API.STREAM.INFO.${subjects.journal.stream}`,
      `$JS.API.DIRECT.GET.${subjects.journal.stream}.toolgate.journal.globex.r.d.requested`,
      '$KV.toolgate_tools.acme.planted',
      '$KV.toolgate_policy.acme',
      subjects.ops('rebuild'),
    ])
      expect([subject, await request(nc, subject)]).toEqual([subject, 'refused']);
  });

  it('answers a team’s mistyped operation with unknown-operation: the gateway’s user serves all of toolgate.api.>', async () => {
    const nc = await as('team-acme', 'TOOLGATE_NATS_TEAM_ACME_PASSWORD', {
      inboxPrefix: '_INBOX_acme',
    });
    const h = natsHeaders();
    h.set('Authorization', `Bearer ${TOKENS.acmeAgent}`);
    const reply = await nc.request('toolgate.api.dispatch.sumbit', encoder.encode('{}'), {
      headers: h,
      timeout: 5000,
    });
    expect(JSON.parse(new TextDecoder().decode(reply.data))).toMatchObject({
      ok: false,
      error: {
        code: 'unknown-operation',
        details: {
          operation: 'dispatch.sumbit',
          operations: expect.arrayContaining(['dispatch.submit']),
        },
      },
    });
  });

  it('refuses the gateway and the operator the streams’ settings, the durable consumers and the executor’s KV keys', async () => {
    const stream = subjects.journal.stream;
    const durable = `${subjects.consumer('evaluator')}-requested`;
    const hijack = JSON.stringify({
      stream_name: stream,
      config: { name: durable, ack_policy: 'explicit', filter_subject: 'toolgate.journal.nothing' },
    });
    for (const [user, password] of [
      ['gateway', 'TOOLGATE_NATS_GATEWAY_PASSWORD'],
      ['ops', 'TOOLGATE_NATS_OPS_PASSWORD'],
    ] as const) {
      const nc = await as(user, password);
      const attempts: [string, string][] = [
        [`$JS.API.STREAM.UPDATE.${stream}`, JSON.stringify({ name: stream, max_age: 1e9 })],
        [`$JS.API.STREAM.DELETE.${stream}`, ''],
        [`$JS.API.STREAM.PURGE.${stream}`, ''],
        [`$JS.API.STREAM.CREATE.${stream}`, JSON.stringify({ name: stream })],
        // The nameless create would take the durable consumer's name from the body.
        [`$JS.API.CONSUMER.CREATE.${stream}`, hijack],
        [`$JS.API.CONSUMER.CREATE.${stream}.${durable}.toolgate.journal.nothing`, hijack],
        [`$JS.API.CONSUMER.DURABLE.CREATE.${stream}.${durable}`, hijack],
        [`$JS.API.CONSUMER.DELETE.${stream}.${durable}`, ''],
        [`$JS.API.CONSUMER.MSG.NEXT.${stream}.${durable}`, '{"batch":1}'],
        [`$JS.API.STREAM.UPDATE.KV_toolgate_tools`, '{}'],
        ['$KV.toolgate_tools._builtin.read_file', '{}'],
        ['$KV.toolgate_tools._served.remote', '{}'],
      ];
      for (const [subject, body] of attempts)
        expect([user, subject, await request(nc, subject, body)]).toEqual([
          user,
          subject,
          'refused',
        ]);
    }
    // The durable consumer is as the evaluator made it.
    const jsm = await jetstreamManager(await asService('permission-evaluator'));
    const info = await jsm.consumers.info(stream, durable);
    expect(info.config.filter_subject).toBe(subjects.journal.ofType('requested'));
  });

  it('lets only their callers send the internal requests (queries, rebuild, worktree)', async () => {
    const gateway = await asService('gateway');
    const executor = await asService('tool-executor');
    const evaluator = await asService('permission-evaluator');
    const worktree = await asService('worktree');
    const refusals: [string, NatsConnection, string][] = [
      ['tool-executor', executor, subjects.query('run.get')],
      ['permission-evaluator', evaluator, subjects.query('run.get')],
      ['worktree', worktree, subjects.query('run.get')],
      ['gateway', gateway, subjects.ops('rebuild')],
      ['tool-executor', executor, subjects.ops('rebuild')],
      ['gateway', gateway, subjects.worktree('acquire')],
      ['gateway', gateway, subjects.worktree('collect')],
      ['tool-executor', executor, subjects.worktree('collect')],
      ['tool-executor', executor, subjects.worktree('dispose')],
      ['permission-evaluator', evaluator, subjects.worktree('acquire')],
      ['worktree', worktree, subjects.remoteTool('acme', 'trace_lookup').subject],
      ['gateway', gateway, subjects.remoteTool('acme', 'trace_lookup').subject],
      ['gateway', gateway, subjects.hook('acme', 'audit')],
    ];
    for (const [user, nc, subject] of refusals)
      expect([user, subject, await request(nc, subject)]).toEqual([user, subject, 'refused']);
  });

  it('logged every refusal it made, under the user it refused', () => {
    const after = violations(nats.log()).filter((v) => !violations(logAfterPipeline).includes(v));
    const users = new Set(after.map((v) => v.split(' ')[0]));
    expect([...users].sort()).toEqual(
      [...Object.values(SERVICE_USERS).map((u) => u.user), 'ops', 'team-acme'].sort(),
    );
  });
});

describe('a service whose user may not create the journal streams', () => {
  let dir: string;
  let nats: ShippedNats;
  let schema: TestSchema;
  let workdir: string;
  const users = new UserConnections(() => nats);
  const running: { stop(): Promise<void> }[] = [];
  const keys = generateKeySet();

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'toolgate-natsconf-empty-'));
    nats = await startShippedNats(dir);
    schema = await useTestSchema('natsconf_order');
    workdir = await mkdtemp(path.join(tmpdir(), 'toolgate-natsconf-order-'));
  });
  afterAll(async () => {
    for (const s of running.reverse()) await s.stop().catch(() => undefined);
    await users.closeAll();
    await nats?.server.cleanup();
    await schema?.cleanup();
    if (workdir) await removeWorkdir(workdir);
    await rm(dir, { recursive: true, force: true });
  });

  const jsmAs = async (service: keyof typeof SERVICE_USERS) => {
    const { user, passwordVariable } = SERVICE_USERS[service];
    return jetstreamManager(await users.as(user, passwordVariable));
  };

  it('is told unavailable (retryable) until the journal service has created them', async () => {
    const evaluator = await jsmAs('permission-evaluator');
    await expect(ensureJournalStreams(evaluator, subjects)).rejects.toMatchObject({
      code: 'unavailable',
      retryable: true,
      message: expect.stringContaining('the journal service creates it'),
    });
    expect(violations(nats.log())).toEqual([
      `permission-evaluator Publish $JS.API.STREAM.CREATE.${subjects.journal.stream}`,
    ]);
  });

  it('starts once the journal has: a tool-executor started first retries until then', async () => {
    const env = stackEnv(
      { prefix: 'toolgate', url: nats.server.url },
      schema,
      workdir,
      TEST_GRANTS,
    );
    const attempts: string[] = [];
    const executor = startWithRetry(
      () =>
        startToolExecutor({
          // No sandbox: each attempt would probe it and start its file helpers again, and what is
          // tested is only the order of start-up against the broker's permissions.
          config: optionsAsUser(nats, { ...env, EXECUTOR_SANDBOX: 'off' }, keys, 'tool-executor')
            .executor,
          checkDomain: () => 'deny',
          logger: false,
        }),
      { name: 'tool-executor', log: (line) => attempts.push(line), backoff: { maxMs: 200 } },
    );
    await eventually(async () => (attempts.length >= 2 ? true : undefined), {
      what: 'two start-up attempts of the tool-executor',
    });
    expect(attempts[0]).toMatch(
      /^tool-executor: start-up attempt 1 failed: .*the journal service creates it/,
    );
    running.push(
      await startJournal({
        config: optionsAsUser(nats, env, keys, 'journal').journal,
        logger: false,
      }),
    );
    running.push(await executor);
    const jsm = await jsmAs('journal');
    expect(
      (await jsm.consumers.info(subjects.journal.stream, 'toolgate_executor-decided')).name,
    ).toBe('toolgate_executor-decided');
  });
});
