// Module resolution hook (node:module register): `fs` imported by the conformance package
// resolves to fs-shim.mjs; every other import resolves as usual.
const SHIM = new URL('./fs-shim.mjs', import.meta.url).href;

export async function resolve(specifier, context, next) {
  if (
    (specifier === 'fs' || specifier === 'node:fs') &&
    context.parentURL?.includes('/@modelcontextprotocol/conformance/')
  ) {
    return { url: SHIM, shortCircuit: true };
  }
  return next(specifier, context);
}
