import { BlockList, isIP } from 'node:net';
import { ConfigError } from '@toolgate/contracts';
import { canonicalHost } from './canonical-host';

/**
 * A compiled host pattern: `example.com` (exact), `*.example.com` (subdomains only), `*` (any), an
 * IP address in any spelling (`127.0.0.1`, `::1`, `[::ffff:7f00:1]`, `2130706433`), or an address
 * range (`10.0.0.0/8`, `fd00::/8`). Hosts and patterns are both in {@link canonicalHost} form.
 */
export interface HostPattern {
  readonly source: string;
  readonly exact: string | undefined;
  /** `.example.com` for `*.example.com`. */
  readonly suffix: string | undefined;
  readonly any: boolean;
  /** For an address range: the addresses it holds. */
  readonly range: BlockList | undefined;
}

const CIDR = /^(.+)\/([0-9]{1,3})$/;

/**
 * Compiles a domain-rule host pattern.
 * @throws ConfigError when the pattern is not a host name, `*.` + host name, `*`, an IP address or
 * an address range
 */
export function compileHostPattern(source: string): HostPattern {
  const none = { exact: undefined, suffix: undefined, any: false, range: undefined };
  if (source === '*') return { ...none, source, any: true };
  const invalid = () =>
    new ConfigError(
      `invalid domain pattern ${JSON.stringify(source)}: use host, *.host, *, an IP address or a range (10.0.0.0/8)`,
      { details: { domain: source } },
    );
  const cidr = CIDR.exec(source);
  if (cidr !== null) {
    const address = canonicalHost(cidr[1]!);
    const prefix = Number(cidr[2]);
    const family = address === undefined ? 0 : isIP(address);
    if (family === 0 || prefix > (family === 4 ? 32 : 128)) throw invalid();
    const range = new BlockList();
    range.addSubnet(address!, prefix, family === 4 ? 'ipv4' : 'ipv6');
    return { ...none, source, range };
  }
  const wildcard = source.startsWith('*.');
  const name = wildcard ? source.slice(2) : source;
  const host = /[/@?#\s*]/.test(name) ? undefined : canonicalHost(name);
  if (host === undefined || (wildcard && isIP(host) !== 0)) throw invalid();
  return wildcard ? { ...none, source, suffix: `.${host}` } : { ...none, source, exact: host };
}

/** The first pattern that matches `host` (in {@link canonicalHost} form), if any. */
export function matchHost(patterns: readonly HostPattern[], host: string): HostPattern | undefined {
  for (let i = 0; i < patterns.length; i++) {
    const p = patterns[i]!;
    if (p.any || p.exact === host || (p.suffix !== undefined && host.endsWith(p.suffix))) return p;
    if (p.range !== undefined) {
      const family = isIP(host);
      if (family !== 0 && p.range.check(host, family === 4 ? 'ipv4' : 'ipv6')) return p;
    }
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
  return canonicalHost(parsed.hostname);
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
      const h = canonicalHost(value);
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
    return canonicalHost(new URL(url).hostname);
  } catch {
    return undefined;
  }
}
