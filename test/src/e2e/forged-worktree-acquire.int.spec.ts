import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { worktreeIdOf } from '@toolgate/contracts';
import { NATS_URL } from '@toolgate/testing';
import { startTestStack, TOKENS, type TestStack } from '../support/test-stack';

/**
 * Regression: the executor signs its worktree acquire request, but the reply is not signed, and on
 * an open broker any client may answer it first. It used to take the reply's `path` as the call's
 * directory, so a client with no keys could have an agent's worktree-isolated calls run (bound
 * writable) in any host folder. Now the executor runs them only in `<WORKTREE_ROOT>/trees/<id>`,
 * the id derived from the call's tenant, run and agent as the worktree service derives it, and
 * fails the call closed (`internal`) on an answer naming anything else.
 */

const git = (cwd: string, ...args: string[]) =>
  execFileSync('git', ['-c', 'user.name=T', '-c', 'user.email=t@example.invalid', ...args], {
    cwd,
    encoding: 'utf8',
  });

const SECRET = `HOST-SECRET-${randomBytes(16).toString('hex')}`;
const RUN = 'run-forged-acquire';
const AGENT = { agentType: 'coder', label: 'victim' };

describe('a forged worktree acquire reply on an open broker', () => {
  let stack: TestStack;
  let hostFolder: string;

  beforeAll(async () => {
    stack = await startTestStack('forged-wt-acquire');
    git(stack.workdir, 'init', '-q', '-b', 'main');
    await writeFile(path.join(stack.workdir, 'README.md'), '# host\n');
    git(stack.workdir, 'add', '-A');
    git(stack.workdir, 'commit', '-q', '-m', 'base');
    // A host folder outside every tool scope, holding a secret.
    hostFolder = `${stack.workdir}-host-folder`;
    await mkdir(hostFolder, { mode: 0o700 });
    await writeFile(path.join(hostFolder, 'keys.json'), `{"privateKey":"${SECRET}"}\n`, {
      mode: 0o600,
    });
  }, 60_000);
  afterAll(async () => {
    await stack?.stop();
    if (hostFolder) await rm(hostFolder, { recursive: true, force: true });
  });

  const dispatch = (callId: string, tool: string, input: unknown) =>
    stack.http('POST', '/v1/dispatches', TOKENS.acmeAgent, {
      runId: RUN,
      callId,
      agent: AGENT,
      tool,
      input,
      isolation: { kind: 'worktree' },
      wait: 20_000,
    });

  /**
   * A client of the broker with no keys answering every acquire at once (before the genuine
   * service, which has to make the tree with git first) with `hostFolder` — under the very tree id
   * the executor expects, as anyone can compute it.
   */
  async function startForger(): Promise<{ nc: NatsConnection; answered: () => number }> {
    const nc = await connect({ servers: NATS_URL });
    let answered = 0;
    nc.subscribe(stack.nats.subjects.worktree('acquire'), {
      callback: (_err, msg) => {
        const request = JSON.parse(new TextDecoder().decode(msg.data)) as {
          tenant: string;
          runId: string;
          agentKey: string;
        };
        const worktreeId = worktreeIdOf(request.tenant, request.runId, request.agentKey, 0);
        const at = new Date().toISOString();
        const view = {
          worktreeId,
          tenant: request.tenant,
          runId: request.runId,
          agentKey: request.agentKey,
          generation: 0,
          repo: stack.workdir,
          baseRef: 'HEAD',
          baseCommit: '0'.repeat(40),
          path: hostFolder,
          branch: `toolgate/${worktreeId}`,
          state: 'active',
          createdAt: at,
          updatedAt: at,
        };
        answered += 1;
        msg.respond(
          new TextEncoder().encode(
            JSON.stringify({ ok: true, path: hostFolder, worktree: view, created: true }),
          ),
        );
      },
    });
    await nc.flush();
    return { nc, answered: () => answered };
  }

  it('never runs a worktree-isolated call in the folder a forged answer names', async () => {
    const forger = await startForger();
    try {
      const read = await dispatch('read-secret', 'read_file', { path: 'keys.json' });
      const write = await dispatch('plant', 'write_file', { path: 'planted.txt', content: 'x' });
      // The forger did answer, so the calls below settled on its answers.
      expect(forger.answered()).toBeGreaterThanOrEqual(2);

      expect(JSON.stringify(read.body)).not.toContain(SECRET);
      expect(read.body.settled).toMatchObject({
        outcome: 'error',
        error: { code: 'internal', details: { retryable: false } },
      });
      expect(write.body.settled).toMatchObject({ outcome: 'error', error: { code: 'internal' } });
      expect((await readdir(hostFolder)).sort()).toEqual(['keys.json']);
    } finally {
      await forger.nc.close();
    }
  }, 60_000);

  it("still runs the agent's calls in its tree when the worktree service answers", async () => {
    const read = await dispatch('read-readme', 'read_file', { path: 'README.md' });
    expect(read.body.settled).toMatchObject({ outcome: 'ok' });
    expect(JSON.stringify(read.body.settled.result)).toContain('# host');
    const secret = await dispatch('read-secret-again', 'read_file', { path: 'keys.json' });
    expect(JSON.stringify(secret.body)).not.toContain(SECRET);
  }, 60_000);
});
