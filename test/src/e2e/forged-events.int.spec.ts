import { existsSync } from 'node:fs';
import path from 'node:path';
import { jetstream } from '@nats-io/jetstream';
import { headers as natsHeaders, type MsgHdrs } from '@nats-io/transport-node';
import {
  journalEvent,
  JournalOperation,
  QueryOperation,
  SignatureHeader,
  WorktreeOperation,
  type JournalEvent,
} from '@toolgate/contracts';
import { JournalPublisher } from '@toolgate/bus';
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
import { serveHeldTool } from '../support/remote-tool';
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
      stack = await startTestStack('forged', {}, broker);
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
