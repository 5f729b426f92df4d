import { mkdir, readdir, realpath, stat } from 'node:fs/promises';
import path from 'node:path';
import {
  ConfigError,
  ErrorCode,
  ToolgateError,
  isSubjectToken,
  journalEvent,
  type PatchArtifact,
  type WorktreeAcquireRequest,
  type WorktreeCollectRequest,
  type WorktreeDisposeRequest,
  type WorktreeEvent,
  type WorktreeView,
} from '@toolgate/contracts';
import { assertWorktreeGitFile, isInside } from '@toolgate/worktree-guard';
import {
  addWorktree,
  locateRepository,
  type RepositoryLocation,
  pruneWorktrees,
  removeWorktree,
  resolveCommit,
  worktreeGitDir,
} from './git-repository';
import { KeyedSerialQueue } from './keyed-serial-queue';
import { collectPatch } from './patch-collector';
import { removeTreeFiles } from './tree-files';
import type { ArtifactPort, Clock, JournalPort } from './ports';
import { agentSlotOf, branchOf, worktreeIdOf } from './worktree-ids';
import { WorktreeRecordStore, type WorktreeRecord, type WorktreeState } from './worktree-record';

/** The pin cap when none is configured: how many failed agents' trees are kept for inspection. */
export const DEFAULT_PIN_CAP = 4;

/** Options of a {@link WorktreeManager}. */
export interface WorktreeManagerOptions {
  /** Where trees (`<root>/trees`) and their records (`<root>/state`) live. Must be outside any host repository. */
  root: string;
  journal: JournalPort;
  artifacts: ArtifactPort;
  /** Retained trees kept at most; past it the oldest retained tree is dropped. Default 4. */
  pinCap?: number;
  /** The host repository an acquire without `repo` branches from. */
  defaultRepo?: string;
  /** Whether a dispose with outcome `error` retains the tree when the request does not say. Default false. */
  keepOnError?: boolean;
  now?: Clock;
}

/** Acquire a tree for an agent spawn: the wire request, defined once in contracts. */
export type AcquireCommand = WorktreeAcquireRequest;
/** Collect what a tree changed. */
export type CollectCommand = WorktreeCollectRequest;
/** Dispose of a tree after its agent finished; only outcome `error` can retain it. */
export type DisposeCommand = WorktreeDisposeRequest;

/** What {@link WorktreeManager.acquire} answers. */
export interface AcquireResult {
  worktree: WorktreeView;
  /** False when an existing tree was handed out again. */
  created: boolean;
  /**
   * Present when the agent's previous tree had been dropped: the agent must restart from its
   * beginning on this fresh tree, never resume as though its earlier changes were there.
   */
  restarted?: { droppedWorktreeId: string; reason: string };
}

/** What {@link WorktreeManager.start} found and did. */
export interface RecoveryReport {
  /** Active trees taken back as they were. */
  adopted: string[];
  /** Retained trees taken back (still counted against the pin cap). */
  retained: string[];
  /** Trees whose directory was gone or broken, and pin-cap drops. */
  dropped: { worktreeId: string; reason: 'pin-cap' | 'stale' | 'missing' }[];
  /** Disposals a crash interrupted, finished. */
  finished: string[];
  /** Half-made trees and directories no record owns, removed. */
  removedStale: string[];
  /** Record files that did not parse, set aside. */
  corrupt: string[];
}

const LIVE: ReadonlySet<WorktreeState> = new Set<WorktreeState>(['active', 'retained']);

/**
 * The worktree lifecycle: acquire a git worktree per agent spawn, collect its changes as a patch
 * artifact, dispose of it (or retain it after a failure, within a pin cap), and reconcile the
 * records on disk with the trees on disk when it starts.
 *
 * Framework-free: git through simple-git, state in JSON files under the root, events through a
 * {@link JournalPort}, patches through an {@link ArtifactPort}. Nothing here ever writes to the
 * host's working tree or applies a patch.
 */
