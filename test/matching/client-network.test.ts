import { isIPv6 } from 'node:net';
import { expect } from 'chai';
import fc from 'fast-check';
import { clientNetwork, formatIPv6, parseIPv6 } from '../../src/matching/client-network.js';

/** WHATWG's canonical IPv6 text (RFC 5952 compression, hex throughout): an independent serialiser. */
const whatwg = (groups: number[]) => new URL(`http://[${groups.map((g) => g.toString(16)).join(':')}]/`).hostname.slice(1, -1);
const group = fc.integer({ min: 0, max: 0xffff });
/** Groups with many zeros, so runs of zeros (and ties between runs) are common. */
const groups = fc.array(fc.oneof(group, fc.constant(0), fc.constant(0)), { minLength: 8, maxLength: 8 });

/** Other textual forms of one address: upper case, leading zeros, no compression, a zone. */
function spellings(g: number[]): string[] {
  const full = g.map((x) => x.toString(16).padStart(4, '0'));
  return [full.join(':'), full.join(':').toUpperCase(), g.map((x) => x.toString(16)).join(':'), `${formatIPv6(Uint16Array.from(g))}%eth0`];
}

describe('client networks (source_ip_prefix)', () => {
  const defaults = clientNetwork(undefined);

  it('IPv6: every textual form of one address is one identity, masked to /56 by default', () => {
    for (const text of ['2001:DB8::1', '2001:db8:0:0::1', '2001:0db8:0000:0000:0000:0000:0000:0001', '2001:db8::1%eth0', '2001:db8:0:ff::2']) {
      expect(defaults.identityOf(text), text).to.equal('2001:db8::/56');
    }
    expect(defaults.identityOf('2001:db8:0:100::1')).to.equal('2001:db8:0:100::/56');
    expect(clientNetwork({ v6: 128 }).identityOf('2001:DB8:0:0:0:0:0:1')).to.equal('2001:db8::1');
    expect(clientNetwork({ v6: 64 }).identityOf('2001:db8:1:2:3:4:5:6')).to.equal('2001:db8:1:2::/64');
    expect(clientNetwork({ v6: 16 }).identityOf('ffff:db8::1')).to.equal('ffff::/16');
  });

  it('IPv4 at /32 is the string as sent; shorter prefixes give the network', () => {
    const text = ['10.1.2.3'].join('');
    expect(defaults.identityOf(text)).to.equal(text);
    expect(clientNetwork({ v4: 24 }).identityOf('10.1.2.3')).to.equal('10.1.2.0/24');
    expect(clientNetwork({ v4: 8 }).identityOf('255.255.255.255')).to.equal('255.0.0.0/8');
    expect(clientNetwork({ v4: 31 }).identityOf('0.0.0.1')).to.equal('0.0.0.0/31');
  });

  it('an IPv4-mapped IPv6 address counts as the IPv4 address, in either spelling', () => {
    for (const text of ['::ffff:10.0.0.1', '::FFFF:a00:1', '0:0:0:0:0:ffff:10.0.0.1', '::ffff:0a00:0001']) {
      expect(defaults.identityOf(text), text).to.equal('10.0.0.1');
      expect(clientNetwork({ v4: 16 }).identityOf(text), text).to.equal('10.0.0.0/16');
    }
    // IPv4-compatible (::10.0.0.1) and NAT64 (64:ff9b::/96) addresses are IPv6 ones.
    expect(clientNetwork({ v6: 128 }).identityOf('::10.0.0.1')).to.equal('::a00:1');
  });

  it('a value that is not an IP address counts as itself', () => {
    for (const text of ['', 'client-7', '010.0.0.1', '1.2.3', '1.2.3.4.5', '256.0.0.1', '1.2.3.4 ', '::1::2', '1:2:3:4:5:6:7:8:9', '12345::', ':1:2', '1:2:', 'g::1', '[::1]', '%eth0', '1:2:3:4:5:6:7:1.2.3.4']) {
      expect(defaults.identityOf(text), JSON.stringify(text)).to.equal(text);
    }
  });

  it('the parser accepts what Node accepts, and formats as WHATWG does (property)', () => {
    const out = new Uint16Array(8);
    fc.assert(
      fc.property(groups, (g) => {
        const canonical = formatIPv6(Uint16Array.from(g));
        expect(canonical).to.equal(whatwg(g));
        for (const text of spellings(g)) {
          expect(parseIPv6(text, out), text).to.equal(true);
          expect([...out]).to.deep.equal(g);
          expect(clientNetwork({ v6: 128 }).identityOf(text)).to.equal(
            g.slice(0, 5).every((x) => x === 0) && g[5] === 0xffff ? `${g[6] >> 8}.${g[6] & 255}.${g[7] >> 8}.${g[7] & 255}` : canonical,
          );
        }
      }),
    );
    fc.assert(
      fc.property(fc.stringMatching(/^[0-9a-fA-F:.]{0,24}$/), (text) => {
        expect(parseIPv6(text, out), text).to.equal(isIPv6(text));
      }),
      { numRuns: 3000 },
    );
  });
});
