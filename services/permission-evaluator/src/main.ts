import { loadEvaluatorConfig } from './config';
import { startPermissionEvaluator } from './permission-evaluator.service';
import { runUntilSignalled } from '@toolgate/service-kit';

void runUntilSignalled('permission-evaluator', () =>
  startPermissionEvaluator({ config: loadEvaluatorConfig(process.env) }),
);
