import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Sandbox, type ProcessResult, type SandboxRequest, type SandboxSettings } from '../src';

/** What {@link sandboxSpec} gives a spec; read its fields inside tests and hooks only. */
export interface SandboxSpec {
  /** Opened once for the spec file. */
  readonly sandbox: Sandbox;
  /** This test's own working directory (a real path), removed after the test. */
  readonly work: string;
  /** `script` under `/bin/sh -c` in {@link work}, with `PATH` only, the spec's defaults and `extra`. */
  sh(script: string, extra?: Partial<SandboxRequest>): Promise<ProcessResult>;
}

/**
 * The set-up the sandbox's attack specs share, as jest hooks: a sandbox opened with `open` before
 * all tests, a fresh directory under the OS temp directory (named from `prefix`) before each and
 * removed after it, and `sh` with a 20 s deadline and 1 MiB of output unless `run` says otherwise.
 * Call it at the top of a spec file, before the spec's own hooks (which may then plant files in
 * `work`).
 */
export function sandboxSpec(options: {
  prefix: string;
  open?: SandboxSettings;
  run?: Partial<SandboxRequest>;
}): SandboxSpec {
  let sandbox: Sandbox | undefined;
  let work: string | undefined;
  beforeAll(async () => {
    sandbox = await Sandbox.open(options.open);
  });
  beforeEach(async () => {
    work = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), options.prefix)));
  });
  afterEach(async () => {
    if (work) await fs.rm(work, { recursive: true, force: true });
    work = undefined;
  });
  const spec: SandboxSpec = {
    get sandbox() {
      if (!sandbox) throw new Error('sandboxSpec: the sandbox is open inside tests and hooks only');
      return sandbox;
    },
    get work() {
      if (!work) throw new Error('sandboxSpec: work exists inside tests and hooks only');
      return work;
    },
    sh: (script, extra = {}) =>
      spec.sandbox.run({
        argv: ['/bin/sh', '-c', script],
        cwd: spec.work,
        env: { PATH: '/usr/bin:/bin' },
        timeoutMs: 20_000,
        maxOutputBytes: 1024 * 1024,
        ...options.run,
        ...extra,
      }),
  };
  return spec;
}
