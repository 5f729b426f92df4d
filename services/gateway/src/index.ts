export { startGateway } from './gateway.service';
export { loadGatewayConfig, type GatewayConfig, type TokenGrant } from './config';
export { GatewayMetricName } from './api/gateway-metrics';
export { GatewayApi } from './api/gateway-api';
export { HTTP_STATUS_BY_CODE } from './api/error-status';
export { toHttpError } from './http/error.filter';
export { callDigest as mcpCallDigest, ConsumedStates } from './mcp/parked-call-state';
export { openApiDocument, buildOpenApiDocument } from './http/openapi';
