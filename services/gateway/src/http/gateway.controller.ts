import { Body, Controller, Get, Headers, HttpCode, Inject, Param, Post, Put, Query, Res } from '@nestjs/common';
import type { Response } from 'express';
import { ApiOperation, ErrorCode, ToolgateError, type SubmitDispatchResponse } from '@toolgate/contracts';
import { GatewayApi } from '../api/gateway-api';
import { OPENAPI_DOCUMENT } from './openapi';

/** The versioned HTTP API. Every route is one operation of {@link GatewayApi}. */
@Controller('v1')
export class GatewayController {
  constructor(@Inject(GatewayApi) private readonly api: GatewayApi) {}

  @Get('openapi.json')
  openapi(): unknown {
    return OPENAPI_DOCUMENT;
  }

  @Post('tools')
  @HttpCode(201)
  registerTool(@Headers('authorization') auth: string | undefined, @Body() body: unknown) {
    return this.api.call(ApiOperation.RegisterTool, auth, body);
  }

  @Get('tools')
  listTools(@Headers('authorization') auth: string | undefined) {
    return this.api.call(ApiOperation.ListTools, auth, {});
  }

  @Post('dispatches')
  async submit(
    @Headers('authorization') auth: string | undefined,
    @Body() body: unknown,
    @Res({ passthrough: true }) res: Response,
  ): Promise<SubmitDispatchResponse> {
    const result = (await this.api.call(ApiOperation.SubmitDispatch, auth, body)) as SubmitDispatchResponse;
    res.status(result.state === 'settled' ? 200 : 202);
    return result;
  }

  @Get('dispatches/:dispatchId')
  getDispatch(@Headers('authorization') auth: string | undefined, @Param('dispatchId') dispatchId: string) {
    return this.api.call(ApiOperation.GetDispatch, auth, { dispatchId });
  }

  @Get('runs/:runId')
  getRun(@Headers('authorization') auth: string | undefined, @Param('runId') runId: string) {
    return this.api.call(ApiOperation.GetRun, auth, { runId });
  }

  @Put('policy')
  putPolicy(@Headers('authorization') auth: string | undefined, @Body() body: unknown) {
    return this.api.call(ApiOperation.PutPolicy, auth, body);
  }

  @Get('policy')
  getPolicy(@Headers('authorization') auth: string | undefined) {
    return this.api.call(ApiOperation.GetPolicy, auth, {});
  }

  @Post('policy/evaluate')
  @HttpCode(200)
  evaluate(@Headers('authorization') auth: string | undefined, @Body() body: unknown) {
    return this.api.call(ApiOperation.EvaluatePolicy, auth, body);
  }

  @Get('approvals')
  listApprovals(@Headers('authorization') auth: string | undefined, @Query() query: Record<string, unknown>) {
    return this.api.call(ApiOperation.ListApprovals, auth, queryToBody(query));
  }

  @Post('approvals/:key/resolve')
  @HttpCode(200)
  resolve(@Headers('authorization') auth: string | undefined, @Param('key') key: string, @Body() body: unknown) {
    if (typeof body !== 'object' || body === null || Array.isArray(body)) {
      throw new ToolgateError(ErrorCode.InvalidRequest, 'expected a JSON object body');
    }
    return this.api.call(ApiOperation.ResolveApproval, auth, { ...body, key });
  }
}

/** Query strings are text; numeric filters are converted, anything else is validated as given. */
function queryToBody(query: Record<string, unknown>): Record<string, unknown> {
  const body: Record<string, unknown> = { ...query };
  for (const key of ['minAgeMs', 'limit']) {
    if (typeof body[key] === 'string' && /^\d+$/.test(body[key] as string)) body[key] = Number(body[key]);
  }
  return body;
}
