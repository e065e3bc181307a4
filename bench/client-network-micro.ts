import { isIPv4 } from 'node:net';
import { clientNetwork } from '../src/matching/client-network.js';

/**
 * What counting by client network (source_ip_prefix) costs per decision of a `source_ip: "*"` policy:
 * CPU ns per ClientNetwork.identityOf call, beside node's own net.isIPv4 on the same strings. Not part
 * of `npm run bench`; by hand: `npx tsx bench/client-network-micro.ts`. Each case runs 3 M calls over
 * 1,000 distinct flat strings, 5 times; the best run is reported.
 */
const SIZE = 1000;
const CALLS = 3_000_000;
const flat = (texts: string[]) => texts.map((t) => JSON.parse(JSON.stringify(t)) as string);
const v4 = flat(Array.from({ length: SIZE }, (_, i) => `10.${i % 256}.${(i * 7) % 256}.${(i * 13) % 256}`));
const v6 = flat(Array.from({ length: SIZE }, (_, i) => `2001:db8:${i.toString(16)}:${(i * 7).toString(16)}::${(i * 13).toString(16)}`));
const mapped = flat(v4.map((a) => `::ffff:${a}`));
const names = flat(v4.map((a) => `client-${a}`));

function best(run: () => number): number {
  let min = Infinity;
  for (let r = 0; r < 5; r++) {
    const start = process.cpuUsage();
    run();
    const used = process.cpuUsage(start);
    min = Math.min(min, ((used.user + used.system) * 1000) / CALLS);
  }
  return min;
}

const defaults = clientNetwork(undefined);
const slash24 = clientNetwork({ v4: 24 });
const cases: [string, string[], (s: string) => unknown][] = [
  ['net.isIPv4 (reference)', v4, isIPv4],
  ['IPv4 at /32 (the default)', v4, (s) => defaults.identityOf(s)],
  ['IPv4 at /24', v4, (s) => slash24.identityOf(s)],
  ['IPv4-mapped IPv6', mapped, (s) => defaults.identityOf(s)],
  ['IPv6 at /56 (the default)', v6, (s) => defaults.identityOf(s)],
  ['not an address', names, (s) => defaults.identityOf(s)],
];
for (const [name, inputs, call] of cases) {
  const ns = best(() => {
    let sink = 0;
    for (let i = 0; i < CALLS; i++) if (call(inputs[i % SIZE])) sink++;
    return sink;
  });
  console.log(`${name.padEnd(28)} ${ns.toFixed(0).padStart(6)} ns`);
}