export class WorktreeManager {
  private readonly journal: JournalPort;
  private readonly artifacts: ArtifactPort;
  private readonly pinCap: number;
  private readonly keepOnErrorDefault: boolean;
  private readonly defaultRepo: string | undefined;
  private readonly now: Clock;
  private readonly configuredRoot: string;
  private root = '';
  private treesDir = '';
  /** Where a collect mirrors a tree (see `collectPatch`): under the root, out of every call's reach. */
  private scratchDir = '';
  /** Where a removal moves what is nested too deep to remove in place (see `removeTreeFiles`). */
  private spillDir = '';
  private store: WorktreeRecordStore | null = null;
  private readonly records = new Map<string, WorktreeRecord>();
  /** Trees whose current state this process has journaled (see {@link catchUpJournal}). */
  private readonly stated = new Set<string>();
  /** Agent slot → id of its newest tree (the highest generation). */
  private readonly latestBySlot = new Map<string, string>();
  private readonly slotQueue = new KeyedSerialQueue();
  private readonly treeQueue = new KeyedSerialQueue();
  private readonly repoQueue = new KeyedSerialQueue();
  private readonly pinQueue = new KeyedSerialQueue();
  /** Repository locations by the path acquires named; a repository does not move under a running service. */
  private readonly locations = new Map<string, RepositoryLocation>();

  constructor(options: WorktreeManagerOptions) {
    if (!path.isAbsolute(options.root)) {
      throw new ConfigError(
        `worktree root must be an absolute path, got ${JSON.stringify(options.root)}`,
      );
    }
    const pinCap = options.pinCap ?? DEFAULT_PIN_CAP;
    if (!Number.isInteger(pinCap) || pinCap < 0) {
      throw new ConfigError(`pin cap must be a non-negative integer, got ${String(pinCap)}`);
    }
    this.configuredRoot = options.root;
    this.journal = options.journal;
    this.artifacts = options.artifacts;
    this.pinCap = pinCap;
    this.keepOnErrorDefault = options.keepOnError ?? false;
    this.defaultRepo = options.defaultRepo;
    this.now = options.now ?? (() => new Date());
  }

  /** Constructs a manager and runs its {@link start} recovery. */
  static async open(
    options: WorktreeManagerOptions,
  ): Promise<{ manager: WorktreeManager; recovery: RecoveryReport }> {
    const manager = new WorktreeManager(options);
    const recovery = await manager.start();
    return { manager, recovery };
  }

