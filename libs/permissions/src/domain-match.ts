import { ConfigError } from '@toolgate/contracts';

/** A compiled host pattern: `example.com` (exact), `*.example.com` (subdomains only) or `*` (any). */
export interface HostPattern {
  readonly source: string;
  readonly exact: string | undefined;
  /** `.example.com` for `*.example.com`. */
  readonly suffix: string | undefined;
  readonly any: boolean;
}

/** Normalises a host name the way the WHATWG URL parser does (lowercase, punycode, no trailing dot). */
function normaliseHost(name: string): string | undefined {
  try {
    const host = new URL(`http://${name}/`).hostname;
    return host.endsWith('.') ? host.slice(0, -1) : host;
  } catch {
    return undefined;
  }
}

/**
 * Compiles a domain-rule host pattern.
 * @throws ConfigError when the pattern is not a host name, `*.` + host name, or `*`
 */
export function compileHostPattern(source: string): HostPattern {
  if (source === '*') return { source, exact: undefined, suffix: undefined, any: true };
  const wildcard = source.startsWith('*.');
  const name = wildcard ? source.slice(2) : source;
  const host = /[/:@?#\s*]/.test(name) ? undefined : normaliseHost(name);
  if (host === undefined || host.length === 0) {
    throw new ConfigError(
      `invalid domain pattern ${JSON.stringify(source)}: use host, *.host or *`,
      {
        details: { domain: source },
      },
    );
  }
  return wildcard
    ? { source, exact: undefined, suffix: `.${host}`, any: false }
    : { source, exact: host, suffix: undefined, any: false };
}

/** The first pattern that matches `host` (already normalised), if any. */
export function matchHost(patterns: readonly HostPattern[], host: string): HostPattern | undefined {
  for (let i = 0; i < patterns.length; i++) {
    const p = patterns[i]!;
    if (p.any || p.exact === host || (p.suffix !== undefined && host.endsWith(p.suffix))) return p;
  }
  return undefined;
}

/**
 * The host the first-party fetch tool would connect to: `input.url`'s host for http(s), normalised.
 * Undefined when there is no such host (the fetch tool refuses those calls itself).
 */
export function fetchTargetHost(input: unknown): string | undefined {
  if (typeof input !== 'object' || input === null) return undefined;
  const url = (input as { url?: unknown }).url;
  if (typeof url !== 'string') return undefined;
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return undefined;
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') return undefined;
  let host = parsed.hostname;
  if (host.startsWith('[') && host.endsWith(']')) host = host.slice(1, -1);
  if (host.endsWith('.')) host = host.slice(0, -1);
  return host.length > 0 ? host : undefined;
}

const URL_IN_TEXT = /\b[a-z][a-z0-9+.-]{1,15}:\/\/[^\s'"<>`)]+/gi;
const HOST_KEYS: ReadonlySet<string> = new Set(['host', 'hostname', 'domain', 'server']);
const SCAN_LIMIT = 256;

/** Scan state of {@link hostsMentioned}: the Set is only created once a host turns up. */
interface HostScan {
  budget: number;
  hosts: Set<string> | undefined;
}

const NO_HOSTS: readonly string[] = Object.freeze([]);

/**
 * Best-effort hosts named anywhere in an arbitrary tool's input (URLs in strings, `host`-like
 * keys), for advisory domain matches. Bounded in depth and size; never decisive.
 *
 * Runs for nearly every evaluation of a chain with domain rules, and nearly every input names no
 * host: so a plain recursive walk (no closure, no entry pairs) and no Set until a host is found.
 */
export function hostsMentioned(input: unknown): readonly string[] {
  const scan: HostScan = { budget: SCAN_LIMIT, hosts: undefined };
  scanForHosts(input, undefined, 0, scan);
  return scan.hosts === undefined ? NO_HOSTS : [...scan.hosts];
}

function scanForHosts(
  value: unknown,
  key: string | undefined,
  depth: number,
  scan: HostScan,
): void {
  if (scan.budget-- <= 0 || depth > 6) return;
  if (typeof value === 'string') {
    if (key !== undefined && HOST_KEYS.has(key)) {
      const h = normaliseHost(value);
      if (h) (scan.hosts ??= new Set()).add(h);
    }
    if (value.includes('://')) {
      for (const m of value.matchAll(URL_IN_TEXT)) {
        const h = fetchTargetHost({ url: m[0] }) ?? safeHost(m[0]);
        if (h) (scan.hosts ??= new Set()).add(h);
      }
    }
  } else if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) scanForHosts(value[i], undefined, depth + 1, scan);
  } else if (typeof value === 'object' && value !== null) {
    const keys = Object.keys(value);
    for (let i = 0; i < keys.length; i++) {
      const k = keys[i]!;
      scanForHosts((value as Record<string, unknown>)[k], k, depth + 1, scan);
    }
  }
}

function safeHost(url: string): string | undefined {
  try {
    const h = new URL(url).hostname;
    return h.length > 0 ? h : undefined;
  } catch {
    return undefined;
  }
}
