export { startGateway } from './gateway.service';
export { loadGatewayConfig, type GatewayConfig, type TokenGrant } from './config';
export { GatewayMetricName } from './api/gateway-metrics';
