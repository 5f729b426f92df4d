// Where a service's signing keys come from is defined once, in contracts (the CLI resolves the
// operator's the same way); the services reach it through their NATS settings.
export { resolveServiceKeys, type SigningSettings } from '@toolgate/contracts';
