export { startGateway } from './gateway.service';
export { loadGatewayConfig, TokenGrantSchema, type GatewayConfig, type TokenGrant } from './config';
export { HTTP_STATUS_BY_CODE } from './api/error-status';
