import type { CounterStore } from '../src/counters/counter-store.js';
import { MemoryCounterStore } from '../src/counters/memory-store.js';
import { connectRedisCounterStore } from '../src/redis/redis-store.js';
import { DecisionService } from '../src/decision/decision-service.js';
import { decisionJson } from '../src/http/decision-fast-path.js';
import type { Decision } from '../src/model/decision.js';
import { parseRequestContext } from '../src/model/request-context.js';
import { LiveMatcher } from '../src/matching/live-matcher.js';
import { Analytics } from '../src/analytics/analytics.js';
import { Metrics } from '../src/observability/metrics.js';
import { ObservabilityRecorder } from '../src/analytics/recorder.js';
import { LAYER_POLICIES, generateWorkload } from './lib/workload.js';

/**
 * Scenario 17 without HTTP (not part of `npm run bench` or `npm test`; by hand):
 *
 *   npx tsx bench/layers-micro.ts [--redis host:port] [--rounds 7]
 *
 * This process's CPU time (process.cpuUsage, so other work on the machine shows less than in wall
 * time) per check and its answer body (decisionJson), recorder on: the target request decided by one
 * layer, and by three (scenario 17's two more layers). Memory mode: decideNow, synchronous; with
 * `--redis`: ten callers awaiting check, as ten connections would. Median of alternating rounds.
 */

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : fallback;
}

const redisAddr = arg('redis', '');
const rounds = Number(arg('rounds', '7'));

async function side(layers: boolean): Promise<() => Promise<number>> {
  const { policies, bodies } = generateWorkload(10);
  let counters: CounterStore = new MemoryCounterStore();
  if (redisAddr) {
    const store = connectRedisCounterStore(redisAddr, { commandTimeoutMs: 2_000 });
    await store.waitUntilReady();
    counters = store;
  }
  const matcher = new LiveMatcher([...policies, ...(layers ? LAYER_POLICIES : [])]);
  const recorder = new ObservabilityRecorder(new Metrics(), new Analytics());
  const decisions = new DecisionService({ policies: matcher, counters, keyPrefix: `rl-micro-${layers ? 3 : 1}:`, recorder });
  const contexts = bodies.map((b) => parseRequestContext(b));
  const calls = redisAddr ? 20_000 : 200_000;
  if (!redisAddr) {
    return async () => {
      for (let i = 0; i < calls; i++) decisionJson(decisions.decideNow('check', contexts[i % contexts.length]) as Decision);
      return calls;
    };
  }
  return async () => {
    let next = 0;
    const caller = async () => {
      while (next < calls) decisionJson(await decisions.check(contexts[next++ % contexts.length]));
    };
    await Promise.all(Array.from({ length: 10 }, caller));
    return calls;
  };
}

async function cpuNsPerCall(run: () => Promise<number>): Promise<number> {
  const start = process.cpuUsage();
  const calls = await run();
  const used = process.cpuUsage(start);
  return ((used.user + used.system) * 1000) / calls;
}

async function main(): Promise<void> {
  const one = await side(false);
  const three = await side(true);
  // Warm-up: both sides compiled and their counters created before any round counts.
  for (let i = 0; i < 2; i++) {
    await one();
    await three();
  }
  const ones: number[] = [];
  const threes: number[] = [];
  for (let r = 0; r < rounds; r++) {
    ones.push(await cpuNsPerCall(one));
    threes.push(await cpuNsPerCall(three));
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const [a, b] = [median(ones), median(threes)];
  console.log(`${redisAddr ? `Redis ${redisAddr}` : 'memory'}: CPU per check, one layer ${a.toFixed(0)} ns, three layers ${b.toFixed(0)} ns, ratio ${(b / a).toFixed(2)}`);
  process.exit(0);
}

void main();
