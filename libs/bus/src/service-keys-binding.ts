import type { NatsConnection } from '@nats-io/transport-node';
import { ConfigError, type ServiceKeys } from '@toolgate/contracts';

// A service's bootstrap resolves its signing keys once and binds them to the service's connection,
// as `metricsFor` does for its metrics: the Nest modules, the JetStream transport and the
// framework-free parts (the worktree lifecycle, the journal's responders) all receive that
// connection already, so they find the keys without every constructor in between carrying them.
const byConnection = new WeakMap<NatsConnection, ServiceKeys>();

/** Binds a service's signing keys to its connection (its bootstrap does, before anything reads them). */
export function bindServiceKeys(nc: NatsConnection, keys: ServiceKeys): void {
  byConnection.set(nc, keys);
}

/** The signing keys bound to `nc`; a {@link ConfigError} when none are (there is no unsigned mode). */
export function serviceKeysOf(nc: NatsConnection): ServiceKeys {
  const keys = byConnection.get(nc);
  if (!keys)
    throw new ConfigError('no signing keys are bound to this NATS connection (bindServiceKeys)');
  return keys;
}
