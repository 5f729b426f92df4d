import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { openApiDocument } from '@toolgate/gateway';

/**
 * The TypeScript types of the gateway's OpenAPI document, as `openapi-typescript` generates them
 * (checked in at {@link CLIENT_TYPES_PATH}; `npm run openapi:client` rewrites them, and a spec fails
 * while they are stale). Clients use them with `openapi-fetch`.
 */
export const CLIENT_TYPES_PATH = path.join(__dirname, 'generated', 'gateway-api.ts');

const ROOT = path.resolve(__dirname, '..', '..', '..');

/** The document as the gateway serves it, written to a temporary file the tools can read. */
export function withDocumentFile<T>(use: (file: string) => T): T {
  const dir = mkdtempSync(path.join(tmpdir(), 'toolgate-openapi-'));
  try {
    const file = path.join(dir, 'openapi.json');
    writeFileSync(file, JSON.stringify(openApiDocument(), null, 2));
    return use(file);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Runs a package's command-line entry with this Node (no shell, no download). */
export function runPackageBin(pkg: string, args: string[], env: NodeJS.ProcessEnv = {}): string {
  const manifest = JSON.parse(
    readFileSync(path.join(ROOT, 'node_modules', pkg, 'package.json'), 'utf8'),
  ) as { bin: string | Record<string, string> };
  const bin = typeof manifest.bin === 'string' ? manifest.bin : Object.values(manifest.bin)[0]!;
  return execFileSync(process.execPath, [path.join(ROOT, 'node_modules', pkg, bin), ...args], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
    maxBuffer: 64 * 1024 * 1024,
  });
}

/** Generates the client types from today's document. */
export function generateClientTypes(): string {
  return withDocumentFile((file) => {
    const out = path.join(path.dirname(file), 'gateway-api.ts');
    // A field with a default is optional to send: not required in the types.
    runPackageBin('openapi-typescript', [file, '--output', out, '--default-non-nullable=false']);
    return readFileSync(out, 'utf8');
  });
}

if (require.main === module) {
  writeFileSync(CLIENT_TYPES_PATH, generateClientTypes());
  process.stdout.write(`wrote ${path.relative(ROOT, CLIENT_TYPES_PATH)}\n`);
}