  /**
   * Loads the records under the root and reconciles them with the disk: half-made trees and
   * unowned directories are removed, interrupted disposals finished, trees whose directory is gone
   * (or whose `.git` file no longer points at its repository) dropped, live ones re-adopted, each
   * repository's stale worktree metadata pruned, the pin cap enforced, and events a crash may have
   * kept from the journal appended again. Must run before any other operation.
   */
  async start(): Promise<RecoveryReport> {
    await mkdir(this.configuredRoot, { recursive: true });
    this.root = await realpath(this.configuredRoot);
    this.treesDir = path.join(this.root, 'trees');
    await mkdir(this.treesDir, { recursive: true });
    this.scratchDir = path.join(this.root, 'scratch');
    this.spillDir = path.join(this.root, 'spill');
    // A collect's mirror, or a removal's spill, left by a crash (each spills into the other).
    await this.removeFiles(this.scratchDir, this.spillDir);
    await this.removeFiles(this.spillDir, this.scratchDir);
    const store = new WorktreeRecordStore(this.root);
    await store.init();
    this.store = store;
    this.records.clear();
    this.stated.clear();
    this.latestBySlot.clear();

    const report: RecoveryReport = {
      adopted: [],
      retained: [],
      dropped: [],
      finished: [],
      removedStale: [],
      corrupt: [],
    };
    const { records, corrupt } = await store.readAll();
    report.corrupt = corrupt;
    const repos = new Set<string>();

    for (const record of records) {
      const repoExists = await isDirectory(record.repo);
      if (repoExists) repos.add(record.repo);
      switch (record.state) {
        case 'creating':
          // The acquire never answered, so no agent has this tree: remove it without a trace;
          // the caller's retry makes it again under the same id.
          if (repoExists) await this.removeTree(record).catch(() => undefined);
          // Left for the next start when its files cannot all be removed now.
          if (!(await this.removeFiles(record.path))) continue;
          await store.remove(record.worktreeId);
          report.removedStale.push(record.worktreeId);
          continue;
        case 'disposing':
          if (repoExists) await this.removeTree(record).catch(() => undefined);
          this.remember(record);
          // Still `disposing` when its files cannot all be removed now: a dispose tries again.
          if (!(await this.removeFiles(record.path))) continue;
          await this.transition(record, { state: 'disposed' });
          report.finished.push(record.worktreeId);
          continue;
        case 'active':
        case 'retained': {
          this.remember(record);
          const health = repoExists ? await this.treeHealth(record) : 'missing';
          if (health !== 'ok') {
            if (
              !(await this.drop(record, health).then(
                () => true,
                () => false,
              ))
            )
              continue;
            report.dropped.push({ worktreeId: record.worktreeId, reason: health });
            continue;
          }
          if (!record.journaled) await this.catchUpJournal(record);
          (record.state === 'active' ? report.adopted : report.retained).push(record.worktreeId);
          continue;
        }
        case 'disposed':
        case 'dropped':
          this.remember(record);
          if (!record.journaled) await this.catchUpJournal(record);
          continue;
      }
    }

    // Directories under trees/ that no live record owns were left by a crash before their record
    // was written (or after it was removed).
    for (const name of await readdir(this.treesDir)) {
      const owner = this.records.get(name);
      if (owner && LIVE.has(owner.state)) continue;
      if (await this.removeFiles(path.join(this.treesDir, name))) report.removedStale.push(name);
    }
    for (const repo of repos) {
      const commonDir = records.find((r) => r.repo === repo)?.commonDir ?? repo;
      await this.repoQueue.run(commonDir, () => pruneWorktrees(repo)).catch(() => undefined);
    }
    report.dropped.push(...(await this.enforcePinCap()));
    return report;
  }

