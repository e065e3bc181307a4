import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

/**
 * Micro-benchmark of the RequestContext parse on the decision path (parseOperationContext). Not part of
 * `npm run bench` or `npm test`; run it by hand:
 *
 *   npx tsx bench/validate-micro.ts [--baseline <file>] [--rounds 7] [--round-ms 300]
 *
 * `--baseline <file>`: another version of src/model/request-context.ts measured beside the current one,
 * e.g. `mkdir -p .tmp/vb/model && git show HEAD~3:src/model/request-context.ts > .tmp/vb/model/request-context.ts
 * && git show HEAD~3:src/errors.ts > .tmp/vb/errors.ts` (its relative imports must resolve next to it).
 * Prints CPU ns per call (process.cpuUsage: time the process was descheduled on a busy machine does not
 * count) for each body, the best of `--rounds` rounds of `--round-ms` each.
 */

type Parse = (operation: 'check' | 'acquire' | 'release' | 'refund', input: unknown) => unknown;

const BODIES: Record<string, unknown> = {
  minimal: { tenant_id: 't1', user_id: 'u42' },
  typical: {
    request_id: 'r-1',
    org_id: 'acme',
    tenant_id: 't1',
    service: 'api',
    endpoint: '/v1/chat',
    method: 'POST',
    user_id: 'u42',
    signal_type: 'http',
    quantity: 3,
    tags: { env: 'prod', tier: 'gold' },
  },
  tags16: { tenant_id: 't1', tags: Object.fromEntries(Array.from({ length: 16 }, (_, i) => [`k${i}`, `v${i}`])) },
};

function argOf(name: string, fallback: string): string {
  const i = process.argv.indexOf(name);
  return i >= 0 && process.argv[i + 1] !== undefined ? process.argv[i + 1] : fallback;
}

/** CPU ns per call: the best round. Calls go over 1024 fresh copies of the body, as the server parses each request anew. */
function measure(parse: Parse, body: unknown, rounds: number, roundMs: number): number {
  const copies = Array.from({ length: 1024 }, () => JSON.parse(JSON.stringify(body)));
  let best = Infinity;
  let sink = 0;
  for (let r = 0; r < rounds; r++) {
    let calls = 0;
    const wallEnd = performance.now() + roundMs;
    const cpu = process.cpuUsage();
    while (performance.now() < wallEnd) {
      for (let i = 0; i < 1024; i++) if (parse('check', copies[i]) !== undefined) sink++;
      calls += 1024;
    }
    const used = process.cpuUsage(cpu);
    best = Math.min(best, ((used.user + used.system) * 1000) / calls);
  }
  if (sink === 0) throw new Error('nothing parsed');
  return best;
}

async function load(file: string): Promise<Parse> {
  const mod = (await import(pathToFileURL(resolve(file)).href)) as { parseOperationContext: Parse };
  return mod.parseOperationContext;
}

const rounds = Number(argOf('--rounds', '7'));
const roundMs = Number(argOf('--round-ms', '300'));
const impls: [string, Parse][] = [['current', await load('src/model/request-context.ts')]];
const baseline = argOf('--baseline', '');
if (baseline !== '') impls.push(['baseline', await load(baseline)]);

for (const [bodyName, body] of Object.entries(BODIES)) {
  // Alternate the implementations so neither always runs on a warmer machine.
  for (let pass = 0; pass < 2; pass++) {
    for (const [implName, parse] of pass === 0 ? impls : [...impls].reverse()) {
      console.log(`${bodyName.padEnd(8)} ${implName.padEnd(8)} ${measure(parse, body, rounds, roundMs).toFixed(1)} ns/op`);
    }
  }
}
