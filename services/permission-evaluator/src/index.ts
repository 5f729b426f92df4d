export { startPermissionEvaluator } from './permission-evaluator.service';
export { loadEvaluatorConfig, type EvaluatorConfig } from './config';
