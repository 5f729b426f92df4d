import { Body, Controller, Get, Headers, Inject, Param, Query, Res } from '@nestjs/common';
import type { IncomingHttpHeaders } from 'node:http';
import type { Response } from 'express';
import {
  ApiOperation,
  ErrorCode,
  ToolgateError,
  type SubmitDispatchResponse,
} from '@toolgate/contracts';
import { GatewayApi } from '../api/gateway-api';
import { openApiDocument } from './openapi';
import { Route } from './route.decorator';

/**
 * The versioned HTTP API. Every route is one operation of {@link GatewayApi}; its method, path and
 * status come from the contracts' route table (`@Route`).
 */
@Controller()
export class GatewayController {
  constructor(@Inject(GatewayApi) private readonly api: GatewayApi) {}

  @Get('v1/openapi.json')
  openapi(): unknown {
    return openApiDocument();
  }

  @Route('registerTool')
  registerTool(@Headers() h: IncomingHttpHeaders, @Body() body: unknown) {
    return this.api.call(ApiOperation.RegisterTool, h.authorization, body, h);
  }

  @Route('listTools')
  listTools(@Headers() h: IncomingHttpHeaders) {
    return this.api.call(ApiOperation.ListTools, h.authorization, {}, h);
  }

  @Route('listScripts')
  listScripts(@Headers() h: IncomingHttpHeaders) {
    return this.api.call(ApiOperation.ListScripts, h.authorization, {}, h);
  }

  @Route('installScript')
  installScript(
    @Headers() h: IncomingHttpHeaders,
    @Param('name') name: string,
    @Body() body: unknown,
  ) {
    if (typeof body !== 'object' || body === null || Array.isArray(body)) {
      throw new ToolgateError(ErrorCode.InvalidRequest, 'expected a JSON object body');
    }
    return this.api.call(ApiOperation.InstallScript, h.authorization, { ...body, name }, h);
  }

  @Route('submitDispatch')
  async submit(
    @Headers() h: IncomingHttpHeaders,
    @Body() body: unknown,
    @Res({ passthrough: true }) res: Response,
  ): Promise<SubmitDispatchResponse> {
    const result = (await this.api.call(
      ApiOperation.SubmitDispatch,
      h.authorization,
      body,
      h,
    )) as SubmitDispatchResponse;
    res.status(result.state === 'settled' ? 200 : 202);
    return result;
  }

  @Route('getDispatch')
  getDispatch(@Headers() h: IncomingHttpHeaders, @Param('dispatchId') dispatchId: string) {
    return this.api.call(ApiOperation.GetDispatch, h.authorization, { dispatchId }, h);
  }

  /** One chunk of a dispatch's input, post-hook input or result (`?offset=` to continue). */
  @Route('getDispatchValue')
  getDispatchValue(
    @Headers() h: IncomingHttpHeaders,
    @Param('dispatchId') dispatchId: string,
    @Param('part') part: string,
    @Query() query: Record<string, unknown>,
  ) {
    return this.api.call(
      ApiOperation.GetDispatchValue,
      h.authorization,
      { ...queryToBody(query), dispatchId, part },
      h,
    );
  }

  @Route('awaitDispatch')
  awaitDispatch(
    @Headers() h: IncomingHttpHeaders,
    @Param('runId') runId: string,
    @Param('dispatchId') dispatchId: string,
    @Query() query: Record<string, unknown>,
  ) {
    return this.api.call(
      ApiOperation.AwaitDispatch,
      h.authorization,
      { ...queryToBody(query), runId, dispatchId },
      h,
    );
  }

  @Route('getRun')
  getRun(
    @Headers() h: IncomingHttpHeaders,
    @Param('runId') runId: string,
    @Query() query: Record<string, unknown>,
  ) {
    return this.api.call(ApiOperation.GetRun, h.authorization, { ...queryToBody(query), runId }, h);
  }

  @Route('resetErrorCap')
  resetErrorCap(
    @Headers() h: IncomingHttpHeaders,
    @Param('runId') runId: string,
    @Body() body: unknown,
  ) {
    const extra = typeof body === 'object' && body !== null && !Array.isArray(body) ? body : {};
    return this.api.call(ApiOperation.ResetErrorCap, h.authorization, { ...extra, runId }, h);
  }

  @Route('putPolicy')
  putPolicy(@Headers() h: IncomingHttpHeaders, @Body() body: unknown) {
    return this.api.call(ApiOperation.PutPolicy, h.authorization, body, h);
  }

  @Route('getPolicy')
  getPolicy(@Headers() h: IncomingHttpHeaders) {
    return this.api.call(ApiOperation.GetPolicy, h.authorization, {}, h);
  }

  @Route('evaluatePolicy')
  evaluate(@Headers() h: IncomingHttpHeaders, @Body() body: unknown) {
    return this.api.call(ApiOperation.EvaluatePolicy, h.authorization, body, h);
  }

  @Route('listApprovals')
  listApprovals(@Headers() h: IncomingHttpHeaders, @Query() query: Record<string, unknown>) {
    return this.api.call(ApiOperation.ListApprovals, h.authorization, queryToBody(query), h);
  }

  /** One approval with its detail. Declared after `approvals/events` (see the module). */
  @Route('getApproval')
  getApproval(
    @Headers() h: IncomingHttpHeaders,
    @Param('key') key: string,
    @Query() query: Record<string, unknown>,
  ) {
    return this.api.call(ApiOperation.GetApproval, h.authorization, { ...query, key }, h);
  }

  @Route('whoAmI')
  whoAmI(@Headers() h: IncomingHttpHeaders) {
    return this.api.call(ApiOperation.WhoAmI, h.authorization, {}, h);
  }

  /** Put an MCP server's tools behind the gate (admin); the path names the server. */
  @Route('importMcpTools')
  importMcpTools(
    @Headers() h: IncomingHttpHeaders,
    @Param('name') server: string,
    @Body() body: unknown,
  ) {
    // The path's name wins over a body's; a body that is not an object stays as it is, refused by
    // the operation's schema.
    const given = body ?? {};
    const request =
      typeof given === 'object' && !Array.isArray(given) ? { ...given, server } : given;
    return this.api.call(ApiOperation.ImportMcpTools, h.authorization, request, h);
  }

  @Route('resolveApproval')
  resolve(@Headers() h: IncomingHttpHeaders, @Param('key') key: string, @Body() body: unknown) {
    if (typeof body !== 'object' || body === null || Array.isArray(body)) {
      throw new ToolgateError(ErrorCode.InvalidRequest, 'expected a JSON object body');
    }
    return this.api.call(ApiOperation.ResolveApproval, h.authorization, { ...body, key }, h);
  }
}

/** Query strings are text; numeric filters are converted, anything else is validated as given. */
function queryToBody(query: Record<string, unknown>): Record<string, unknown> {
  const body: Record<string, unknown> = { ...query };
  for (const key of ['minAgeMs', 'limit', 'offset', 'wait']) {
    if (typeof body[key] === 'string' && /^\d+$/.test(body[key] as string))
      body[key] = Number(body[key]);
  }
  return body;
}