  /**
   * Hands an agent spawn its worktree: the existing one when the spawn already has a live tree
   * (idempotent, also for a retained tree, which becomes active again), otherwise a new linked
   * worktree of `repo` at `ref` (HEAD by default) on a branch `toolgate/<worktreeId>`. When the
   * spawn's previous tree was dropped, the new tree comes with `restarted` and a
   * `worktree-restarted` event: the agent starts over instead of resuming into a tree that is gone.
   *
   * A repository path that is not a git working tree, or an unknown ref, is a `ConfigError`.
   */
  async acquire(command: AcquireCommand): Promise<AcquireResult> {
    this.assertStarted();
    assertToken('tenant', command.tenant);
    assertToken('runId', command.runId);
    if (
      typeof command.agentKey !== 'string' ||
      command.agentKey.length < 1 ||
      command.agentKey.length > 256
    ) {
      throw new ToolgateError(ErrorCode.InvalidRequest, 'agentKey must be 1-256 characters', {
        details: { field: 'agentKey' },
      });
    }
    const slot = agentSlotOf(command.tenant, command.runId, command.agentKey);
    return this.slotQueue.run(slot, async () => {
      const latestId = this.latestBySlot.get(slot);
      let previous = latestId === undefined ? undefined : this.records.get(latestId);
      if (previous && LIVE.has(previous.state)) {
        const treeId = previous.worktreeId;
        const reused = await this.treeQueue.run(treeId, async () => {
          // Re-read under the tree's lock: a dispose may have ended it while this acquire waited.
          const current = this.records.get(treeId);
          if (!current || !LIVE.has(current.state)) return null;
          const health = await this.treeHealth(current);
          if (health !== 'ok') {
            await this.drop(current, health);
            return null;
          }
          if (current.state === 'retained') {
            // Taken back from inspection: active again, and no longer pinned.
            return this.transition(current, {
              state: 'active',
              acquisitions: current.acquisitions + 1,
              retainedAt: undefined,
              retainReason: undefined,
              causationId: command.causationId ?? null,
            });
          }
          return this.catchUpJournal(current);
        });
        if (reused) return { worktree: toView(reused), created: false };
        previous = this.records.get(treeId);
      }

      const repo = command.repo ?? this.defaultRepo;
      if (repo === undefined) {
        throw new ConfigError(
          'the acquire names no repository and the service has no default one',
          {
            details: { field: 'repo' },
          },
        );
      }
      const location = this.locations.get(repo) ?? (await locateRepository(repo));
      this.locations.set(repo, location);
      if (isInside(location.toplevel, this.root)) {
        throw new ConfigError(
          `the worktree root ${this.root} is inside the repository ${location.toplevel}`,
          {
            details: { root: this.root, repo: location.toplevel },
          },
        );
      }
      const baseRef = command.ref ?? 'HEAD';
      const baseCommit = await resolveCommit(location.toplevel, baseRef);

      const generation = previous ? previous.generation + 1 : 0;
      const worktreeId = worktreeIdOf(command.tenant, command.runId, command.agentKey, generation);
      const restartedFrom =
        previous?.state === 'dropped'
          ? {
              worktreeId: previous.worktreeId,
              reason: `its worktree was dropped (${previous.droppedReason ?? 'unknown'})`,
            }
          : undefined;
      const at = this.now().toISOString();
      const treePath = path.join(this.treesDir, worktreeId);
      const creating: WorktreeRecord = {
        recordVersion: 1,
        worktreeId,
        tenant: command.tenant,
        runId: command.runId,
        agentKey: command.agentKey,
        generation,
        repo: location.toplevel,
        commonDir: location.commonDir,
        baseRef,
        baseCommit,
        path: treePath,
        branch: branchOf(worktreeId),
        gitDir: null,
        state: 'creating',
        acquisitions: 0,
        createdAt: at,
        updatedAt: at,
        ...(restartedFrom ? { restartedFrom } : {}),
        causationId: command.causationId ?? null,
        journaled: true,
      };
      // Recorded before git runs, so a crash inside `worktree add` leaves a record recovery can clean.
      await this.requireStore().write(creating);
      this.remember(creating);
      try {
        await this.repoQueue.run(location.commonDir, () =>
          addWorktree(location.toplevel, treePath, creating.branch, baseCommit),
        );
      } catch (err) {
        await this.repoQueue
          .run(location.commonDir, () => this.removeTree(creating))
          .catch(() => undefined);
        await this.requireStore().remove(worktreeId);
        this.forget(creating);
        throw new ToolgateError(ErrorCode.Internal, `git worktree add failed for ${worktreeId}`, {
          cause: err,
        });
      }
      const gitDir = await worktreeGitDir(treePath);
      const active = await this.transition(creating, { state: 'active', gitDir, acquisitions: 1 });
      return {
        worktree: toView(active),
        created: true,
        ...(restartedFrom
          ? {
              restarted: {
                droppedWorktreeId: restartedFrom.worktreeId,
                reason: restartedFrom.reason,
              },
            }
          : {}),
      };
    });
  }

  /**
   * Collects what the tree changed against its base commit (see {@link collectPatch}), stores the
   * patch through the artifact port under a content-addressed ref, and journals it. The tree,
   * its index and its branch are left as they were. Allowed on active and retained trees.
   */
  async collect(command: CollectCommand): Promise<PatchArtifact> {
    this.assertStarted();
    return this.treeQueue.run(command.worktreeId, async () => {
      const record = this.liveRecord(command.worktreeId);
      await this.assertTreeIntact(record);
      const collected = await collectPatch(
        record.path,
        record.gitDir ?? '',
        record.commonDir,
        record.baseCommit,
        this.scratchDir,
      );
      const artifact: PatchArtifact = {
        kind: 'patch',
        ref: `patches/${record.worktreeId}/${collected.sha256}.patch`,
        files: collected.files,
        baseCommit: record.baseCommit,
        bytes: collected.patch.byteLength,
        sha256: collected.sha256,
      };
      await this.artifacts.put(artifact.ref, collected.patch);
      const updated: WorktreeRecord = {
        ...record,
        lastArtifact: artifact,
        updatedAt: this.now().toISOString(),
      };
      await this.requireStore().write(updated);
      this.remember(updated);
      await this.journal.append(
        journalEvent({
          ...this.envelope(
            updated,
            `${updated.worktreeId}:collected:${collected.sha256.slice(0, 16)}`,
            command.causationId,
          ),
          type: 'worktree-collected',
          artifact,
        }),
      );
      return artifact;
    });
  }

