import { Controller, Headers, Inject, Req, Res } from '@nestjs/common';
import type { Request, Response } from 'express';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Subjects } from '@toolgate/contracts';
import { messagingFailure } from '@toolgate/bus';
import { NATS_CONNECTION, SUBJECTS } from '@toolgate/service-kit';
import { GatewayApi } from '../api/gateway-api';
import { TokenAuth } from '../auth/token-auth';
import { toHttpError } from './error.filter';
import { Route } from './route.decorator';

const decoder = new TextDecoder();

/**
 * Server-sent events of a tenant's approval events (`pending`, `resolved`) for dashboards, chat
 * bots and the console, for any token that may read the tenant's approvals. Each event's data is
 * the journal event as JSON, as it came over core NATS: a notification to look, not a record to
 * act on (anyone allowed to publish on the approvals subject can send one); the console reads the
 * approval it names from the API before showing it.
 */
@Controller()
export class ApprovalEventsController {
  /** The open streams, each with how to end it: a stop ends them instead of waiting on them. */
  private readonly open = new Set<() => void>();
  private closing = false;

  /**
   * Ends every open stream with `event: server:restarting` (the console says "server restarting —
   * reconnecting" and disables its decisions until it is live again) and refuses new ones: an open
   * console never holds a stop. Called first by the gateway's stop.
   */
  endStreams(): void {
    this.closing = true;
    for (const end of [...this.open]) end();
  }

  constructor(
    @Inject(GatewayApi) private readonly api: GatewayApi,
    @Inject(NATS_CONNECTION) private readonly nc: NatsConnection,
    @Inject(SUBJECTS) private readonly subjects: Subjects,
  ) {}

  @Route('approvalEvents')
  async stream(
    @Headers('authorization') auth: string | undefined,
    @Req() req: Request,
    @Res() res: Response,
  ): Promise<void> {
    if (this.closing) {
      res.status(503).json({
        error: { code: 'unavailable', message: 'the gateway is restarting', details: {} },
      });
      return;
    }
    let tenant: string;
    try {
      const principal = this.api.auth.authenticate(auth);
      TokenAuth.require(principal, 'read');
      tenant = principal.tenant;
    } catch (err) {
      const { status, error } = toHttpError(err);
      res.status(status).json({ error });
      return;
    }
    // Subscribed, and the broker has the subscription, before the client hears "connected": a
    // client that lists the pending approvals once connected (as the console does) then misses no
    // notification published after its list.
    const sub = this.nc.subscribe(this.subjects.approvals(tenant, '*'));
    let closed = false;
    req.on('close', () => {
      closed = true;
      sub.unsubscribe();
    });
    try {
      await this.nc.flush();
    } catch (err) {
      sub.unsubscribe();
      const { status, error } = toHttpError(messagingFailure(err, 'the message broker') ?? err);
      if (!closed) res.status(status).json({ error });
      return;
    }
    if (closed) return;
    res.status(200);
    res.setHeader('Content-Type', 'text/event-stream');
    res.setHeader('Cache-Control', 'no-cache');
    res.setHeader('Connection', 'keep-alive');
    res.flushHeaders();
    res.write(': connected\n\n');
    const keepAlive = setInterval(() => res.write(': keep-alive\n\n'), 15_000);
    const end = () => {
      this.open.delete(end);
      clearInterval(keepAlive);
      sub.unsubscribe();
      if (closed) return;
      closed = true;
      res.end(
        `event: server:restarting\ndata: ${JSON.stringify({ message: 'server restarting — reconnecting' })}\n\n`,
      );
    };
    this.open.add(end);
    req.on('close', () => {
      this.open.delete(end);
      clearInterval(keepAlive);
    });
    void (async () => {
      for await (const msg of sub) {
        const event = msg.subject.endsWith('.pending') ? 'approval:pending' : 'approval:resolved';
        const data = oneLineJson(msg.data);
        if (data !== undefined) res.write(`event: ${event}\ndata: ${data}\n\n`);
      }
    })();
  }
}

/**
 * A notification as one line of JSON, or undefined for one that is not a JSON object: written as it
 * came, bytes with a blank line in them would start frames of their own in the stream (a forged
 * `server:restarting`, a `retry:` of a day) for every approver of the tenant.
 */
function oneLineJson(bytes: Uint8Array): string | undefined {
  try {
    const value: unknown = JSON.parse(decoder.decode(bytes));
    if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
    return JSON.stringify(value);
  } catch {
    return undefined;
  }
}
