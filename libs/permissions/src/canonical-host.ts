/**
 * One canonical spelling per host, for every domain decision (the fetch tool's connect-time check,
 * the chain's domain rules, advisory matches, a sandbox's network rules):
 *
 * - names: lower case, IDN as punycode (WHATWG host parsing, i.e. `url.domainToASCII`), no
 *   trailing dots;
 * - IPv4 in any spelling the URL parser accepts (`2130706433`, `0177.0.0.1`, `0x7f.1`, `127.1`,
 *   `127.0.0.1.`) as dotted quad;
 * - IPv6 compressed, lower case, without brackets — except that an address carrying an IPv4 one
 *   that a connection may reach (IPv4-mapped `::ffff:a.b.c.d`, IPv4-translated `::ffff:0:a.b.c.d`,
 *   IPv4-compatible `::a.b.c.d`, NAT64 `64:ff9b::a.b.c.d`) is that IPv4 address, so a rule about
 *   `127.0.0.1` meets `[::ffff:7f00:1]`.
 *
 * Undefined when the text is not a host at all (a zone id, a port, userinfo, a path): callers
 * treat that as a deny.
 */
export function canonicalHost(raw: string): string | undefined {
  if (typeof raw !== 'string' || raw.length === 0 || raw.length > 1_024) return undefined;
  let text = raw;
  if (text.startsWith('[') && text.endsWith(']')) text = text.slice(1, -1);
  if (text.includes(':')) return canonicalIPv6(text);
  // Anything the URL parser would read as something other than a host.
  if (/[/\\@?#\s[\]]/.test(text)) return undefined;
  let host: string;
  try {
    host = new URL(`http://${text}/`).hostname;
  } catch {
    return undefined;
  }
  if (host.startsWith('[')) return canonicalIPv6(host.slice(1, -1));
  host = host.replace(/\.+$/, '');
  return host.length === 0 ? undefined : host;
}

function canonicalIPv6(text: string): string | undefined {
  let host: string;
  try {
    host = new URL(`http://[${text}]/`).hostname;
  } catch {
    return undefined;
  }
  const words = ipv6Words(host.slice(1, -1));
  if (words === undefined) return undefined;
  const embedded = embeddedIPv4(words);
  return embedded ?? host.slice(1, -1);
}

/** The eight 16-bit words of a compressed IPv6 address as the URL parser prints it. */
function ipv6Words(compressed: string): number[] | undefined {
  const [head, tail] = compressed.split('::') as [string, string | undefined];
  const parse = (s: string) => (s === '' ? [] : s.split(':').map((w) => parseInt(w, 16)));
  const left = parse(head);
  const right = tail === undefined ? [] : parse(tail);
  const fill = 8 - left.length - right.length;
  if (fill < 0 || (tail === undefined && fill !== 0)) return undefined;
  const words = [...left, ...new Array<number>(fill).fill(0), ...right];
  return words.every((w) => Number.isInteger(w) && w >= 0 && w <= 0xffff) ? words : undefined;
}

/** The IPv4 address an IPv6 one stands for, for the prefixes that carry one. */
function embeddedIPv4(w: readonly number[]): string | undefined {
  const zeros = (from: number, to: number) => w.slice(from, to).every((x) => x === 0);
  const v4 = () => `${w[6]! >> 8}.${w[6]! & 0xff}.${w[7]! >> 8}.${w[7]! & 0xff}`;
  // ::ffff:a.b.c.d (mapped) and ::ffff:0:a.b.c.d (translated, RFC 2765)
  if (zeros(0, 5) && w[5] === 0xffff) return v4();
  if (zeros(0, 4) && w[4] === 0xffff && w[5] === 0) return v4();
  // 64:ff9b::a.b.c.d (NAT64 well-known prefix, RFC 6052)
  if (w[0] === 0x64 && w[1] === 0xff9b && zeros(2, 6)) return v4();
  // ::a.b.c.d (IPv4-compatible, deprecated) — but not :: and ::1, which are IPv6's own.
  if (zeros(0, 6) && (w[6] !== 0 || w[7]! > 1)) return v4();
  return undefined;
}
