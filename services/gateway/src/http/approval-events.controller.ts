import { Controller, Get, Headers, Inject, Req, Res } from '@nestjs/common';
import type { Request, Response } from 'express';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Subjects } from '@toolgate/contracts';
import { NATS_CONNECTION, SUBJECTS } from '@toolgate/service-kit';
import { GatewayApi } from '../api/gateway-api';
import { TokenAuth } from '../auth/token-auth';
import { toHttpError } from './error.filter';

const decoder = new TextDecoder();

/**
 * Server-sent events of a tenant's approval events (`pending`, `resolved`) for dashboards, chat
 * bots and the console, for any token that may read the tenant's approvals. Each event's data is
 * the journal event as JSON, as it came over core NATS: a notification to look, not a record to
 * act on (anyone allowed to publish on the approvals subject can send one); the console reads the
 * approval it names from the API before showing it.
 */
@Controller('v1')
export class ApprovalEventsController {
  constructor(
    @Inject(GatewayApi) private readonly api: GatewayApi,
    @Inject(NATS_CONNECTION) private readonly nc: NatsConnection,
    @Inject(SUBJECTS) private readonly subjects: Subjects,
  ) {}

  @Get('approvals/events')
  stream(
    @Headers('authorization') auth: string | undefined,
    @Req() req: Request,
    @Res() res: Response,
  ): void {
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
    res.status(200);
    res.setHeader('Content-Type', 'text/event-stream');
    res.setHeader('Cache-Control', 'no-cache');
    res.setHeader('Connection', 'keep-alive');
    res.flushHeaders();
    res.write(': connected\n\n');
    const sub = this.nc.subscribe(this.subjects.approvals(tenant, '*'));
    const keepAlive = setInterval(() => res.write(': keep-alive\n\n'), 15_000);
    void (async () => {
      for await (const msg of sub) {
        const event = msg.subject.endsWith('.pending') ? 'approval:pending' : 'approval:resolved';
        res.write(`event: ${event}\ndata: ${decoder.decode(msg.data)}\n\n`);
      }
    })();
    req.on('close', () => {
      clearInterval(keepAlive);
      sub.unsubscribe();
    });
  }
}
