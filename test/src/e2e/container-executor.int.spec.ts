/**
 * A registered container tool dispatched through the whole pipeline over real NATS: gateway →
 * evaluator → executor (runc, a busybox image built here) → journal. The containment itself is
 * proved in libs/container and the executor's own specs; this proves the wiring end to end.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { makeBusyboxImage } from '@toolgate/testing';
import { settled } from '../support/dispatch-probes';
import { startTestStack, TOKENS, type TestStack } from '../support/test-stack';
import { dispatchRequests } from '../support/dispatch-requests';

const call = dispatchRequests('run-container', 'container', 15_000);

/** Counts the words of `text`, reads notes.txt from /work and echoes its input. */
const WORD_COUNT =
  'read -r input; words=$(printf %s "$1" | wc -w); ' +
  'printf \'{"words":%d,"notes":"%s","input":%s,"host":"%s"}\' ' +
  '"$words" "$(cat notes.txt)" "$input" "$(hostname)"';

const textParams = {
  type: 'object',
  properties: { text: { type: 'string' } },
  required: ['text'],
};

const wordCount = {
  name: 'word_count_ctr',
  description: 'Counts the words of a text, in a container.',
  parameters: textParams,
  policy: {
    executor: 'container',
    risk: 'read',
    command: { argv: ['/bin/sh', '-c', WORD_COUNT, 'word_count', { input: 'text' }] },
    container: { image: 'tools/busybox:1' },
  },
};

describe('container executor through the pipeline (runc)', () => {
  let stack: TestStack;
  let images: string;
  let state: string;

  beforeAll(async () => {
    images = await mkdtemp(path.join(tmpdir(), 'tg-images-'));
    state = await mkdtemp(path.join(tmpdir(), 'tg-runc-'));
    await makeBusyboxImage(images, 'tools/busybox:1');
    stack = await startTestStack('container', {
      EXECUTOR_CONTAINER: 'runc',
      EXECUTOR_CONTAINER_IMAGES: images,
      EXECUTOR_CONTAINER_STATE_DIR: state,
    });
    await writeFile(path.join(stack.workdir, 'notes.txt'), 'from the workdir');
  });
  afterAll(async () => {
    await stack.stop();
    await rm(images, { recursive: true, force: true });
    await rm(state, { recursive: true, force: true });
  });

  it('is served: registering a container tool needs an image', async () => {
    const refused = await stack.http('POST', '/v1/tools', TOKENS.acmeAdmin, {
      tool: {
        ...wordCount,
        name: 'no_image',
        policy: { ...wordCount.policy, container: undefined },
      },
    });
    expect(refused.status).toBe(422);
    expect(refused.body.error).toMatchObject({
      code: 'config',
      details: { tool: 'no_image', field: 'policy.container' },
    });
  });

  it('settles ok with the JSON the tool wrote, run in a container on the call directory', async () => {
    const registered = await stack.http('POST', '/v1/tools', TOKENS.acmeAdmin, {
      tool: wordCount,
    });
    expect(registered.status).toBe(201);

    const res = await stack.http(
      'POST',
      '/v1/dispatches',
      TOKENS.acmeAgent,
      call('word_count_ctr', { text: 'one two $(three) *' }),
    );
    expect(res.body).toMatchObject({
      status: 'accepted',
      state: 'settled',
      settled: {
        outcome: 'ok',
        result: {
          words: 4,
          notes: 'from the workdir',
          input: { text: 'one two $(three) *' },
          host: 'toolgate',
        },
      },
    });
    const view = await settled(stack, res.body.dispatchId);
    expect(view.events.map((e) => e.event.type)).toEqual([
      'requested',
      'decided',
      'started',
      'settled',
    ]);
    expect(view.events[2]!.event).toMatchObject({ executor: 'container', cwd: stack.workdir });
  });

  it('maps a failing exit to a typed error with the exit code and stderr', async () => {
    await stack.http('POST', '/v1/tools', TOKENS.acmeAdmin, {
      tool: {
        ...wordCount,
        name: 'always_fails_ctr',
        policy: {
          ...wordCount.policy,
          command: { argv: ['/bin/sh', '-c', 'echo "bad text" >&2; exit 3'] },
        },
      },
    });
    const res = await stack.http(
      'POST',
      '/v1/dispatches',
      TOKENS.acmeAgent,
      call('always_fails_ctr', { text: 'x' }),
    );
    expect(res.body.settled).toMatchObject({
      outcome: 'error',
      error: {
        code: 'tool-failed',
        message: 'always_fails_ctr exited with code 3',
        details: { exitCode: 3, stderrTail: 'bad text\n' },
      },
    });
  });
});

describe('without a container backend', () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startTestStack('container-off');
  });
  afterAll(() => stack.stop());

  it('refuses to register a container tool: no executor serves it', async () => {
    const refused = await stack.http('POST', '/v1/tools', TOKENS.acmeAdmin, { tool: wordCount });
    expect(refused.body.error).toMatchObject({
      code: 'executor-unregistered',
      details: { tool: 'word_count_ctr', executor: 'container' },
    });
  });
});
