import type { CounterStore } from '../src/counters/counter-store.js';
import { MemoryCounterStore } from '../src/counters/memory-store.js';
import { DecisionService } from '../src/decision/decision-service.js';
import type { Decision } from '../src/model/decision.js';
import { parseRequestContext } from '../src/model/request-context.js';
import { LiveMatcher } from '../src/matching/live-matcher.js';
import { HOT_KEY_BODY, HOT_KEY_POLICY } from './lib/workload.js';
import { awaitingOnly } from '../test/support/async-store.js';

/**
 * Is the deny cache worth having in memory mode? Not part of `npm run bench` or `npm test`; by hand:
 *
 *   npx tsx bench/deny-cache-micro.ts [--rounds 5] [--round-ms 300]
 *
 * CPU time per refused check (`decideNow`, synchronous on both sides) of one key far over its limit:
 * - `memory store`: the in-memory emulator answers the refusal (the memory-mode path: no cache);
 * - `deny cache hit`: the same refusal answered from the deny cache (the Redis-mode path once the key
 *   is refused; the emulator behind an asynchronous interface stands in for Redis and is never asked).
 * Best round of each, alternating.
 */

function argNumber(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
}

async function refusedService(counters: CounterStore): Promise<DecisionService> {
  const service = new DecisionService({ policies: new LiveMatcher([HOT_KEY_POLICY]), counters, keyPrefix: 'rl:' });
  const ctx = parseRequestContext(HOT_KEY_BODY);
  for (let i = 0; i < 101; i++) await service.decideNow('check', ctx);
  const refused = await service.decideNow('check', ctx);
  if (refused.allowed) throw new Error('the hot key should be refused');
  return service;
}

/** Once a second the cache asks the store again (maxAgeMs): that answer is awaited, and counted. */
async function round(service: DecisionService, roundMs: number): Promise<number> {
  const ctx = parseRequestContext(HOT_KEY_BODY);
  let calls = 0;
  const cpu = process.cpuUsage();
  const end = performance.now() + roundMs;
  while (performance.now() < end) {
    for (let i = 0; i < 1000; i++) {
      const answer = service.decideNow('check', ctx);
      const decision: Decision = answer instanceof Promise ? await answer : answer;
      if (decision.allowed) throw new Error('admitted');
    }
    calls += 1000;
  }
  const used = process.cpuUsage(cpu);
  return ((used.user + used.system) * 1000) / calls;
}

const rounds = argNumber('rounds', 5);
const roundMs = argNumber('round-ms', 300);
const sides: [string, DecisionService][] = [
  ['memory store', await refusedService(new MemoryCounterStore({ sweepIntervalMs: 0 }))],
  ['deny cache hit', await refusedService(awaitingOnly(new MemoryCounterStore({ sweepIntervalMs: 0 })))],
];
const best = new Map<string, number>();
for (let r = 0; r < rounds; r++) {
  for (const [name, service] of sides) best.set(name, Math.min(best.get(name) ?? Infinity, await round(service, roundMs)));
}
for (const [name, ns] of best) console.log(`${name.padEnd(16)} ${ns.toFixed(0)} ns CPU per refused check`);
process.exit(0);