  /**
   * Ends a tree's life. A failed agent's tree is retained when `keepOnError` says so (and the
   * oldest retained trees past the pin cap are dropped); otherwise the tree and its branch are
   * removed. Idempotent: disposing a disposed or dropped tree answers its final state again.
   */
  async dispose(command: DisposeCommand): Promise<WorktreeView> {
    this.assertStarted();
    const result = await this.treeQueue.run(command.worktreeId, async () => {
      const record = this.records.get(command.worktreeId);
      if (!record || record.state === 'creating') {
        throw new ToolgateError(ErrorCode.NotFound, `no worktree ${command.worktreeId}`, {
          details: { worktreeId: command.worktreeId },
        });
      }
      if (record.state === 'disposed' || record.state === 'dropped') {
        return this.catchUpJournal(record);
      }
      const keep = command.outcome === 'error' && (command.keepOnError ?? this.keepOnErrorDefault);
      if (keep) {
        if (record.state === 'retained') return this.catchUpJournal(record);
        const at = this.now().toISOString();
        return this.transition(record, {
          state: 'retained',
          retainedAt: at,
          retainReason: command.reason ?? 'the agent failed',
          causationId: command.causationId ?? null,
        });
      }
      const disposing = await this.transition(record, {
        state: 'disposing',
        causationId: command.causationId ?? null,
      });
      await this.repoQueue.run(record.commonDir, () => this.removeTree(disposing));
      return this.transition(disposing, { state: 'disposed' });
    });
    if (result.state === 'retained') await this.enforcePinCap();
    return toView(this.records.get(result.worktreeId) ?? result);
  }

  /** The tree with this id, in any state, or undefined. */
  get(worktreeId: string): WorktreeView | undefined {
    const record = this.records.get(worktreeId);
    return record ? toView(record) : undefined;
  }

  /** Every known tree (live ones and tombstones). */
  list(): WorktreeView[] {
    return [...this.records.values()].map(toView);
  }

  /** The patch bytes of an artifact ref, through the artifact port. */
  readPatch(ref: string): Promise<Uint8Array | null> {
    return this.artifacts.get(ref);
  }

  /** Drops the oldest retained trees past the pin cap. Serialised so concurrent disposals count once. */
  private enforcePinCap(): Promise<{ worktreeId: string; reason: 'pin-cap' }[]> {
    return this.pinQueue.run('pin-cap', async () => {
      const dropped: { worktreeId: string; reason: 'pin-cap' }[] = [];
      const retained = [...this.records.values()]
        .filter((r) => r.state === 'retained')
        .sort(
          (a, b) =>
            (a.retainedAt ?? '').localeCompare(b.retainedAt ?? '') ||
            a.worktreeId.localeCompare(b.worktreeId),
        );
      const excess = retained.length - this.pinCap;
      for (const victim of retained.slice(0, Math.max(0, excess))) {
        const done = await this.treeQueue.run(victim.worktreeId, async () => {
          const current = this.records.get(victim.worktreeId);
          if (current?.state !== 'retained') return false;
          await this.drop(current, 'pin-cap');
          return true;
        });
        if (done) dropped.push({ worktreeId: victim.worktreeId, reason: 'pin-cap' });
      }
      return dropped;
    });
  }

  /** Removes a tree that did not end by its agent's disposal and records why. */
  private async drop(
    record: WorktreeRecord,
    reason: 'pin-cap' | 'stale' | 'missing',
  ): Promise<WorktreeRecord> {
    if (await isDirectory(record.repo)) {
      await this.repoQueue
        .run(record.commonDir, () => this.removeTree(record))
        .catch(() => undefined);
    }
    await removeTreeFiles(record.path, this.spillDir);
    return this.transition(record, {
      state: 'dropped',
      droppedReason: reason,
      retainedAt: undefined,
    });
  }

