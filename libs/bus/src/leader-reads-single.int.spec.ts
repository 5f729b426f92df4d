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
 * `leader-reads.int.spec.ts`). Which one a stream has is read from its info, so a stream moved
 * from one replica to three goes back to the message get API.
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
    nc = await cluster.connect('single-reads');
    // Every client request of the account passes its subjects: the API requests are heard here.
    spy = await cluster.connect('spy');
    spy.subscribe(`$JS.API.STREAM.MSG.GET.${subjects.journal.stream}`, {
      callback: () => heard.msgGet++,
    });
    spy.subscribe(`$JS.API.DIRECT.GET.${subjects.journal.stream}.>`, {
      callback: () => heard.directGet++,
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

  it(`reads every acknowledged append back from its one replica with direct gets (${PAIRS} side by side)`, async () => {
    const publisher = new JournalPublisher(nc, subjects, testKeys('gateway'));
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

  it('asks the leader through the message get API once the stream has three replicas', async () => {
    const direct = new DirectGets(nc, {}, 200);
    const d1 = requestedEvent({ dispatchId: 'd1' });
    const query = { last_by_subj: subjects.journal.event(d1.tenant, d1.runId, 'd1', 'requested') };
    const stream = subjects.journal.stream;
    const one = await counted(() => direct.fromLeader(stream, query));
    expect(one).toEqual({ msgGet: 0, directGet: 1 });

    const jsm = await cluster.jsm();
    const info = await jsm.streams.info(stream);
    await jsm.streams.update(stream, { ...info.config, num_replicas: 3 });
    await cluster.streamPlacement(stream, 30_000);
    await new Promise((resolve) => setTimeout(resolve, 300));
    const three = await eventually(
      async () => {
        const spent = await counted(() => direct.fromLeader(stream, query));
        return spent.msgGet === 1 ? spent : undefined;
      },
      { timeoutMs: 10_000, what: 'a read through the message get API' },
    );
    expect(three).toEqual({ msgGet: 1, directGet: 0 });
    // The same message, whichever way it is asked for.
    expect((await direct.fromLeader(stream, query))?.subject).toBe(query.last_by_subj);
    direct.close();
  }, 60_000);
});
