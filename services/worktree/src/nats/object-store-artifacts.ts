import type { NatsConnection } from '@nats-io/transport-node';
import { Objm, StorageType } from '@nats-io/obj';
import { whilePeersJoin } from '@toolgate/bus';
import type { ArtifactPort } from '../lifecycle/ports';

/** Options of the artifact object store. */
export interface ObjectStoreArtifactsOptions {
  /** File storage by default; memory for throwaway benchmarks. */
  storage?: 'file' | 'memory';
  replicas?: number;
}

/**
 * The artifact port over a JetStream object store bucket (`subjects.artifactsBucket`). Refs are
 * object names; patches are content-addressed, so putting the same ref twice stores the same
 * bytes. `create` is idempotent: every replica calls it at start-up.
 */
export async function createObjectStoreArtifacts(
  nc: NatsConnection,
  bucket: string,
  options: ObjectStoreArtifactsOptions = {},
): Promise<ArtifactPort> {
  const store = await whilePeersJoin(() =>
    new Objm(nc).create(bucket, {
      storage: options.storage === 'memory' ? StorageType.Memory : StorageType.File,
      replicas: options.replicas ?? 1,
    }),
  );
  return {
    async put(ref, bytes) {
      await store.putBlob({ name: ref }, bytes);
    },
    get(ref) {
      return store.getBlob(ref);
    },
  };
}
