import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { journalPartitionOf } from '@toolgate/contracts';
import { startNatsServer, type NatsServerProcess } from '@toolgate/testing';

const PARTITIONS = 4;
const TENANTS = Array.from({ length: 200 }, (_, i) => `tenant-${i}-${(i * 7919).toString(36)}`);

/**
 * The partition a tenant's journal lives in is chosen by the client (`journalPartitionOf`), with
 * the hash nats-server's own subject mapping uses: a server told `{{partition(4,1)}}` on the tenant
 * token puts every tenant in the same partition, so the choice could move to an account mapping
 * without moving a tenant.
 */
describe("the journal's tenant partition and nats-server's partition() mapping", () => {
  let server: NatsServerProcess;
  let dir: string;
  let nc: NatsConnection;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'toolgate-partition-mapping-'));
    const configFile = path.join(dir, 'mapping.conf');
    server = await startNatsServer({ start: false, jetstream: false, configFile });
    await writeFile(
      configFile,
      `mappings = { "pm.in.*": "pm.out.{{partition(${PARTITIONS},1)}}.{{wildcard(1)}}" }\n`,
    );
    await server.start();
    nc = await connect({ servers: server.url });
  });

  afterAll(async () => {
    await nc?.close();
    await server?.cleanup();
    await rm(dir, { recursive: true, force: true });
  });

  it('places every tenant where the server does', async () => {
    const placed = new Map<string, number>();
    const sub = nc.subscribe('pm.out.*.*', { max: TENANTS.length });
    const received = (async () => {
      for await (const msg of sub) {
        const [, , partition, tenant] = msg.subject.split('.');
        placed.set(tenant!, Number(partition));
      }
    })();
    for (const tenant of TENANTS) nc.publish(`pm.in.${tenant}`);
    await received;
    expect(placed.size).toBe(TENANTS.length);
    const differ = TENANTS.filter((t) => placed.get(t) !== journalPartitionOf(t, PARTITIONS));
    expect(differ).toEqual([]);
    // Not a degenerate agreement: the server spread them over every partition.
    expect(new Set(placed.values()).size).toBe(PARTITIONS);
  });
});
