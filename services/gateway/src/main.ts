import { readFileSync } from 'node:fs';
import { runUntilSignalled } from '@toolgate/service-kit';
import { loadGatewayConfig } from './config';
import { startGateway } from './gateway.service';

void runUntilSignalled('gateway', () =>
  startGateway({ config: loadGatewayConfig(process.env, (p) => readFileSync(p, 'utf8')) }),
);
