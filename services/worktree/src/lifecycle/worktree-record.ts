import { randomBytes } from 'node:crypto';
import { mkdir, open, readFile, readdir, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { PatchArtifactSchema, SUBJECT_TOKEN_PATTERN } from '@toolgate/contracts';

/**
 * The lifecycle state of one worktree:
 * - `creating`: the record was written before `git worktree add`; a crash here leaves a stale tree;
 * - `active`: the agent works in it;
 * - `retained`: kept after a failure for inspection, counted against the pin cap;
 * - `disposing`: removal began; a crash here is finished on start;
 * - `disposed`, `dropped`: gone (tombstones, so a later acquire knows whether to restart).
 */
export const WorktreeStateSchema = z.enum([
  'creating',
  'active',
  'retained',
  'disposing',
  'disposed',
  'dropped',
]);
export type WorktreeState = z.infer<typeof WorktreeStateSchema>;

const Token = z.string().regex(SUBJECT_TOKEN_PATTERN);

/** What the service keeps on its volume about one worktree, one JSON file each. */
export const WorktreeRecordSchema = z.strictObject({
  recordVersion: z.literal(1),
  worktreeId: Token,
  tenant: Token,
  runId: Token,
  agentKey: z.string().min(1).max(256),
  /** 0 for the agent's first tree; bumped each time the agent gets a fresh one. */
  generation: z.number().int().min(0),
  /** The host repository's top level (real path). */
  repo: z.string().min(1),
  /** The repository's common git directory, the key its git operations are serialised on. */
  commonDir: z.string().min(1),
  baseRef: z.string().min(1),
  baseCommit: z.string().regex(/^[0-9a-f]{40,64}$/),
  path: z.string().min(1),
  branch: z.string().min(1),
  /** The tree's own git directory (`<commonDir>/worktrees/<name>`), checked before git runs there. */
  gitDir: z.string().nullable(),
  state: WorktreeStateSchema,
  /** How many times the tree was handed out; part of the acquired event's id. */
  acquisitions: z.number().int().min(0),
  createdAt: z.string(),
  updatedAt: z.string(),
  retainedAt: z.string().optional(),
  retainReason: z.string().optional(),
  droppedReason: z.enum(['pin-cap', 'stale', 'missing']).optional(),
  /** Set on an agent's fresh tree when the previous one was dropped: the agent restarts. */
  restartedFrom: z.strictObject({ worktreeId: Token, reason: z.string().max(2048) }).optional(),
  lastArtifact: PatchArtifactSchema.optional(),
  causationId: z.string().nullable(),
  /**
   * Whether the events of the current state reached the journal. Written false with the state
   * and true after the append, so recovery re-appends what a crash may have lost (the event ids
   * are deterministic, so a re-append of one that did arrive is deduplicated).
   */
  journaled: z.boolean(),
});
export type WorktreeRecord = z.infer<typeof WorktreeRecordSchema>;

/**
 * Worktree records on disk under `<root>/state/<worktreeId>.json`. Each write goes to a temporary
 * file that is fsynced and renamed over the old one, so a crash leaves either the old or the new
 * record, never a torn one.
 */
export class WorktreeRecordStore {
  readonly dir: string;

  constructor(root: string) {
    this.dir = path.join(root, 'state');
  }

  async init(): Promise<void> {
    await mkdir(this.dir, { recursive: true });
    // Temporary files of writes a crash interrupted are garbage.
    for (const name of await readdir(this.dir)) {
      if (name.endsWith('.tmp')) await rm(path.join(this.dir, name), { force: true });
    }
  }

  /**
   * Replaces a record atomically. `durable: false` skips the fsync, for writes whose loss recovery
   * repairs anyway (marking a record journaled).
   */
  async write(
    record: WorktreeRecord,
    { durable = true }: { durable?: boolean } = {},
  ): Promise<void> {
    const file = this.fileOf(record.worktreeId);
    const tmp = `${file}.${randomBytes(4).toString('hex')}.tmp`;
    const handle = await open(tmp, 'w');
    try {
      await handle.writeFile(JSON.stringify(record, null, 2) + '\n');
      if (durable) await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(tmp, file);
  }

  async remove(worktreeId: string): Promise<void> {
    await rm(this.fileOf(worktreeId), { force: true });
  }

  /** Every readable record. A file that does not parse is set aside as `.corrupt` and reported. */
  async readAll(): Promise<{ records: WorktreeRecord[]; corrupt: string[] }> {
    const records: WorktreeRecord[] = [];
    const corrupt: string[] = [];
    for (const name of (await readdir(this.dir)).sort()) {
      if (!name.endsWith('.json')) continue;
      const file = path.join(this.dir, name);
      const parsed = WorktreeRecordSchema.safeParse(await readJson(file));
      if (parsed.success) {
        records.push(parsed.data);
      } else {
        corrupt.push(name);
        await rename(file, `${file}.corrupt`).catch(() => undefined);
      }
    }
    return { records, corrupt };
  }

  private fileOf(worktreeId: string): string {
    return path.join(this.dir, `${worktreeId}.json`);
  }
}

async function readJson(file: string): Promise<unknown> {
  try {
    return JSON.parse(await readFile(file, 'utf8')) as unknown;
  } catch {
    return undefined;
  }
}
