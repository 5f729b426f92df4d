import { existsSync } from 'node:fs';
import path from 'node:path';
import { jetstream } from '@nats-io/jetstream';
import { headers as natsHeaders, type MsgHdrs } from '@nats-io/transport-node';
import {
  approvalKey,
  inputDigest,
  journalEvent,
  JournalOperation,
  QueryOperation,
  SignatureHeader,
  WorktreeOperation,
  type JournalEvent,
} from '@toolgate/contracts';
import { JournalPublisher } from '@toolgate/bus';
import { createClient, type ApprovalPendingEvent, type ToolEndEvent } from '@toolgate/sdk';
import {
  BROKER_SHAPES,
  callEvents,
  eventually,
  startTestBroker,
  testJournalKeys,
  testKeys,
  type TestBroker,
} from '@toolgate/testing';
import { journalCounts, runWhere, settled } from '../support/dispatch-probes';
import { serveHeldTool, serveRemoteTool } from '../support/remote-tool';
import { startTestStack, TOKENS, type TestStack } from '../support/test-stack';

const encoder = new TextEncoder();
const decoder = new TextDecoder();
const agent = { agentType: 'coder' };

/**
 * The attacker of issue 10: a raw NATS client on an open broker (no credentials), publishing
 * journal events and asking internal subjects. Every service verifies what it acts on — on one node
 * with R1 streams, and on a 3-node cluster with R3 streams, where a forgery must not pass for a
 * genuine event a lagging replica has not applied yet (the checks read from the stream's leader).
 */
