import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { freePort, startNatsServer, type NatsServerProcess } from './nats-server-process';
import { uniqueName } from './names';

/** One server of a {@link NatsCluster}: a {@link NatsServerProcess} with its server name. */
export interface ClusterNode extends NatsServerProcess {
  /** Its `server_name`, as stream and consumer info name their leaders and replicas. */
  readonly name: string;
  /** Its monitoring endpoint, `http://127.0.0.1:<port>` (`/jsz`, `/varz`). */
  readonly monitorUrl: string;
}

/** Where a stream (or one of its consumers) is led, as the cluster says now. */
export interface Placement {
  leader: ClusterNode;
  followers: ClusterNode[];
}

/**
 * A JetStream cluster of the test's own on loopback — the shape `deploy/k8s` runs — for the specs
 * that must hold on R3 streams: followers that lag, a leader that dies, an election in progress.
 * Every port is the kernel's pick (client, route and monitoring), so test files run side by side,
 * and each node keeps its ports and store across a restart.
 */
export interface NatsCluster {
  readonly nodes: readonly ClusterNode[];
  /** Every node's client URL, for a connection's `servers` (any live node will do). */
  readonly servers: string[];
  /** The same, comma-separated, as `NATS_URL` takes them. */
  readonly url: string;
  /** The node named `name`. */
  node(name: string): ClusterNode;
  /** The stream's leader and followers; waits (up to `timeoutMs`) while it has no leader. */
  streamPlacement(stream: string, timeoutMs?: number): Promise<Placement>;
  /** A durable consumer's leader and followers; waits while it has none. */
  consumerPlacement(stream: string, consumer: string, timeoutMs?: number): Promise<Placement>;
  /**
   * Moves a consumer's leadership onto the stream's leader (step-downs until it lands there:
   * nats-server 2.9 takes no preferred leader), so a stream follower serves neither the publishes'
   * acks nor the consumer's deliveries — only reads that any replica may answer.
   */
  placeConsumerOnStreamLeader(stream: string, consumer: string): Promise<void>;
  /**
   * Makes `nodes` lag: each is paused (SIGSTOP) for `pauseMs` in turn, `gapMs` apart, until
   * `stop()` (which resumes the paused one and resolves once the loop has ended). Given a stream's
   * followers, the leader keeps acknowledging with the others while the paused one falls behind:
   * readers on it see a replica that has not applied acknowledged writes.
   */
  lagInTurn(
    nodes: readonly ClusterNode[],
    options?: { pauseMs?: number; gapMs?: number },
  ): { stop(): Promise<void> };
  /**
   * A graceful leader change: asks the stream's leader to step down
   * (`$JS.API.STREAM.LEADER.STEPDOWN.<stream>`) and resolves with the new placement once another
   * node leads it and every replica says it is current.
   */
  stepDown(stream: string, timeoutMs?: number): Promise<Placement>;
  /** The meta (JetStream API) leader, from a live node's `/jsz`. */
  metaLeader(timeoutMs?: number): Promise<ClusterNode>;
  /**
   * A connection to the cluster's nodes (any live one), closed by {@link cleanup}. With `to`: to
   * that node first (the others after it, in order, when it goes), or to it alone with `only`.
   */
  connect(name?: string, options?: { to?: ClusterNode; only?: boolean }): Promise<NatsConnection>;
  /** The JetStream manager of the harness's own connection. */
  jsm(): Promise<JetStreamManager>;
  /** Waits until JetStream answers on every running node (a meta leader is elected). */
  ready(timeoutMs?: number): Promise<void>;
  /** Kills every node, removes every store and closes the harness's connections. */
  cleanup(): Promise<void>;
}

export interface NatsClusterOptions {
  /** Names the cluster and its nodes (`<label>-n1`…). */
  label?: string;
  /** How many nodes (default 3). */
  size?: number;
  /**
   * How many of them start now (default all): the others never ran until their `start()`, as the
   * pods of a cluster that is still forming.
   */
  started?: number;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Starts a JetStream cluster of `size` nats-servers on loopback (`-js` with a store of each node's
 * own, a `cluster` block routing to every other node) and resolves once JetStream answers. See
 * {@link NatsCluster}; call `cleanup()` in `afterAll` (a test process that exits without it still
 * kills its servers).
 */
export async function startNatsCluster(options: NatsClusterOptions = {}): Promise<NatsCluster> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startNatsClusterOnce(options);
    } catch (err) {
      // A port picked free was taken before its node bound it (another process's outgoing
      // connection drew it from the same ephemeral range): start again on newly picked ports.
      if (attempt >= PORT_ATTEMPTS || !/address already in use/.test(String(err))) throw err;
    }
  }
}

