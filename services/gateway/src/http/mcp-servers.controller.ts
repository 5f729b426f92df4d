import { Body, Controller, Headers, HttpCode, Inject, Param, Post } from '@nestjs/common';
import type { IncomingHttpHeaders } from 'node:http';
import { GatewayApi } from '../api/gateway-api';
import { TokenAuth } from '../auth/token-auth';
import { McpImporter } from '../mcp/mcp-importer';

/** `POST /v1/mcp/servers/{name}/import` (admin): put an MCP server's tools behind the gate. */
@Controller('v1')
export class McpServersController {
  constructor(
    @Inject(GatewayApi) private readonly api: GatewayApi,
    @Inject(McpImporter) private readonly importer: McpImporter,
  ) {}

  @Post('mcp/servers/:name/import')
  @HttpCode(200)
  importTools(
    @Headers() h: IncomingHttpHeaders,
    @Param('name') name: string,
    @Body() body: unknown,
  ) {
    const principal = this.api.auth.authenticate(h.authorization);
    TokenAuth.require(principal, 'admin');
    return this.importer.import(principal, name, body);
  }
}
