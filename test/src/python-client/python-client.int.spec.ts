import { execFile, execFileSync } from 'node:child_process';
import path from 'node:path';
import {
  devKeySet,
  ErrorCode,
  EVENT_SIGNING,
  spkiBase64,
  toolRequestKeyOf,
} from '@toolgate/contracts';
import { NATS_URL } from '@toolgate/testing';
import { startTestStack, TOKENS, type TestStack } from '../support/test-stack';

/**
 * The Python client (clients/python, standard library only) against the whole stack on the real
 * NATS server: its own unittest suite (clients/python/tests/test_live.py) submits and waits,
 * replays, serves a remote tool and a remote hook that denies, lists and resolves an approval,
 * and follows a run's journal checking every event's signature with the operator's (`ops`) key —
 * ignoring a forged `settled` it plants itself. The protocol it speaks is docs/bus-protocol.md,
 * implemented without any of our TypeScript.
 */
const CLIENT_DIR = path.resolve(__dirname, '../../../clients/python');

function python3(): string {
  try {
    execFileSync('python3', ['--version'], { stdio: 'ignore' });
    return 'python3';
  } catch {
    throw new Error(
      'python3 is not installed: the Python client test needs it (apt-get install python3; .ci/run installs it when missing)',
    );
  }
}

/** What a line of Python (with the client importable) prints, parsed as JSON. */
function pythonJson(code: string): unknown {
  const out = execFileSync(python3(), ['-c', `import json\n${code}`], {
    cwd: CLIENT_DIR,
    env: { PATH: process.env.PATH, PYTHONPATH: CLIENT_DIR, PYTHONDONTWRITEBYTECODE: '1' },
  });
  return JSON.parse(out.toString());
}

// The client's tables are copies (it is another language), compared here with contracts': a code
// missing from its list reads as `internal` there; a producer missing from its map marks that
// producer's genuine events untrusted, and an extra one trusts a service that may not sign them.
it('knows every error code contracts defines, and no other', () => {
  const known = pythonJson(
    'from toolgate_client.client import ToolgateError; print(json.dumps(sorted(ToolgateError.KNOWN)))',
  );
  expect(known).toEqual(Object.values(ErrorCode).sort());
});

it('trusts each event type from exactly the producers contracts sign it with', () => {
  const producers = pythonJson(
    'from toolgate_client.signing import EVENT_PRODUCERS; print(json.dumps({t: sorted(p) for t, p in EVENT_PRODUCERS.items()}))',
  );
  expect(producers).toEqual(
    Object.fromEntries(
      Object.entries(EVENT_SIGNING).map(([type, s]) => [type, [...s.producers].sort()]),
    ),
  );
});

describe('the Python client against the whole stack', () => {
  let stack: TestStack;
  const python = python3();

  beforeAll(async () => {
    stack = await startTestStack('pyclient');
  });
  afterAll(async () => {
    await stack?.stop();
  });

  it('passes its unittest suite: submit+wait, replay, a Python tool and hook, approvals, a verified journal follow', async () => {
    const keys = devKeySet(process.env);
    const { code, output } = await new Promise<{ code: number | null; output: string }>(
      (resolve) => {
        const child = execFile(
          python,
          [
            '-m',
            'unittest',
            '-v',
            'tests.test_live',
            'tests.test_signing',
            'tests.test_nats',
            'tests.test_auth',
            'tests.test_partitions',
          ],
          {
            cwd: CLIENT_DIR,
            timeout: 60_000,
            env: {
              PATH: process.env.PATH,
              PYTHONPATH: CLIENT_DIR,
              PYTHONDONTWRITEBYTECODE: '1',
              TG_NATS_URL: NATS_URL,
              TG_PREFIX: stack.nats.prefix,
              TG_TENANT: 'acme',
              TG_ADMIN_TOKEN: TOKENS.acmeAdmin,
              TG_AGENT_TOKEN: TOKENS.acmeAgent,
              TG_APPROVER_TOKEN: TOKENS.acmeApprover,
              TG_OPS_PRIVATE_KEY: keys.privateKeys.ops,
              TG_PUBLIC_KEYS: JSON.stringify(keys.publicKeys),
              // What its workers verify the executor's tool requests with.
              TG_EXECUTOR_PUBLIC_KEY: spkiBase64(
                toolRequestKeyOf(keys.privateKeys['tool-executor']),
              ),
            },
          },
          (err) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, output }),
        );
        let output = '';
        child.stdout?.on('data', (d: Buffer) => (output += d.toString()));
        child.stderr?.on('data', (d: Buffer) => (output += d.toString()));
      },
    );
    // The suite's own report names each failing assertion; show it when it fails.
    expect({ code, output }).toEqual({
      code: 0,
      output: expect.stringMatching(/Ran 21 tests[\s\S]*\nOK\s*$/),
    });
  });
});