/** How many times a cluster is started on fresh ports when one of its ports was taken meanwhile. */
const PORT_ATTEMPTS = 3;

async function startNatsClusterOnce(options: NatsClusterOptions): Promise<NatsCluster> {
  const size = options.size ?? 3;
  const clusterName = uniqueName(options.label ?? 'cluster');
  const routePorts = await Promise.all(Array.from({ length: size }, () => freePort()));
  const monitorPorts = await Promise.all(Array.from({ length: size }, () => freePort()));
  const configDir = await mkdtemp(path.join(tmpdir(), 'toolgate-nats-cluster-'));
  const nodes: ClusterNode[] = [];
  for (let i = 0; i < size; i++) {
    const name = `${clusterName}-n${i + 1}`;
    const configFile = path.join(configDir, `${name}.conf`);
    const server = await startNatsServer({ start: false, configFile });
    const routes = routePorts
      .filter((_, j) => j !== i)
      .map((port) => `"nats-route://127.0.0.1:${port}"`);
    await writeFile(
      configFile,
      [
        `server_name: "${name}"`,
        `http: "127.0.0.1:${monitorPorts[i]}"`,
        `jetstream { store_dir: "${server.storeDir}" }`,
        `cluster {`,
        `  name: "${clusterName}"`,
        `  listen: "127.0.0.1:${routePorts[i]}"`,
        `  routes: [${routes.join(', ')}]`,
        `}`,
        '',
      ].join('\n'),
    );
    // Delegates to the server (its `running` is a getter), with the node's names beside it.
    nodes.push(
      Object.assign(Object.create(server) as NatsServerProcess, {
        name,
        monitorUrl: `http://127.0.0.1:${monitorPorts[i]}`,
      }),
    );
  }
  try {
    return await buildCluster(nodes, configDir, options.started ?? size);
  } catch (err) {
    await Promise.all(nodes.map((n) => n.cleanup()));
    await rm(configDir, { recursive: true, force: true });
    throw err;
  }
}

