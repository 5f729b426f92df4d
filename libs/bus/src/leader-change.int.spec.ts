import { createSubjects, type Subjects } from '@toolgate/contracts';
import {
  callEvents,
  startNatsCluster,
  testKeys,
  uniqueName,
  type NatsCluster,
} from '@toolgate/testing';
import { ensureJournalStreams, JournalPublisher } from './index';

/** Appenders running side by side. */
const WRITERS = 10;

/**
 * A leader change costs latency, not errors: writers append calls, append them again from another
 * connection (a client's retry: a duplicate, never a second first) and read them back (the reads
 * that decide, from the leader) on an R3 journal while its leader is killed (SIGKILL). While the
 * stream elects a new leader its replicas answer "no responders" and the dead leader's acks never
 * come; the publisher sends the same message again (same `Nats-Msg-Id`) within its budget.
 */
describe('a stream leader killed under load', () => {
  let cluster: NatsCluster;
  let subjects: Subjects;

  beforeAll(async () => {
    cluster = await startNatsCluster({ label: 'leaderkill' });
    subjects = createSubjects(uniqueName('leaderkill'));
    await ensureJournalStreams(await cluster.jsm(), subjects, { replicas: 3 });
  }, 60_000);

  afterAll(async () => {
    await cluster?.cleanup();
  });

  it('costs the writers no error, and every call is recorded once', async () => {
    const { leader } = await cluster.streamPlacement(subjects.journal.stream);
    // One connection on each node: the killed node's moves to another.
    const publishers = await Promise.all(
      cluster.nodes.map(
        async (node, i) =>
          new JournalPublisher(
            await cluster.connect(`writer-${i}`, { to: node }),
            subjects,
            testKeys('gateway'),
          ),
      ),
    );
    const errors: string[] = [];
    let next = 0;
    let killed = false;
    let afterKill = 0;
    const one = async (i: number, publisher: JournalPublisher, other: JournalPublisher) => {
      const { requested } = callEvents({ dispatchId: `d${i}` });
      try {
        const appended = await publisher.append(requested);
        if (!appended.appended || appended.duplicate)
          errors.push(`d${i}: ${JSON.stringify(appended)}`);
        // Another client's resubmission of the same call (the same event id, a later `at`) is
        // never taken for a first append, even when its own first attempt's ack is lost.
        const again = await other.append({
          ...requested,
          at: new Date(Date.now() + 1).toISOString(),
        });
        if (again.appended && !again.duplicate)
          errors.push(`d${i} resubmitted: ${JSON.stringify(again)}`);
        const read = await publisher.last(
          'acme',
          requested.runId,
          requested.dispatchId,
          'requested',
        );
        if (read?.seq !== appended.seq) errors.push(`d${i}: read back ${read?.seq}`);
      } catch (err) {
        errors.push(`d${i}: ${(err as Error).name}: ${(err as Error).message}`);
      }
      if (killed) afterKill++;
    };
    const writers = Array.from({ length: WRITERS }, async (_, w) => {
      // Until the kill and 300 calls past it, so the writers run through the election.
      while (!killed || afterKill < 300)
        await one(
          next++,
          publishers[w % publishers.length]!,
          publishers[(w + 1) % publishers.length]!,
        );
    });
    await new Promise((resolve) => setTimeout(resolve, 500));
    await leader.kill();
    killed = true;
    await Promise.all(writers);
    expect(errors).toEqual([]);
    const after = await cluster.streamPlacement(subjects.journal.stream);
    expect(after.leader).not.toBe(leader);
    const info = await (await cluster.jsm()).streams.info(subjects.journal.stream);
    expect(info.state.messages).toBe(next);
    for (const p of publishers) p.close();
  }, 120_000);
});
