import { realpath } from 'node:fs/promises';
import path from 'node:path';
import type { Msg, NatsConnection, Subscription } from '@nats-io/transport-node';
import { headersOf } from '@toolgate/bus';
import type { z } from 'zod';
import {
  ConsumerRole,
  ErrorCode,
  ToolgateError,
  WorktreeAcquireRequestSchema,
  WorktreeCollectRequestSchema,
  WorktreeDisposeRequestSchema,
  WorktreeOperation,
  requestSigningOf,
  toWireError,
  type ServiceKeys,
  type Subjects,
  type WireError,
  type WorktreeAcquireReply,
  type WorktreeCollectReply,
  type WorktreeDisposeReply,
} from '@toolgate/contracts';
import { Attr, annotate, consumerSpan } from '@toolgate/telemetry';
import { isInside } from '@toolgate/worktree-guard';
import { checkSignedRequest, metricsFor } from '@toolgate/service-kit';
import type { WorktreeManager } from '../lifecycle/worktree-manager';

/** Options of {@link serveWorktreeRequests}. */
export interface WorktreeRequestOptions {
  /** The service's keys: only signed requests are answered (see `requestSigningOf`). */
  keys: ServiceKeys;
  /**
   * Repositories an acquire may name (a request's `repo` must be one of them or inside one).
   * Unset: any path the service can read, which is only right when every requester is trusted.
   */
  allowedRepos?: string[];
  /** Told about errors that reach the caller as `internal` (their detail stays in the process). */
  onInternalError?: (err: unknown, operation: WorktreeOperation) => void;
}

/** The running request handlers. */
export interface WorktreeRequestServer {
  /** Stops taking requests and waits for the ones in flight to be answered. */
  stop(): Promise<void>;
}

type ErrorReply = { ok: false; error: WireError };

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * Answers `subjects.worktree('acquire' | 'collect' | 'dispose')` with the lifecycle manager.
 * Payloads are validated with the contracts' zod schemas; every reply is `{ ok: true, ... }` or
 * `{ ok: false, error: WireError }`, never a thrown error or a timeout for a bad request. Replicas
 * share a queue group, which is only sound when they also share the worktree root's volume.
 * Each request runs in a consumer span continuing the caller's trace. Only signed requests are
 * answered (`requestSigningOf`: an acquire from the executor, a collect or dispose from the
 * executor or an operator); anything else gets `unauthorized` before its body is read.
 */
export async function serveWorktreeRequests(
  nc: NatsConnection,
  subjects: Subjects,
  manager: WorktreeManager,
  options: WorktreeRequestOptions,
): Promise<WorktreeRequestServer> {
  const allowed = options.allowedRepos
    ? await Promise.all(options.allowedRepos.map((r) => realpath(r).catch(() => path.resolve(r))))
    : undefined;
  const onInternal =
    options.onInternalError ?? ((err, op) => console.error(`worktree ${op} failed`, err));
  const inFlight = new Set<Promise<void>>();
  const queue = subjects.consumer(ConsumerRole.Worktree);
  const keys = options.keys;
  const untrusted = metricsFor(nc).untrustedCounter('request');

  const handlers: Record<WorktreeOperation, (body: unknown) => Promise<object>> = {
    async acquire(body): Promise<WorktreeAcquireReply> {
      const request = parse(WorktreeAcquireRequestSchema, body);
      annotate({ [Attr.Tenant]: request.tenant, [Attr.RunId]: request.runId });
      if (allowed && request.repo !== undefined) {
        const real = await realpath(request.repo).catch(() => path.resolve(request.repo ?? '/'));
        if (!allowed.some((root) => isInside(root, real))) {
          throw new ToolgateError(
            ErrorCode.Forbidden,
            `repository ${request.repo} is not served here`,
            {
              details: { repo: request.repo },
            },
          );
        }
      }
      const result = await manager.acquire(request);
      annotate({ [Attr.DispatchId]: result.worktree.worktreeId });
      return { ok: true, path: result.worktree.path, ...result };
    },
    async collect(body): Promise<WorktreeCollectReply> {
      const request = parse(WorktreeCollectRequestSchema, body);
      annotate({ [Attr.DispatchId]: request.worktreeId });
      return { ok: true, artifact: await manager.collect(request) };
    },
    async dispose(body): Promise<WorktreeDisposeReply> {
      const request = parse(WorktreeDisposeRequestSchema, body);
      annotate({ [Attr.DispatchId]: request.worktreeId });
      return { ok: true, worktree: await manager.dispose(request) };
    },
  };

  const subscriptions: Subscription[] = [];
  for (const operation of Object.values(WorktreeOperation)) {
    const subject = subjects.worktree(operation);
    const { requesters } = requestSigningOf(subjects, subject);
    const handle = async (msg: Msg): Promise<void> => {
      const reply = await consumerSpan(
        subject,
        headersOf(msg),
        { [Attr.MessagingConsumerGroup]: queue },
        async () => {
          try {
            checkSignedRequest(keys, msg, requesters, untrusted);
            const body = decodeJson(msg.data);
            const answer = await handlers[operation](body);
            annotate({ [Attr.Outcome]: 'ok' });
            return answer;
          } catch (err) {
            const error = toWireError(err);
            if (error.code === ErrorCode.Internal) onInternal(err, operation);
            annotate({ [Attr.Outcome]: 'error', [Attr.ErrorCode]: error.code });
            return { ok: false, error } satisfies ErrorReply;
          }
        },
      );
      if (msg.reply) msg.respond(encoder.encode(JSON.stringify(reply)));
    };
    subscriptions.push(
      nc.subscribe(subject, {
        queue,
        callback: (err, msg) => {
          if (err) return;
          const task = handle(msg).catch((e: unknown) => onInternal(e, operation));
          inFlight.add(task);
          void task.finally(() => inFlight.delete(task));
        },
      }),
    );
  }

  return {
    async stop() {
      for (const sub of subscriptions) sub.unsubscribe();
      await Promise.all([...inFlight]);
    },
  };
}

function decodeJson(data: Uint8Array): unknown {
  try {
    return JSON.parse(decoder.decode(data)) as unknown;
  } catch {
    throw new ToolgateError(ErrorCode.InvalidRequest, 'the request body is not JSON');
  }
}

function parse<S extends z.ZodType>(schema: S, body: unknown): z.output<S> {
  const parsed = schema.safeParse(body);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => ({
      path: i.path.map((p) => (typeof p === 'symbol' ? String(p) : p)),
      message: i.message,
    }));
    throw new ToolgateError(
      ErrorCode.InvalidRequest,
      `invalid worktree request: ${issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ')}`,
      {
        details: { issues },
      },
    );
  }
  return parsed.data;
}
