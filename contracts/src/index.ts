export * from './errors';
export * from './canonical-json';
export * from './schema-spec';
export * from './tool-contract';
export * from './contract-hash';
export * from './subjects';
export * from './events';
export * from './dispatch-key';
