import { DEFAULT_SOURCE_IP_PREFIX, type SourceIpPrefix } from '../schema/policy.js';

/**
 * Counting by client network (README "Managing policies", client networks): the value a policy's
 * `source_ip: "*"` counts by. An IPv4 address is masked to its /v4 network, an IPv6 address to its /v6
 * network, an IPv4-mapped IPv6 address (`::ffff:10.0.0.1`) counts as the IPv4 address, and any other
 * string counts as itself. Every textual form of one address gives one identity: the network's first
 * address in canonical form (dotted decimal; RFC 5952 for IPv6), followed by `/<length>` unless the
 * prefix is the whole address, so a /32 IPv4 identity is the address exactly as it is written today.
 *
 * IPv4 is accepted in its strict dotted-decimal form only (four decimal octets, no leading zeros, as
 * Node's `net.isIPv4`): `010.0.0.1` means 8.0.0.1 to some parsers and 10.0.0.1 to others, so it is not
 * taken for an address. An IPv6 zone (`fe80::1%eth0`) is dropped: it names a link, not an address.
 *
 * Runs on every decision of such a policy: the IPv4 case parses without allocating, and at /32 returns
 * the string it was given.
 */

export class ClientNetwork {
  private readonly mask4: number;
  /** Per 16-bit word of an IPv6 address, the bits the /v6 prefix keeps. */
  private readonly mask6: Uint16Array;
  /** Scratch for the IPv6 parser (synchronous: one per network is enough; there are a few networks). */
  private readonly words = new Uint16Array(8);

  constructor(
    readonly v4: number,
    readonly v6: number,
  ) {
    this.mask4 = v4 === 0 ? 0 : (0xffffffff << (32 - v4)) >>> 0;
    this.mask6 = new Uint16Array(8);
    for (let i = 0; i < 8; i++) {
      const bits = Math.max(0, Math.min(16, v6 - 16 * i));
      this.mask6[i] = bits === 0 ? 0 : (0xffff << (16 - bits)) & 0xffff;
    }
  }

  /** The identity `source_ip` counts by (see the file comment). */
  identityOf(value: string): string {
    const words = this.words;
    const v4 = parseIPv4(value, 0, value.length);
    if (v4 >= 0) return this.v4 === 32 ? value : this.ipv4Identity(v4);
    if (value.indexOf(':') < 0 || !parseIPv6(value, words)) return value;
    if (words[0] === 0 && words[1] === 0 && words[2] === 0 && words[3] === 0 && words[4] === 0 && words[5] === 0xffff) {
      return this.ipv4Identity(((words[6] << 16) | words[7]) >>> 0);
    }
    for (let i = 0; i < 8; i++) words[i] &= this.mask6[i];
    const text = formatIPv6(words);
    return this.v6 === 128 ? text : `${text}/${this.v6}`;
  }

  private ipv4Identity(address: number): string {
    const text = formatIPv4((address & this.mask4) >>> 0);
    return this.v4 === 32 ? text : `${text}/${this.v4}`;
  }
}

const networks = new Map<string, ClientNetwork>();

/** One shared ClientNetwork per pair of lengths (policies compile to the same object). */
export function clientNetwork(prefix: Partial<SourceIpPrefix> | undefined): ClientNetwork {
  const v4 = prefix?.v4 ?? DEFAULT_SOURCE_IP_PREFIX.v4;
  const v6 = prefix?.v6 ?? DEFAULT_SOURCE_IP_PREFIX.v6;
  const key = `${v4}/${v6}`;
  let network = networks.get(key);
  if (network === undefined) networks.set(key, (network = new ClientNetwork(v4, v6)));
  return network;
}

/** Strict dotted decimal in text[from, to) as an unsigned 32-bit number, or -1. */
function parseIPv4(text: string, from: number, to: number): number {
  let address = 0;
  let octet = 0;
  let digits = 0;
  let dots = 0;
  for (let i = from; i < to; i++) {
    const c = text.charCodeAt(i);
    if (c >= 48 && c <= 57) {
      if (digits === 1 && octet === 0) return -1; // a leading zero
      octet = octet * 10 + (c - 48);
      if (octet > 255) return -1;
      digits++;
    } else if (c === 46 && digits > 0 && dots < 3) {
      address = address * 256 + octet;
      octet = 0;
      digits = 0;
      dots++;
    } else {
      return -1;
    }
  }
  if (dots !== 3 || digits === 0) return -1;
  return address * 256 + octet;
}

function hexDigit(c: number): number {
  if (c >= 48 && c <= 57) return c - 48;
  if (c >= 97 && c <= 102) return c - 87;
  if (c >= 65 && c <= 70) return c - 55;
  return -1;
}

/**
 * RFC 4291 text (hex groups of 1–4 digits, one `::` for one or more zero groups, a dotted IPv4 tail in
 * the last 32 bits, an optional `%zone`) into `out`; false when the text is not such an address.
 */
export function parseIPv6(text: string, out: Uint16Array): boolean {
  let end = text.indexOf('%');
  if (end === 0) return false;
  if (end < 0) end = text.length;
  let count = 0;
  let gap = -1; // where `::` stands, in groups
  let i = 0;
  if (text.startsWith('::')) {
    gap = 0;
    i = 2;
    if (i === end) {
      out.fill(0);
      return true;
    }
  }
  while (i < end) {
    if (count === 8) return false;
    let value = 0;
    let digits = 0;
    let j = i;
    for (; j < end && digits <= 4; j++) {
      const d = hexDigit(text.charCodeAt(j));
      if (d < 0) break;
      value = value * 16 + d;
      digits++;
    }
    if (j < end && text.charCodeAt(j) === 46) {
      // A dotted IPv4 tail: the last two groups.
      if (count > 6) return false;
      const v4 = parseIPv4(text, i, end);
      if (v4 < 0) return false;
      out[count++] = v4 >>> 16;
      out[count++] = v4 & 0xffff;
      i = end;
      break;
    }
    if (digits === 0 || digits > 4) return false;
    out[count++] = value;
    if (j === end) {
      i = end;
      break;
    }
    if (text.charCodeAt(j) !== 58) return false;
    if (j + 1 < end && text.charCodeAt(j + 1) === 58) {
      if (gap >= 0) return false;
      gap = count;
      i = j + 2;
    } else {
      i = j + 1;
      if (i === end) return false; // a trailing single `:`
    }
  }
  if (gap < 0) return count === 8;
  if (count > 7) return false;
  // Move the groups after `::` to the end and zero the gap.
  const after = count - gap;
  for (let k = 0; k < after; k++) out[7 - k] = out[count - 1 - k];
  for (let k = gap; k < 8 - after; k++) out[k] = 0;
  return true;
}

function formatIPv4(address: number): string {
  return `${address >>> 24}.${(address >>> 16) & 255}.${(address >>> 8) & 255}.${address & 255}`;
}

/** RFC 5952: lower-case hex without leading zeros, the first longest run of two or more zero groups as `::`. */
export function formatIPv6(groups: Uint16Array): string {
  let bestStart = -1;
  let bestLength = 1;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLength) {
      bestStart = i;
      bestLength = j - i;
    }
    i = j;
  }
  let text = '';
  for (let i = 0; i < 8; i++) {
    if (i === bestStart) {
      text += '::';
      i += bestLength - 1;
      continue;
    }
    if (text !== '' && !text.endsWith(':')) text += ':';
    text += groups[i].toString(16);
  }
  return text;
}