describe.each(BROKER_SHAPES)(
  'forged events and internal requests on an open broker ($shape)',
  (shape) => {
    let broker: TestBroker;
    let stack: TestStack;

    beforeAll(async () => {
      broker = await startTestBroker(shape, 'forged');
      // Nothing here waits on an approval's timeout: the journal sweeps at its default pace.
      stack = await startTestStack('forged', { JOURNAL_SWEEP_INTERVAL_MS: '1000' }, broker);
      const journal = await stack.nats.jsm.streams.info(stack.nats.subjects.journal.stream);
      expect(journal.config.num_replicas).toBe(shape.replicas);
      const put = await stack.http('PUT', '/v1/policy', TOKENS.acmeAdmin, {
        document: {
          engine: {
            deny: [{ tool: 'write_file', reason: 'no writes' }],
            ask: [{ tool: 'shell' }],
          },
        },
      });
      expect(put.status).toBe(200);
    }, 120_000);
    afterAll(async () => {
      await stack?.stop();
      await broker?.cleanup();
    }, 60_000);

    const subjectOf = (e: Pick<JournalEvent, 'tenant' | 'runId' | 'dispatchId' | 'type'>) =>
      stack.nats.subjects.journal.event(e.tenant, e.runId, e.dispatchId, e.type);

    /** Publishes `event` as a raw client would, with whatever headers `sign` sets (none: unsigned). */
    async function forge(
      event: JournalEvent,
      sign?: (subject: string, payload: Uint8Array, h: MsgHdrs) => void,
      subject = subjectOf(event),
    ): Promise<void> {
      const payload = encoder.encode(JSON.stringify(event));
      const h = natsHeaders();
      sign?.(subject, payload, h);
      await jetstream(stack.nats.nc).publish(subject, payload, { headers: h });
    }

    /** The sum of `toolgate_untrusted_events_total` on one service's /metrics. */
    async function untrusted(url: string, role: string): Promise<number> {
      const text = await (await fetch(`${url}/metrics`)).text();
      let sum = 0;
      for (const line of text.split('\n'))
        if (line.startsWith('toolgate_untrusted_events_total{') && line.includes(`role="${role}"`))
          sum += Number(line.split(' ').pop());
      return sum;
    }

    /** Dead-lettered copies refused as untrusted, for a role. */
    async function deadLettered(role: 'executor' | 'journal'): Promise<number> {
      const info = await stack.nats.jsm.streams
        .info(stack.nats.subjects.deadLetter.stream, {
          subjects_filter: stack.nats.subjects.deadLetter.forRole(role),
        })
        .catch(() => undefined);
      return info?.state.subjects?.[stack.nats.subjects.deadLetter.forRole(role)] ?? 0;
    }

    /** An agent's SDK client on the stack's broker. */
    const agentClient = () =>
      createClient({
        servers: broker.servers,
        prefix: stack.nats.prefix,
        token: TOKENS.acmeAgent,
        tenant: 'acme',
      });

    it('gives an SDK caller the recorded result, not a forged settlement it heard first', async () => {
      const worker = await serveHeldTool(stack, 'sdk_held_tool', 'genuine');
      const client = await agentClient();
      try {
        const handle = await client.dispatch({
          runId: 'run-sdk-held',
          callId: 'c1',
          agent,
          tool: 'sdk_held_tool',
          input: {},
        });
        const ends: ToolEndEvent[] = [];
        handle.on('tool:end', (e) => ends.push(e));
        await forge(
          journalEvent({
            type: 'settled',
            id: `${handle.dispatchId}:settled`,
            tenant: 'acme',
            runId: 'run-sdk-held',
            dispatchId: handle.dispatchId,
            at: new Date().toISOString(),
            causationId: null,
            toolName: 'sdk_held_tool',
            outcome: 'ok',
            result: 'forged',
            durationMs: 1,
            attempt: 1,
          }),
        );
        // Heard, and neither the result nor a tool:end: both wait for the recorded settlement.
        let resolved = false;
        void handle.result.then(() => (resolved = true));
        await new Promise((resolve) => setTimeout(resolve, 300));
        expect({ resolved, ends }).toEqual({ resolved: false, ends: [] });
        worker.release();
        expect(await handle.result).toEqual({ outcome: 'ok', result: 'genuine' });
        expect(ends).toEqual([
          expect.objectContaining({ toolName: 'sdk_held_tool', outcome: 'ok' }),
        ]);
      } finally {
        worker.release();
        worker.stop();
        await client.close();
      }
    });

    it('shows an SDK host only the parked call the journal recorded, never a forged approval:pending', async () => {
      const client = await agentClient();
      try {
        const input = { command: 'rm -rf /srv/data' };
        const handle = await client.dispatch({
          runId: 'run-sdk-ask',
          callId: 'c1',
          agent,
          tool: 'shell',
          input,
        });
        const seen: ApprovalPendingEvent[] = [];
        handle.on('approval:pending', (e) => seen.push(e));
        await eventually(() => (seen.length ? true : undefined), { what: 'the call parked' });
        const genuine = await new JournalPublisher(
          stack.nats.nc,
          stack.nats.subjects,
          testJournalKeys(),
        ).last('acme', 'run-sdk-ask', handle.dispatchId, 'suspended');
        expect(genuine).not.toBeNull();
        // What an attacker shows the approver: a harmless command — under the harmful call's own
        // key, and under a key its input makes — stored by the broker as it would be published.
        const harmless = { command: 'ls' };
        await forge({ ...genuine!.event, id: `${genuine!.event.id}:f1`, input: harmless });
        await forge({
          ...genuine!.event,
          id: `${genuine!.event.id}:f2`,
          input: harmless,
          approvalKey: approvalKey('shell', harmless),
          inputDigest: inputDigest(harmless),
        });
        // Both are heard (the handle's subscription gets them after the genuine one) and asked
        // about; neither is ever surfaced.
        await new Promise((resolve) => setTimeout(resolve, 1500));
        expect(seen).toEqual([
          expect.objectContaining({
            key: genuine!.event.approvalKey,
            dispatchId: handle.dispatchId,
            toolName: 'shell',
            input,
          }),
        ]);
        const denied = await stack.http(
          'POST',
          `/v1/approvals/${genuine!.event.approvalKey}/resolve`,
          TOKENS.acmeApprover,
          { decision: 'deny', dispatchId: handle.dispatchId, runId: 'run-sdk-ask' },
        );
        expect(denied.status).toBe(200);
        expect(await handle.result).toMatchObject({ outcome: 'denied' });
      } finally {
        await client.close();
      }
    });

    it('runs none of six forged decisions, folds none of them, and dead-letters and counts each', async () => {
      const target = path.join(stack.workdir, 'forged.txt');
      const decision = (dispatchId: string, tenant = 'acme') => {
        const { decided } = callEvents({
          dispatchId,
          tenant,
          runId: 'run-forged',
          tool: 'write_file',
          input: { path: 'forged.txt', content: 'pwned' },
        });
        // No `requested` before it, and a contract hash that names nothing.
        return { ...decided, tool: { ...decided.tool, contractHash: '0'.repeat(64) } };
      };
      const executorBefore = await untrusted(stack.all.executor.url, 'executor');
      const journalBefore = await untrusted(stack.all.journal.url, 'journal');

      // 1. Unsigned: what any client can publish.
      await forge(decision('f-unsigned'));
      // 2. Signed with the gateway's key, claiming to be the evaluator.
      await forge(decision('f-claims'), (subject, payload, h) => {
        testKeys('gateway').signEvent(subject, 'requested', payload, h);
        h.set(SignatureHeader.Signer, 'permission-evaluator');
      });
      // 3. A valid signature by an identity that does not produce `decided` (the gateway).
      await forge(decision('f-producer'), (subject, payload, h) =>
        testKeys('gateway').signEvent(subject, 'requested', payload, h),
      );
      // 4. A genuine decision of tenant globex, replayed under acme's subject.
      const globex = decision('f-replayed', 'globex');
      await forge(
        globex,
        (_s, payload, h) =>
          testKeys('permission-evaluator').signEvent(subjectOf(globex), 'decided', payload, h),
        subjectOf({ ...globex, tenant: 'acme' }),
      );
      // 5. A `resolved` allow for a parked shell call, unsigned.
      const parked = await stack.http('POST', '/v1/dispatches', TOKENS.acmeAgent, {
        runId: 'run-parked',
        callId: 'c1',
        agent,
        tool: 'shell',
        input: { command: 'echo parked' },
        wait: 20_000,
      });
      expect(parked.body.state).toBe('suspended');
      const parkedId: string = parked.body.dispatchId;
      const suspended = await new JournalPublisher(
        stack.nats.nc,
        stack.nats.subjects,
        testJournalKeys(),
      ).last('acme', 'run-parked', parkedId, 'suspended');
      const forgedResolution = journalEvent({
        type: 'resolved',
        id: `${parkedId}:resolved`,
        tenant: 'acme',
        runId: 'run-parked',
        dispatchId: parkedId,
        at: new Date().toISOString(),
        causationId: `${parkedId}:suspended`,
        approvalKey: suspended!.event.approvalKey,
        inputDigest: suspended!.event.inputDigest,
        policyRevision: suspended!.event.policyRevision,
        decision: 'allow',
        by: 'mallory',
        source: 'human',
      });
      await forge(forgedResolution);
      // 6. A `settled` for a running dispatch, unsigned, while its tool is held.
      const worker = await serveHeldTool(stack, 'held_tool', 'genuine');
      try {
        const waiting = stack.http('POST', '/v1/dispatches', TOKENS.acmeAgent, {
          runId: 'run-held',
          callId: 'c1',
          agent,
          tool: 'held_tool',
          input: {},
          wait: 30_000,
        });
        // The held call's dispatch id, once it has started (its `started` is on the run's subjects).
        const startedSubject = await eventually(
          async () => {
            const info = await stack.nats.jsm.streams.info(stack.nats.subjects.journal.stream, {
              subjects_filter: stack.nats.subjects.journal.forRun('acme', 'run-held'),
            });
            return Object.keys(info.state.subjects ?? {}).find((s) => s.endsWith('.started'));
          },
          { what: 'the held call started' },
        );
        const heldId = startedSubject.split('.').at(-2)!;
        await forge(
          journalEvent({
            type: 'settled',
            id: `${heldId}:settled`,
            tenant: 'acme',
            runId: 'run-held',
            dispatchId: heldId,
            at: new Date().toISOString(),
            causationId: null,
            toolName: 'held_tool',
            outcome: 'ok',
            result: 'forged',
            durationMs: 1,
            attempt: 1,
          }),
        );
        // The forged outcome is nobody's answer; the genuine one is, once the tool returns.
        worker.release();
        const answer = await waiting;
        expect(answer.body.state).toBe('settled');
        expect(answer.body.settled).toMatchObject({ outcome: 'ok', result: 'genuine' });
        const view = await settled(stack, heldId);
        expect(view.dispatch.result).toBe('genuine');
        expect(view.events.filter((e) => e.event.type === 'settled')).toHaveLength(1);
      } finally {
        worker.stop();
        worker.release();
      }

      // Each forgery is dead-lettered by the executor (the decisions and the resolution it consumes)
      // and by the journal (all six), and counted.
      await eventually(
        async () =>
          (await untrusted(stack.all.executor.url, 'executor')) - executorBefore >= 5 &&
          (await untrusted(stack.all.journal.url, 'journal')) - journalBefore >= 6
            ? true
            : undefined,
        { what: 'the forgeries refused and counted' },
      );
      expect(await deadLettered('executor')).toBeGreaterThanOrEqual(5);
      expect(await deadLettered('journal')).toBeGreaterThanOrEqual(6);

      // Nothing ran: no file, no claim on any forged dispatch, and the parked call is still parked.
      expect(existsSync(target)).toBe(false);
      for (const id of ['f-unsigned', 'f-claims', 'f-producer', 'f-replayed']) {
        expect((await journalCounts(stack, 'acme', 'run-forged', id)).started).toBeUndefined();
        // Nothing folded: the projection has no such dispatch.
        expect((await stack.http('GET', `/v1/dispatches/${id}`, TOKENS.acmeAgent)).status).toBe(
          404,
        );
      }
      expect((await journalCounts(stack, 'acme', 'run-parked', parkedId)).started).toBeUndefined();
      const run = await runWhere(stack, 'run-parked', (r) => r.pending.length === 1, {
        what: 'the shell call still parked',
      });
      expect(run.status).toBe('suspended');

      // The genuine approval still lands (the forged `resolved` does not hold the transition) and
      // the call settles ok.
      const resolved = await stack.http(
        'POST',
        `/v1/approvals/${run.pending[0]!.key}/resolve`,
        TOKENS.acmeApprover,
        { decision: 'allow', reason: 'genuine' },
      );
      expect(resolved.status).toBe(200);
      const parkedView = await settled(stack, parkedId);
      expect(parkedView.dispatch.outcome).toBe('ok');
      expect(parkedView.dispatch.resolvedBy).toBe('acme-approver');
    });

    /** `toolgate_executor_claims_total` for one outcome on the executor's /metrics. */
    async function claims(outcome: string): Promise<number> {
      const text = await (await fetch(`${stack.all.executor.url}/metrics`)).text();
      const line = text
        .split('\n')
        .find((l) => l.startsWith(`toolgate_executor_claims_total{outcome="${outcome}"}`));
      return line ? Number(line.split(' ').pop()) : 0;
    }

    it('ignores and dead-letters a started nobody who claims calls signed: an approved parked call runs at once', async () => {
      const runs: unknown[] = [];
      // Lease of a claim on it: its 120 s deadline plus a grace — far past this test's patience.
      const worker = await serveRemoteTool(
        stack,
        {
          name: 'parked_lookup',
          description: 'Looks something up, once approved.',
          parameters: { type: 'object' },
          policy: { timeoutMs: 120_000 },
        },
        (input) => {
          runs.push(input);
          return { ok: true, result: 'looked up' };
        },
      );
      try {
        const policy = await stack.http('PUT', '/v1/policy', TOKENS.acmeAdmin, {
          document: {
            engine: {
              deny: [{ tool: 'write_file', reason: 'no writes' }],
              ask: [{ tool: 'shell' }, { tool: 'parked_lookup' }],
            },
          },
        });
        expect(policy.status).toBe(200);
        const parked = await stack.http('POST', '/v1/dispatches', TOKENS.acmeAgent, {
          runId: 'run-forged-claim',
          callId: 'c1',
          agent,
          tool: 'parked_lookup',
          input: {},
          wait: 20_000,
        });
        expect(parked.body.state).toBe('suspended');
        const id: string = parked.body.dispatchId;
        const claim = (n: number) =>
          journalEvent({
            type: 'started',
            id: `${id}:started:forged-${n}`,
            tenant: 'acme',
            runId: 'run-forged-claim',
            dispatchId: id,
            at: new Date().toISOString(),
            // As the claim of the approval's delivery would read.
            causationId: `${id}:resolved`,
            attempt: 1,
            toolName: 'parked_lookup',
            executor: 'remote',
          });
        const journalDeadBefore = await deadLettered('journal');
        const waitedBefore = await claims('waited');
        // Unsigned, then validly signed by an identity that does not write claims (the gateway).
        await forge(claim(1));
        await forge(claim(2), (subject, payload, h) =>
          testKeys('gateway').signEvent(subject, 'requested', payload, h),
        );

        const run = await runWhere(stack, 'run-forged-claim', (r) => r.pending.length === 1);
        const resolved = await stack.http(
          'POST',
          `/v1/approvals/${run.pending[0]!.key}/resolve`,
          TOKENS.acmeApprover,
          { decision: 'allow', reason: 'genuine' },
        );
        expect(resolved.status).toBe(200);
        // Settled by its run, not by a lease running out (120 s and more).
        const view = await settled(stack, id, 30_000);
        expect(view.dispatch).toMatchObject({ outcome: 'ok', result: 'looked up' });
        expect(runs).toHaveLength(1);
        // The executor never waited on the forged claims: it superseded the last one at once.
        expect((await claims('waited')) - waitedBefore).toBe(0);
        expect(await journalCounts(stack, 'acme', 'run-forged-claim', id)).toMatchObject({
          started: 3,
          settled: 1,
        });
        // Only the genuine claim is history: the forged ones were refused and dead-lettered.
        const started = view.events.filter((e) => e.event.type === 'started');
        expect(started).toHaveLength(1);
        expect(started[0]!.event.id).not.toMatch(/forged/);
        await eventually(
          async () => ((await deadLettered('journal')) - journalDeadBefore >= 2 ? true : undefined),
          { what: 'the forged claims dead-lettered by the journal' },
        );
        const dead = await stack.nats.jsm.streams.getMessage(
          stack.nats.subjects.deadLetter.stream,
          {
            last_by_subj: stack.nats.subjects.deadLetter.forRole('journal'),
          },
        );
        expect(dead?.header.get('Toolgate-Original-Subject')).toBe(subjectOf(claim(2)));
        expect(dead?.header.get('Toolgate-Error-Code')).toBe('unauthorized');
      } finally {
        worker.stop();
        await stack.http('PUT', '/v1/policy', TOKENS.acmeAdmin, {
          document: {
            engine: {
              deny: [{ tool: 'write_file', reason: 'no writes' }],
              ask: [{ tool: 'shell' }],
            },
          },
        });
      }
    });

    it("refuses a raw client's internal requests as unauthorized", async () => {
      const { nc, subjects } = stack.nats;
      const ask = async (subject: string, body: unknown, h?: MsgHdrs) => {
        const reply = await nc.request(subject, encoder.encode(JSON.stringify(body)), {
          timeout: 5000,
          ...(h ? { headers: h } : {}),
        });
        return JSON.parse(decoder.decode(reply.data)) as {
          ok?: boolean;
          error?: { code: string };
        };
      };
      // Another tenant's run, straight from the journal's query subject, without a token.
      expect(
        await ask(subjects.query(QueryOperation.GetRun), { tenant: 'acme', runId: 'run-parked' }),
      ).toMatchObject({ ok: false, error: { code: 'unauthorized' } });
      // Signed, but by an identity that may not ask (an operator's key on a gateway query).
      const byOps = natsHeaders();
      const body = { tenant: 'acme', runId: 'run-parked' };
      testKeys('ops').signRequest(
        subjects.query(QueryOperation.GetRun),
        'journal',
        encoder.encode(JSON.stringify(body)),
        byOps,
      );
      expect(await ask(subjects.query(QueryOperation.GetRun), body, byOps)).toMatchObject({
        ok: false,
        error: { code: 'unauthorized' },
      });
      // A worktree for anyone.
      expect(
        await ask(subjects.worktree(WorktreeOperation.Acquire), {
          tenant: 'acme',
          runId: 'r',
          agentKey: 'coder:',
          causationId: 'x',
        }),
      ).toMatchObject({ ok: false, error: { code: 'unauthorized' } });
      // A rebuild.
      expect(await ask(subjects.ops(JournalOperation.Rebuild), {})).toMatchObject({
        error: { code: 'unauthorized' },
      });
      // The gateway's own queries still answer (its tokens are the way in).
      const view = await stack.http('GET', '/v1/runs/run-parked', TOKENS.acmeAgent);
      expect(view.status).toBe(200);
    });
  },
);
