import { JournalPublisher, SUPERSEDE_ATTEMPTS } from '@toolgate/bus';
import { SignatureHeader } from '@toolgate/contracts';
import {
  BROKER_SHAPES,
  eventually,
  reForger,
  startTestBroker,
  testJournalKeys,
  useTestNats,
  type TestBroker,
  type TestNats,
} from '@toolgate/testing';
import {
  closeRegistry,
  dispatch,
  journalCounts,
  registerRemoteTool,
  serveCountingTool,
  startReplica,
  TENANT,
  type Replica,
} from '../../test/executor-harness';

/**
 * On an open broker, a client that may publish on the journal's subjects re-forges a dispatch's
 * `settled` every time the executor looks at the subject to append after it, and the executor sits
 * behind a slow link, so it loses each of its bounded attempts. The tool has run: the settlement
 * must still be recorded once the attacker stops — retried while the decision is kept alive, never
 * acked with nothing genuine recorded — and the tool must not run again. On one node (R1) and on a
 * 3-node cluster (R3), where the executor's look-ups of the subject are the leader's.
 */
describe.each(BROKER_SHAPES)('a settlement that forgeries keep out ($shape)', (shape) => {
  let broker: TestBroker;
  let t: TestNats;
  let publisher: JournalPublisher;
  let replica: Replica | undefined;

  beforeAll(async () => {
    broker = await startTestBroker(shape, 'settleforged');
    t = await useTestNats('settleforged', { servers: broker.servers });
    publisher = new JournalPublisher(t.nc, t.subjects, testJournalKeys());
  }, 60_000);
  afterAll(async () => {
    await replica?.stop();
    await closeRegistry(t);
    publisher?.close();
    await t?.cleanup();
    await broker?.cleanup();
  }, 60_000);

  it('is retried until it is recorded, and the tool runs once', async () => {
    const runId = 'run-forged';
    const dispatchId = 'dforgedsettle';
    const subject = t.subjects.journal.event(TENANT, runId, dispatchId, 'settled');
    // The forger's 100 ms link: every attempt of two whole rounds must lose its race (the forger,
    // the executor and the link share this process's event loop).
    const forger = await reForger(t, subject, broker.servers[0]);
    // The executor's settle attempts, as the broker sees them published (signed), refused or not.
    let signed = 0;
    const watch = t.nc.subscribe(subject, {
      callback: (_err, msg) => {
        if (!msg.headers?.has(SignatureHeader.Sigs)) return;
        signed += 1;
        // Two full rounds of bounded attempts refused: the attacker goes.
        if (signed === 2 * SUPERSEDE_ATTEMPTS) forger.stop();
      },
    });
    const worker = serveCountingTool(t, publisher, 'forged_out', () => ({ ok: true, result: 1 }));
    try {
      // A remote tool only: no sandbox (its probe and file helpers) to start.
      replica = await startReplica(t, {
        ...broker.env,
        NATS_URL: forger.slowUrl,
        // The decision's heartbeats cross the slow link too: an ack wait three times the
        // harness's keeps the margin the claim rule's takeover of a silent holder is measured by.
        EXECUTOR_ACK_WAIT_MS: '3000',
        EXECUTOR_SANDBOX: 'off',
      });
      const journal = await t.jsm.streams.info(t.subjects.journal.stream);
      expect(journal.config.num_replicas).toBe(shape.replicas);
      await dispatch(publisher, runId, dispatchId, await registerRemoteTool(t, 'forged_out'), {});
      // Read nothing on the subject meanwhile: every lookup of it would bring a new forgery.
      await eventually(() => (signed >= 2 * SUPERSEDE_ATTEMPTS ? true : undefined), {
        timeoutMs: 30_000,
        intervalMs: 50,
        what: 'two rounds of settle attempts refused',
      });
      // The decision is acked once the settlement is recorded, not before.
      await eventually(
        async () => {
          const info = await t.jsm.consumers.info(
            t.subjects.journal.stream,
            `${t.prefix}_executor-decided`,
          );
          return info.num_ack_pending === 0 && info.num_pending === 0 ? true : undefined;
        },
        { timeoutMs: 20_000, intervalMs: 100, what: 'the decision acked' },
      );
      const settled = await publisher.last(TENANT, runId, dispatchId, 'settled');
      expect(settled?.event).toMatchObject({ outcome: 'ok', result: 1, toolName: 'forged_out' });
      // Refused twice over, then appended after the forgeries: retried, not dropped.
      expect(signed).toBe(2 * SUPERSEDE_ATTEMPTS + 2);
      expect(worker.total()).toBe(1);
      expect((await journalCounts(t, runId, dispatchId)).started).toBe(1);
    } finally {
      watch.unsubscribe();
      worker.stop();
      await replica?.stop();
      replica = undefined;
      await forger.close();
    }
  }, 60_000);
});
