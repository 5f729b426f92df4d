import type { JournalEvent } from '@toolgate/contracts';

/**
 * Where the lifecycle writes its events. The NATS adapter publishes them to the journal stream
 * (deduplicated by `Nats-Msg-Id` = `event.id`); every event id is deterministic per transition,
 * so appending the same transition again after a crash or a retried request is harmless.
 */
export interface JournalPort {
  append(event: JournalEvent): Promise<void>;
}

/**
 * Where patches are stored. `put` must be idempotent for the same ref and bytes (refs are
 * content-addressed); `get` returns null for an unknown ref.
 */
export interface ArtifactPort {
  put(ref: string, bytes: Uint8Array): Promise<void>;
  get(ref: string): Promise<Uint8Array | null>;
}

/** The lifecycle's clock, injected so tests and replays choose the time. */
export type Clock = () => Date;
