import { ensureJournalStreams } from '@toolgate/bus';
import { createSubjects } from '@toolgate/contracts';
import { ConsumedStates } from '@toolgate/gateway';
import { PolicyStore } from '@toolgate/registry';
import { startNatsCluster, uniqueName, type NatsCluster } from '@toolgate/testing';
import { createObjectStoreArtifacts } from '@toolgate/worktree';
import { answerFaults, errorAnswers, submitTwice } from '../support/partitioned-tenants';
import { startTestStack, TOKENS, type TestStack } from '../support/test-stack';

/**
 * Services start beside a cluster that is still forming — the pods of one release: a node that has
 * never run leaves the meta leader too few peers to place anything of three replicas on ("no
 * suitable peers for placement"), which failed a service's start-up. Everything a service creates
 * is asked again until the node has joined (`whilePeersJoin`), instead of failing the start.
 */

/** Starts the cluster's third node once `creating` has been asked at least once, then awaits it. */
async function afterTheNodeJoins<T>(cluster: NatsCluster, creating: Promise<T>): Promise<T> {
  await new Promise((resolve) => setTimeout(resolve, 1_500));
  await cluster.nodes[2]!.start();
  return creating;
}

describe('what a service creates at three replicas, while a node of the cluster is still coming up', () => {
  let cluster: NatsCluster;

  beforeAll(async () => {
    // The third node has never run: the meta leader knows two peers.
    cluster = await startNatsCluster({ label: 'placement', started: 2 });
  }, 60_000);

  afterAll(async () => {
    await cluster?.cleanup();
  });

  it('is created (and a one-replica journal raised) once the node has joined', async () => {
    const jsm = await cluster.jsm();
    const nc = await cluster.connect('placement');
    const subjects = createSubjects(uniqueName('placement'));
    // A journal made at one replica before, raised by the journal's managed start.
    const raised = createSubjects(uniqueName('raised'));
    await ensureJournalStreams(jsm, raised, { replicas: 1 });

    const [, , policy] = await afterTheNodeJoins(
      cluster,
      Promise.all([
        ensureJournalStreams(jsm, subjects, { replicas: 3 }),
        ensureJournalStreams(jsm, raised, { replicas: 3, manage: true }),
        PolicyStore.open(nc, subjects, { replicas: 3 }),
        ConsumedStates.open(nc, subjects, { ttlMs: 60_000, replicas: 3 }),
        createObjectStoreArtifacts(nc, subjects.artifactsBucket, { replicas: 3 }),
      ]),
    );
    policy.stop();

    const replicas = async (stream: string) => (await jsm.streams.info(stream)).config.num_replicas;
    expect({
      journal: await replicas(subjects.journal.stream),
      raised: await replicas(raised.journal.stream),
      policy: await replicas(`KV_${subjects.policyBucket}`),
      mcpState: await replicas(`KV_${subjects.mcpStateBucket}`),
      artifacts: await replicas(`OBJ_${subjects.artifactsBucket}`),
    }).toEqual({ journal: 3, raised: 3, policy: 3, mcpState: 3, artifacts: 3 });
  }, 60_000);
});

describe('the whole stack started while a node of its R3 cluster is still coming up', () => {
  let cluster: NatsCluster;
  let stack: TestStack;

  beforeAll(async () => {
    cluster = await startNatsCluster({ label: 'forming', started: 2 });
  }, 60_000);

  afterAll(async () => {
    await stack?.stop();
    await cluster?.cleanup();
  }, 60_000);

  it('comes up once the node has joined, and serves a call', async () => {
    stack = await afterTheNodeJoins(
      cluster,
      startTestStack(
        'forming',
        {},
        { servers: cluster.servers, env: { TOOLGATE_STREAM_REPLICAS: '3' } },
      ),
    );
    const jsm = await cluster.jsm();
    expect((await jsm.streams.info(stack.nats.subjects.journal.stream)).config.num_replicas).toBe(
      3,
    );
    const call = await submitTwice(stack, TOKENS.acmeAgent, 'forming', 'first');
    expect({ ...answerFaults([call]), errorAnswers: errorAnswers([call]) }).toEqual({
      errors: 0,
      notAccepted: 0,
      notReplayed: 0,
      notOk: 0,
      errorAnswers: [],
    });
  }, 120_000);
});
