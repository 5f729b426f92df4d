/**
 * A team's worker process, as a team would run one beside Toolgate: it registers and serves the
 * remote tool `trace_lookup` with the SDK and answers the remote hook `audit` with a plain NATS
 * subscription, and exports its spans like the services do (`OTEL_EXPORTER_OTLP_ENDPOINT`).
 * Both join the trace of the call that reaches them through the request's `traceparent` header.
 *
 * Run from sources: `node --require ./scripts/from-source.cjs test/src/support/team-worker.ts`,
 * with NATS_URL, TOOLGATE_PREFIX and TOOLGATE_TOKEN (an acme admin token). Prints `ready` once it
 * serves both; SIGTERM stops it after flushing its spans.
 */
import { connect } from '@nats-io/transport-node';
import { z } from 'zod';
import { createClient, tool } from '@toolgate/sdk';
import { consumerSpan, setupTelemetry } from '@toolgate/telemetry';

/** The `service.name` of this process's spans. */
export const TEAM_WORKER_SERVICE = 'acme-worker';

/** The tool it serves; `missing` fails the way a tool's own error does (`tool-failed`). */
const traceLookup = tool({
  name: 'trace_lookup',
  description: 'Looks a key up in the team’s store.',
  parameters: z.object({ key: z.string() }),
  risk: 'read',
  async execute({ key }) {
    if (key === 'missing') throw new Error('no such key');
    return { key, value: key.toUpperCase() };
  },
});

async function main(): Promise<void> {
  const telemetry = setupTelemetry({ serviceName: TEAM_WORKER_SERVICE });
  const nc = await connect({ servers: process.env.NATS_URL ?? 'nats://127.0.0.1:4222' });
  const client = await createClient({
    nc,
    prefix: process.env.TOOLGATE_PREFIX ?? 'toolgate',
    token: process.env.TOOLGATE_TOKEN ?? '',
    tenant: 'acme',
  });
  await client.registerTool(traceLookup);
  client.serveTool(traceLookup);
  // Any NATS client can serve a hook: this one opens its span in the request's trace context.
  const hookSubject = client.subjects.hook('acme', 'audit');
  const hook = nc.subscribe(hookSubject, {
    callback: (_err, msg) =>
      void consumerSpan(hookSubject, msg.headers, {}, async () => msg.respond('{}')),
  });
  await nc.flush();
  console.log('ready');

  process.once('SIGTERM', () => {
    void (async () => {
      hook.unsubscribe();
      await client.close();
      await nc.close();
      await telemetry.shutdown();
      process.exit(0);
    })();
  });
}

if (require.main === module) {
  main().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
