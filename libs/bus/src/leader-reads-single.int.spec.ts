import type { NatsConnection } from '@nats-io/transport-node';
import { createSubjects, type Subjects } from '@toolgate/contracts';
import {
  eventually,
  requestedEvent,
  startNatsCluster,
  testKeys,
  uniqueName,
  type NatsCluster,
} from '@toolgate/testing';
import { DirectGets } from './direct-get';
import { ensureJournalStreams, JournalPublisher } from './index';

/** Appends read back at once, side by side. */
const PAIRS = 2_000;

/**
 * A read that decides is the leader's. On a stream whose leader is its only replica a direct get
 * is that read, at a third of the broker's work of the message get API; on a stream with more
 * replicas it never is (a follower may not have applied what the leader acknowledged: see
 * `leader-reads.int.spec.ts`). Which one a stream has is read from its info, and the stream's
 * advisories say when it changes: a stream moved from one replica to three goes back to the
 * message get API at once, before a new follower may answer a direct get.
 */
describe('reads that decide, on a stream of one replica and after it is moved to three', () => {
  let cluster: NatsCluster;
  let subjects: Subjects;
  let nc: NatsConnection;
  let spy: NatsConnection;
  const heard = { msgGet: 0, directGet: 0 };

  beforeAll(async () => {
    cluster = await startNatsCluster({ label: 'singlereads' });
    subjects = createSubjects(uniqueName('singlereads'));
    await ensureJournalStreams(await cluster.jsm(), subjects, { replicas: 1 });
    // Both on one node: a request the reader sent is on the spy's way before the reader's flush
    // returns, and the spy's own flush then brings it in.
    const node = cluster.nodes[0]!;
    nc = await cluster.connect('single-reads', { to: node, only: true });
    // Every client request of the account passes its subjects: the API requests are heard here.
    spy = await cluster.connect('spy', { to: node, only: true });
    spy.subscribe(`$JS.API.STREAM.MSG.GET.${subjects.journal.stream}`, {
      callback: () => {
        heard.msgGet++;
      },
    });
    spy.subscribe(`$JS.API.DIRECT.GET.${subjects.journal.stream}.>`, {
      callback: () => {
        heard.directGet++;
      },
    });
    await spy.flush();
  }, 60_000);

  afterAll(async () => {
    await cluster?.cleanup();
  });

  const counted = async (fn: () => Promise<unknown>) => {
    await spy.flush();
    const before = { ...heard };
    await fn();
    await spy.flush();
    await nc.flush();
    await spy.flush();
    return { msgGet: heard.msgGet - before.msgGet, directGet: heard.directGet - before.directGet };
  };

  /** Reads through `read` until the reader has learnt the stream's replica count (never waited for). */
  const learnt = (read: () => Promise<unknown>) =>
    eventually(async () => ((await counted(read)).msgGet === 0 ? true : undefined), {
      what: "the reader to learn the stream's replica count",
    });

  it(`reads every acknowledged append back from its one replica with direct gets (${PAIRS} side by side)`, async () => {
    const publisher = new JournalPublisher(nc, subjects, testKeys('gateway'));
    const probe = requestedEvent({ dispatchId: 'probe' });
    await learnt(() =>
      publisher.last(probe.tenant, probe.runId, 'probe', 'requested', { from: 'leader' }),
    );
    let missing = 0;
    const spent = await counted(async () => {
      let next = 0;
      await Promise.all(
        Array.from({ length: 50 }, async () => {
          while (next < PAIRS) {
            const requested = requestedEvent({ dispatchId: `d${next++}` });
            await publisher.append(requested);
            const read = await publisher.last(
              requested.tenant,
              requested.runId,
              requested.dispatchId,
              'requested',
              { from: 'leader' },
            );
            if (read?.event.id !== requested.id) missing++;
          }
        }),
      );
    });
    publisher.close();
    expect({ missing, msgGets: spent.msgGet, directGets: spent.directGet >= PAIRS }).toEqual({
      missing: 0,
      msgGets: 0,
      directGets: true,
    });
  }, 120_000);

  it("asks the leader through the message get API as soon as the stream's change is announced", async () => {
    // A replica count taken as read for a minute: only the stream's advisories can end it.
    const direct = new DirectGets(nc, {}, 60_000);
    const d1 = requestedEvent({ dispatchId: 'd1' });
    const query = { last_by_subj: subjects.journal.event(d1.tenant, d1.runId, 'd1', 'requested') };
    const stream = subjects.journal.stream;
    await learnt(() => direct.fromLeader(stream, query));
    const one = await counted(() => direct.fromLeader(stream, query));
    // (A read is sent again only when its answer is late.)
    expect({ ...one, directGet: one.directGet >= 1 }).toEqual({ msgGet: 0, directGet: true });

    const jsm = await cluster.jsm();
    const info = await jsm.streams.info(stream);
    await jsm.streams.update(stream, { ...info.config, num_replicas: 3 });
    await cluster.streamPlacement(stream, 30_000);
    const three = await counted(() => direct.fromLeader(stream, query));
    expect({ ...three, msgGet: three.msgGet >= 1 }).toEqual({ msgGet: true, directGet: 0 });
    // The same message, whichever way it is asked for.
    expect((await direct.fromLeader(stream, query))?.subject).toBe(query.last_by_subj);
    direct.close();
  }, 60_000);
});
