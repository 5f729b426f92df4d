import type { Subscription } from '@nats-io/transport-node';
import { ensureJournalStreams, JournalPublisher, SUPERSEDE_ATTEMPTS } from '@toolgate/bus';
import { ErrorCode, type RequestedEvent, type SuspendedEvent } from '@toolgate/contracts';
import { PolicyRuntime } from '@toolgate/policy-runtime';
import { PolicyStore } from '@toolgate/registry';
import {
  BROKER_SHAPES,
  reForger,
  startTestBroker,
  testJournalKeys,
  useTestNats,
  type TestBroker,
  type TestNats,
} from '@toolgate/testing';
import { requestedEvent } from '../../test/fixtures/requested-event.fixture';
import { decidedFor } from './decision-events';
import { Evaluator } from './evaluator';

const AT = new Date('2026-03-01T10:00:00.000Z');

/**
 * On one node (R1) and on a 3-node cluster (R3): a redelivery's decision is read back, after the
 * broker refused a second one, from the stream's leader, where a lagging follower would answer
 * "not found".
 */
describe.each(BROKER_SHAPES)(
  'Evaluator against a real journal stream, policy store and NATS ($shape)',
  (shape) => {
    let broker: TestBroker;
    let t: TestNats;
    let store: PolicyStore;
    let publisher: JournalPublisher;
    let evaluator: Evaluator;
    let pendingSub: Subscription;
    const pending: SuspendedEvent[] = [];
    let dispatches = 0;

    /** A requested call of its own dispatch for `tenant`. */
    const requested = (tenant: string, overrides: Partial<RequestedEvent> = {}) =>
      requestedEvent({ tenant, dispatchId: `d${++dispatches}`, ...overrides });

    const last = <T extends 'decided' | 'suspended' | 'settled'>(req: RequestedEvent, type: T) =>
      publisher.last(req.tenant, req.runId, req.dispatchId, type).then((s) => s?.event);

    beforeAll(async () => {
      broker = await startTestBroker(shape, 'evaluator');
      t = await useTestNats('evaluator', { servers: broker.servers });
      await ensureJournalStreams(t.jsm, t.subjects, { replicas: shape.replicas });
      const journal = await t.jsm.streams.info(t.subjects.journal.stream);
      expect(journal.config.num_replicas).toBe(shape.replicas);
      store = await PolicyStore.open(t.nc, t.subjects, { replicas: shape.replicas });
      publisher = new JournalPublisher(t.nc, t.subjects, testJournalKeys());
      evaluator = new Evaluator(
        t.nc,
        t.subjects,
        publisher,
        new PolicyRuntime(store, t.nc, t.subjects),
        () => AT,
      );
      pendingSub = t.nc.subscribe(t.subjects.approvals('asker', 'pending'), {
        callback: (_err, msg) => {
          pending.push(msg.json<SuspendedEvent>());
        },
      });
      await t.nc.flush();
    }, 60_000);
    afterAll(async () => {
      pendingSub?.unsubscribe();
      store?.stop();
      await t?.cleanup();
      await broker?.cleanup();
    }, 60_000);

    it('an ask is journalled as decided then suspended, and announced once even when redelivered', async () => {
      await store.put('asker', {
        engine: { ask: [{ tool: 'delete_branch', reason: 'a person looks' }] },
      });
      const req = requested('asker');
      await evaluator.onRequested(req);
      await evaluator.onRequested(req);
      await t.nc.flush();

      expect(await last(req, 'decided')).toMatchObject({ verdict: 'ask', decidedBy: 'ask-rule' });
      expect(await last(req, 'suspended')).toMatchObject({
        submittedBy: 'user:alice',
        onTimeout: 'deny',
        expiresAt: '2026-03-02T10:00:00.000Z',
      });
      expect(pending.filter((e) => e.dispatchId === req.dispatchId)).toHaveLength(1);
    });

    it('a redelivery after the policy changed completes the recorded decision, not a new one', async () => {
      await store.put('changer', { engine: { ask: [{ tool: 'delete_branch' }] } });
      const req = requested('changer');
      // The first evaluation journalled its decision and stopped before the follow-up (a crash).
      const { decision, revision, separationOfDuties } = await new PolicyRuntime(
        store,
        t.nc,
        t.subjects,
      ).decide('changer', req);
      expect(decision.verdict).toBe('ask');
      await publisher.append(decidedFor(req, { decision, revision, separationOfDuties }, AT));

      await store.put('changer', {});
      await evaluator.onRequested(req);

      expect(await last(req, 'decided')).toMatchObject({
        verdict: 'ask',
        policyRevision: revision,
      });
      expect(await last(req, 'suspended')).toMatchObject({
        policyRevision: revision,
        expiresAt: '2026-03-02T10:00:00.000Z',
        onTimeout: 'deny',
      });
      expect(await last(req, 'settled')).toBeUndefined();
    });

    it('a call the policy cannot evaluate (unknown profile) is denied and settled, never left open', async () => {
      await store.put('profiled', { profiles: { ops: {} } });
      const req = requested('profiled', { profile: 'nope' });
      await evaluator.onRequested(req);

      expect(await last(req, 'decided')).toMatchObject({
        verdict: 'deny',
        decidedBy: 'default',
        policyRevision: 0,
      });
      expect(await last(req, 'settled')).toMatchObject({
        outcome: 'denied',
        error: {
          code: ErrorCode.Denied,
          message: expect.stringContaining('policy could not be evaluated'),
        },
      });
    });

    it('on an open broker, a denial that forgeries keep out of the journal is thrown for redelivery, never acked unsettled; the redelivery settles it', async () => {
      await store.put('forged', { engine: { deny: [{ tool: 'delete_branch' }] } });
      const req = requested('forged');
      // The evaluator behind a slow link, against a client that re-forges the call's `settled`.
      const forger = await reForger(
        t,
        t.subjects.journal.event(req.tenant, req.runId, req.dispatchId, 'settled'),
        broker.servers[0],
      );
      try {
        const slowNc = await forger.victim();
        const slow = new Evaluator(
          slowNc,
          t.subjects,
          new JournalPublisher(slowNc, t.subjects, testJournalKeys()),
          new PolicyRuntime(store, slowNc, t.subjects),
          () => AT,
        );
        await expect(slow.onRequested(req)).rejects.toMatchObject({
          code: ErrorCode.Unavailable,
          details: { retryable: true },
        });
        forger.stop();
        // The first forgery, then one per bounded attempt that looked the subject up.
        expect(forger.forgeries()).toBe(SUPERSEDE_ATTEMPTS);
        expect(await last(req, 'decided')).toMatchObject({ verdict: 'deny' });
        expect(await last(req, 'settled')).toBeUndefined();
        // The attacker gone, the redelivery finds the decision and completes its settlement.
        await slow.onRequested(req);
        expect(await last(req, 'settled')).toMatchObject({ outcome: 'denied' });
      } finally {
        await forger.close();
      }
    });
  },
);