  private async removeTree(record: WorktreeRecord): Promise<void> {
    await removeWorktree(record.repo, record.path, record.branch, this.spillDir);
  }

  /**
   * Removes a directory the service owns following no link ({@link removeTreeFiles}); false, and
   * nothing thrown, when something is left: at start-up one tree a call filled with what cannot be
   * removed must not keep the service from starting.
   */
  private async removeFiles(dir: string, spill = this.spillDir): Promise<boolean> {
    try {
      await removeTreeFiles(dir, spill);
      return true;
    } catch {
      return false;
    }
  }

  /** Whether a live tree is still there and still the repository's: `ok`, `missing` or `stale`. */
  private async treeHealth(record: WorktreeRecord): Promise<'ok' | 'missing' | 'stale'> {
    if (!(await isDirectory(record.path))) return 'missing';
    try {
      await this.assertTreeIntact(record);
      return 'ok';
    } catch {
      return 'stale';
    }
  }

  /**
   * Refuses to run git in a tree whose top is no longer a real directory or whose `.git` file was
   * redirected: git would then read (and `add` would write) another repository.
   */
  private async assertTreeIntact(record: WorktreeRecord): Promise<void> {
    const real = await realpath(record.path).catch(() => null);
    if (real !== record.path) {
      throw new ToolgateError(
        ErrorCode.PathOutsideScope,
        `worktree ${record.worktreeId} is no longer where it was made`,
        {
          details: { worktreeId: record.worktreeId, reason: 'moved' },
        },
      );
    }
    if (record.gitDir === null) {
      throw new ToolgateError(
        ErrorCode.Internal,
        `worktree ${record.worktreeId} has no git directory recorded`,
      );
    }
    await assertWorktreeGitFile(record.path, record.gitDir);
  }

  /**
   * Moves a record to its next state: written (durably) with `journaled: false`, its events
   * appended, then marked journaled. A crash in between leaves a record recovery re-journals.
   */
  private async transition(
    record: WorktreeRecord,
    change: Partial<WorktreeRecord>,
  ): Promise<WorktreeRecord> {
    const store = this.requireStore();
    const next: WorktreeRecord = stripUndefined({
      ...record,
      ...change,
      updatedAt: this.now().toISOString(),
      journaled: false,
    });
    const silent = next.state === 'creating' || next.state === 'disposing';
    await store.write(next);
    this.remember(next);
    if (silent) return next;
    return this.catchUpJournal(next);
  }

  /**
   * Appends the events of the record's current state unless this process already has, then
   * marks it journaled. They are appended after a transition, after an append that failed or a
   * crash interrupted, and the first time this process hands out or disposes a tree it adopted at
   * start (re-stated under the same ids). Handing a tree out again does not re-publish: that was a
   * broker round trip on every worktree-isolated tool call, and past the stream's duplicate window
   * it stored the same event again.
   */
  private async catchUpJournal(record: WorktreeRecord): Promise<WorktreeRecord> {
    if (record.journaled && this.stated.has(record.worktreeId)) return record;
    for (const event of this.eventsOf(record)) await this.journal.append(event);
    this.stated.add(record.worktreeId);
    if (record.journaled) return record;
    const journaled: WorktreeRecord = { ...record, journaled: true };
    await this.requireStore().write(journaled, { durable: false });
    this.remember(journaled);
    return journaled;
  }

