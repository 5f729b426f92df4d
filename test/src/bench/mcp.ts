import { performance } from 'node:perf_hooks';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { agent, NOOP_TOOL, TOKEN, type BenchStack } from './bench-stack';
import { percentile, round, since } from './stats';

/** `mcp`: the same dispatch as an MCP `tools/call` and as `POST /v1/dispatches`, side by side. */
export interface McpBenchResult {
  samples: number;
  httpP50Ms: number;
  /** 2026-07-28 (the official v2 client, pinned to that revision). */
  callP50Ms: number;
  callP50VsHttp: number;
  /** 2025-11-25 (the same client on the legacy era: stateless, one POST per request). */
  legacyCallP50Ms: number;
  legacyCallP50VsHttp: number;
}

/**
 * Times one call of the bench's no-op remote tool, settled and answered, three ways: over HTTP
 * (the dispatch API with `wait`), over /mcp at 2026-07-28 and over /mcp at 2025-11-25. The three
 * take turns sample by sample, so the machine's noise falls on all of them alike. Every way runs
 * the whole dispatch (contract check, chain, journal, executor, the worker's answer).
 */
export async function benchMcp(
  stack: BenchStack,
  opts: { quick: boolean },
): Promise<McpBenchResult> {
  const samples = opts.quick ? 150 : 600;
  const warmup = opts.quick ? 30 : 100;
  const url = new URL(`${stack.gatewayUrl}/mcp`);
  const connect = async (mode: 'modern' | 'legacy') => {
    const client = new Client(
      { name: 'toolgate-bench', version: '1.0.0' },
      { versionNegotiation: { mode: mode === 'modern' ? { pin: '2026-07-28' } : 'legacy' } },
    );
    await client.connect(
      new StreamableHTTPClientTransport(url, {
        requestInit: { headers: { authorization: `Bearer ${TOKEN}` } },
      }),
    );
    // As an agent does before calling: the client keeps the list (it validates results with it).
    await client.listTools();
    return client;
  };
  const modern = await connect('modern');
  const legacy = await connect('legacy');
  let seq = 0;
  const viaHttp = async () => {
    const i = ++seq;
    const res = await fetch(`${stack.gatewayUrl}/v1/dispatches`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        runId: 'bench-mcp-http',
        callId: `c-${i}`,
        agent,
        tool: NOOP_TOOL,
        input: { i },
        wait: 10_000,
      }),
    });
    const body = (await res.json()) as { state?: string };
    if (body.state !== 'settled') throw new Error(`HTTP dispatch ended ${JSON.stringify(body)}`);
  };
  const viaMcp = (client: Client, runId: string) => async () => {
    const result = await client.callTool({
      name: NOOP_TOOL,
      arguments: { i: ++seq },
      _meta: { 'io.toolgate/runId': runId },
    });
    if (result.isError) throw new Error(`MCP call failed: ${JSON.stringify(result.content)}`);
  };
  const ways = [viaHttp, viaMcp(modern, 'bench-mcp-modern'), viaMcp(legacy, 'bench-mcp-legacy')];
  const times: number[][] = [[], [], []];
  try {
    for (let i = 0; i < warmup + samples; i++) {
      for (const [w, way] of ways.entries()) {
        const t = performance.now();
        await way();
        if (i >= warmup) times[w]!.push(since(t));
      }
    }
  } finally {
    await modern.close();
    await legacy.close();
  }
  const [http, call, legacyCall] = times.map((t) => percentile(t, 50)) as [number, number, number];
  return {
    samples,
    httpP50Ms: round(http),
    callP50Ms: round(call),
    callP50VsHttp: round(call / http),
    legacyCallP50Ms: round(legacyCall),
    legacyCallP50VsHttp: round(legacyCall / http),
  };
}
