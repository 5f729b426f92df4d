import { Body, Controller, Headers, Inject, Res } from '@nestjs/common';
import type { IncomingHttpHeaders } from 'node:http';
import type { Response } from 'express';
import { ApiOperation, NDJSON_MEDIA_TYPE, type PolicyWhatIfFrame } from '@toolgate/contracts';
import { GatewayApi } from '../api/gateway-api';
import { toHttpError } from './error.filter';
import { Route } from './route.decorator';

/**
 * `POST /v1/policy/whatif`. A plain JSON request gets the report; one that accepts
 * `application/x-ndjson` gets progress lines while the journal streams, then one line with the
 * report. A refusal before the first line (token, scope, body, candidate) is an ordinary error
 * response with its status; a failure after it is a last `{ "error": … }` line, since the status
 * has already been sent. A client that goes away stops the replay.
 */
@Controller()
export class PolicyWhatIfController {
  constructor(@Inject(GatewayApi) private readonly api: GatewayApi) {}

  @Route('whatIfPolicy')
  async whatIf(
    @Headers() h: IncomingHttpHeaders,
    @Body() body: unknown,
    @Res() res: Response,
  ): Promise<void> {
    if (!String(h.accept ?? '').includes(NDJSON_MEDIA_TYPE)) {
      const report = await this.api.call(ApiOperation.WhatIfPolicy, h.authorization, body, h);
      res.status(200).json(report);
      return;
    }
    const abort = new AbortController();
    res.on('close', () => abort.abort());
    let started = false;
    const write = (frame: PolicyWhatIfFrame) => {
      if (!started) {
        started = true;
        res.status(200).setHeader('content-type', NDJSON_MEDIA_TYPE);
        res.setHeader('cache-control', 'no-store');
      }
      res.write(`${JSON.stringify(frame)}\n`);
    };
    try {
      const report = await this.api.call(ApiOperation.WhatIfPolicy, h.authorization, body, h, {
        onProgress: (progress) => write({ progress }),
        signal: abort.signal,
      });
      write({ report } as PolicyWhatIfFrame);
    } catch (err) {
      if (!started) throw err;
      write({ error: toHttpError(err).error });
    }
    res.end();
  }
}