  private eventsOf(record: WorktreeRecord): WorktreeEvent[] {
    const id = record.worktreeId;
    switch (record.state) {
      case 'active': {
        const events: WorktreeEvent[] = [];
        if (record.restartedFrom) {
          events.push(
            journalEvent({
              ...this.envelope(record, `${id}:restarted`),
              type: 'worktree-restarted',
              agentKey: record.agentKey,
              droppedWorktreeId: record.restartedFrom.worktreeId,
              reason: record.restartedFrom.reason,
            }),
          );
        }
        events.push(
          journalEvent({
            ...this.envelope(record, `${id}:acquired:${record.acquisitions}`),
            type: 'worktree-acquired',
            agentKey: record.agentKey,
            repo: record.repo,
            baseRef: record.baseRef,
            baseCommit: record.baseCommit,
            path: record.path,
            branch: record.branch,
          }),
        );
        return events;
      }
      case 'retained':
        return [
          journalEvent({
            ...this.envelope(record, `${id}:retained:${record.acquisitions}`),
            type: 'worktree-retained',
            reason: (record.retainReason ?? 'the agent failed').slice(0, 2048),
          }),
        ];
      case 'dropped':
        return [
          journalEvent({
            ...this.envelope(record, `${id}:dropped`),
            type: 'worktree-dropped',
            reason: record.droppedReason ?? 'stale',
          }),
        ];
      case 'disposed':
        return [
          journalEvent({ ...this.envelope(record, `${id}:disposed`), type: 'worktree-disposed' }),
        ];
      default:
        return [];
    }
  }

  private envelope(record: WorktreeRecord, id: string, causationId?: string | null) {
    return {
      id,
      tenant: record.tenant,
      runId: record.runId,
      dispatchId: record.worktreeId,
      worktreeId: record.worktreeId,
      at: record.updatedAt,
      causationId: causationId === undefined ? record.causationId : causationId,
    };
  }

  private liveRecord(worktreeId: string): WorktreeRecord {
    const record = this.records.get(worktreeId);
    if (!record || record.state === 'creating') {
      throw new ToolgateError(ErrorCode.NotFound, `no worktree ${worktreeId}`, {
        details: { worktreeId },
      });
    }
    if (!LIVE.has(record.state)) {
      throw new ToolgateError(ErrorCode.Conflict, `worktree ${worktreeId} is ${record.state}`, {
        details: { worktreeId, state: record.state },
      });
    }
    return record;
  }

  private remember(record: WorktreeRecord): void {
    this.records.set(record.worktreeId, record);
    const slot = agentSlotOf(record.tenant, record.runId, record.agentKey);
    const latestId = this.latestBySlot.get(slot);
    const latest = latestId === undefined ? undefined : this.records.get(latestId);
    if (!latest || latest.generation <= record.generation)
      this.latestBySlot.set(slot, record.worktreeId);
  }

  private forget(record: WorktreeRecord): void {
    this.records.delete(record.worktreeId);
    this.stated.delete(record.worktreeId);
    const slot = agentSlotOf(record.tenant, record.runId, record.agentKey);
    if (this.latestBySlot.get(slot) === record.worktreeId) {
      this.latestBySlot.delete(slot);
      for (const other of this.records.values()) {
        if (agentSlotOf(other.tenant, other.runId, other.agentKey) === slot) this.remember(other);
      }
    }
  }

  private assertStarted(): void {
    this.requireStore();
  }

  private requireStore(): WorktreeRecordStore {
    if (this.store === null)
      throw new ToolgateError(ErrorCode.Internal, 'WorktreeManager.start() has not run');
    return this.store;
  }
}

function toView(record: WorktreeRecord): WorktreeView {
  const view: WorktreeView = {
    worktreeId: record.worktreeId,
    tenant: record.tenant,
    runId: record.runId,
    agentKey: record.agentKey,
    generation: record.generation,
    repo: record.repo,
    baseRef: record.baseRef,
    baseCommit: record.baseCommit,
    path: record.path,
    branch: record.branch,
    state: record.state,
    createdAt: record.createdAt,
    updatedAt: record.updatedAt,
  };
  if (record.retainedAt !== undefined) view.retainedAt = record.retainedAt;
  if (record.droppedReason !== undefined) view.droppedReason = record.droppedReason;
  if (record.lastArtifact !== undefined) view.lastArtifact = record.lastArtifact;
  return view;
}

function assertToken(field: string, value: unknown): void {
  if (!isSubjectToken(value)) {
    throw new ToolgateError(
      ErrorCode.InvalidRequest,
      `${field} must be 1-128 characters of [A-Za-z0-9_-]`,
      {
        details: { field },
      },
    );
  }
}

async function isDirectory(p: string): Promise<boolean> {
  return stat(p).then(
    (s) => s.isDirectory(),
    () => false,
  );
}

function stripUndefined<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T;
}