async function buildCluster(
  nodes: ClusterNode[],
  configDir: string,
  started: number,
): Promise<NatsCluster> {
  await Promise.all(nodes.slice(0, started).map((n) => n.start()));
  const servers = nodes.map((n) => n.url);
  const connections: NatsConnection[] = [];
  let own: { nc: NatsConnection; jsm: JetStreamManager } | undefined;

  const connectTo = async (
    name = 'test-cluster',
    { to, only = false }: { to?: ClusterNode; only?: boolean } = {},
  ) => {
    const nc = await connect({
      servers: to ? [to.url, ...(only ? [] : servers.filter((url) => url !== to.url))] : servers,
      ...(to ? { noRandomize: true } : {}),
      name,
      maxReconnectAttempts: -1,
      reconnectTimeWait: 100,
    });
    connections.push(nc);
    return nc;
  };
  const jsm = async () => {
    if (!own) {
      const nc = await connectTo('test-cluster-harness');
      own = { nc, jsm: await jetstreamManager(nc, { timeout: 2000 }) };
    }
    return own.jsm;
  };
  const byName = (name: string | undefined): ClusterNode | undefined =>
    nodes.find((n) => n.name === name);
  const placementOf = (leader: string | undefined): Placement | undefined => {
    const lead = byName(leader);
    return lead ? { leader: lead, followers: nodes.filter((n) => n !== lead) } : undefined;
  };
  const waitFor = async <T>(
    what: string,
    timeoutMs: number,
    probe: () => Promise<T | undefined>,
  ): Promise<T> => {
    const deadline = Date.now() + timeoutMs;
    let last: unknown;
    for (;;) {
      try {
        const found = await probe();
        if (found !== undefined) return found;
      } catch (err) {
        last = err;
      }
      if (Date.now() > deadline)
        throw new Error(`${what} within ${timeoutMs} ms${last ? `: ${String(last)}` : ''}`);
      await sleep(100);
    }
  };

  const cluster: NatsCluster = {
    nodes,
    servers,
    url: servers.join(','),
    node(name) {
      const found = byName(name);
      if (!found) throw new Error(`no node ${name} in the cluster`);
      return found;
    },
    streamPlacement(stream, timeoutMs = 15_000) {
      return waitFor(`stream ${stream} has no leader`, timeoutMs, async () => {
        const info = await (await jsm()).streams.info(stream);
        return placementOf(info.cluster?.leader);
      });
    },
    consumerPlacement(stream, consumer, timeoutMs = 15_000) {
      return waitFor(`consumer ${consumer} has no leader`, timeoutMs, async () => {
        const info = await (await jsm()).consumers.info(stream, consumer);
        return placementOf(info.cluster?.leader);
      });
    },
    async placeConsumerOnStreamLeader(stream, consumer) {
      await jsm();
      for (let attempt = 0; attempt < 30; attempt++) {
        const { leader } = await cluster.streamPlacement(stream);
        const current = await cluster.consumerPlacement(stream, consumer);
        if (current.leader === leader) return;
        await own!.nc
          .request(`$JS.API.CONSUMER.LEADER.STEPDOWN.${stream}.${consumer}`, undefined, {
            timeout: 2000,
          })
          .catch(() => undefined);
        await sleep(200);
      }
      throw new Error(`consumer ${consumer} could not be placed on stream ${stream}'s leader`);
    },
    async stepDown(stream, timeoutMs = 15_000) {
      const { leader } = await cluster.streamPlacement(stream, timeoutMs);
      await jsm();
      let askedAt = 0;
      return waitFor(`stream ${stream} has no new leader`, timeoutMs, async () => {
        // Asked again every 2 s: a request lost in an election is not an answer.
        if (Date.now() - askedAt > 2000) {
          askedAt = Date.now();
          await own!.nc
            .request(`$JS.API.STREAM.LEADER.STEPDOWN.${stream}`, undefined, { timeout: 2000 })
            .catch(() => undefined);
        }
        const info = await (await jsm()).streams.info(stream);
        const now = placementOf(info.cluster?.leader);
        const current = (info.cluster?.replicas ?? []).every((r) => r.current);
        return now && now.leader !== leader && current ? now : undefined;
      });
    },
    lagInTurn(lagging, { pauseMs = 300, gapMs = 150 } = {}) {
      let on = true;
      const loop = (async () => {
        for (let turn = 0; on; turn++) {
          const node = lagging[turn % lagging.length]!;
          await node.pause();
          await sleep(pauseMs);
          node.resume();
          await sleep(gapMs);
        }
      })();
      return {
        async stop() {
          on = false;
          await loop;
        },
      };
    },
    metaLeader(timeoutMs = 15_000) {
      return waitFor('no meta leader', timeoutMs, async () => {
        for (const node of nodes) {
          if (!node.running) continue;
          const res = await fetch(`${node.monitorUrl}/jsz`).catch(() => undefined);
          if (!res?.ok) continue;
          const jsz = (await res.json()) as { meta_cluster?: { leader?: string } };
          const leader = byName(jsz.meta_cluster?.leader);
          if (leader) return leader;
        }
        return undefined;
      });
    },
    connect: connectTo,
    jsm,
    async ready(timeoutMs = 30_000) {
      await waitFor('JetStream is not ready on the cluster', timeoutMs, async () => {
        const leader = await cluster.metaLeader(timeoutMs);
        // Every running node has joined the meta group (a node that is not current answers
        // JetStream requests it forwards late, or not at all) ...
        for (const node of nodes) {
          if (!node.running) continue;
          const res = await fetch(`${node.monitorUrl}/jsz`);
          const jsz = (await res.json()) as { meta_cluster?: { leader?: string } };
          if (!jsz.meta_cluster?.leader) return undefined;
        }
        // ... and the meta leader counts each of the others as a current peer: until then it
        // places no stream of more replicas than it knows peers for ("no suitable peers for
        // placement", seen creating an R3 stream right after a start).
        const res = await fetch(`${leader.monitorUrl}/jsz`);
        const jsz = (await res.json()) as {
          meta_cluster?: { replicas?: { name: string; current: boolean }[] };
        };
        const current = new Set(
          (jsz.meta_cluster?.replicas ?? []).filter((r) => r.current).map((r) => r.name),
        );
        for (const node of nodes)
          if (node.running && node !== leader && !current.has(node.name)) return undefined;
        const manager = await jsm();
        await manager.getAccountInfo();
        // ... and places a stream on every running node: a current peer may not have sent the
        // meta leader its statistics yet, and until then a stream of that many replicas is
        // refused ("no suitable peers for placement": a CI run's service start-up failed on it).
        const replicas = nodes.filter((n) => n.running).length;
        if (replicas > 1) {
          const name = uniqueName('harness_ready');
          try {
            await manager.streams.add({ name, subjects: [`${name}.>`], num_replicas: replicas });
          } catch {
            return undefined;
          }
          await manager.streams.delete(name);
        }
        return true;
      });
    },
    async cleanup() {
      for (const nc of connections) await nc.close().catch(() => undefined);
      await Promise.all(nodes.map((n) => n.cleanup()));
      await rm(configDir, { recursive: true, force: true });
    },
  };
  await cluster.ready();
  return cluster;
}
