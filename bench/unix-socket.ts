/**
 * CPU per decision with the counter store reached over a Unix socket vs TCP loopback, same run, same
 * redis-server (it listens on both):
 *   npx tsx bench/unix-socket.ts [--rounds 6] [--decisions 20000] [--in-flight 64]
 *
 * The decision engine runs in this process (DecisionService over RedisCounterStore, no HTTP: the
 * transport to Redis is all that differs), pinned to the server core; redis-server to the load core.
 * Rounds alternate the transports (ABBA...), each a fixed count of decisions over a Zipf-skewed set of
 * 10,000 users, `--in-flight` at a time (64: the store batches them into few script calls; 1: one
 * round trip per decision). Reported per transport: this process's CPU (user + system) and
 * redis-server's CPU (INFO cpu) per decision, medians over the rounds (and their spread), and the ratios.
 */
import { connectRedisCounterStore, type RedisCounterStore } from '../src/redis/redis-store.js';
import { DecisionService } from '../src/decision/decision-service.js';
import { LiveMatcher } from '../src/matching/live-matcher.js';
import { parseRequestContext, type RequestContext } from '../src/model/request-context.js';
import { validatePolicy } from '../src/policy/validate.js';
import { setLogLevel } from '../src/util/log.js';
import { LOAD_CORE, SERVER_CORE, pinSelf, runMain, startPrivateRedis, type PrivateRedis } from './lib/proc.js';
import { median } from './lib/stats.js';
import { TARGET_LIMIT, zipfSequence } from './lib/workload.js';

const USERS = 10_000;

function arg(name: string, fallback: number): number {
  const at = process.argv.indexOf(`--${name}`);
  return at < 0 ? fallback : Number(process.argv[at + 1]);
}

interface Round {
  nodeCpuUsPerDecision: number;
  redisCpuUsPerDecision: number;
  decisionsPerSec: number;
}

runMain(async () => {
  setLogLevel('warn');
  const rounds = arg('rounds', 6);
  const decisions = arg('decisions', 20_000);
  const inFlight = arg('in-flight', 64);
  const pinned = pinSelf(SERVER_CORE);
  const redis = await startPrivateRedis(LOAD_CORE, { unixSocket: true });
  const validated = validatePolicy({
    policy_id: 'per-user',
    scope: { user_id: '*' },
    algorithm: { type: 'fixed_window', limit: TARGET_LIMIT, window: '1m' },
  });
  if (!validated.ok) throw new Error(JSON.stringify(validated.errors));
  const policy = { ...validated.policy, version: 1, created_at: new Date(0).toISOString(), updated_at: new Date(0).toISOString() };
  const contexts: RequestContext[] = Array.from({ length: USERS }, (_, i) => parseRequestContext({ user_id: `u${i}` }));
  const sequence = zipfSequence(USERS, 1 << 16);

  // A generous deadline: this measures CPU, and a shared machine's stalls must not turn into failure modes.
  const options = { commandTimeoutMs: 5_000 };
  const transports = {
    tcp: connectRedisCounterStore(`redis://127.0.0.1:${redis.port}`, options),
    unix: connectRedisCounterStore(`redis+unix://${redis.socketPath}`, options),
  };
  const results: Record<keyof typeof transports, Round[]> = { tcp: [], unix: [] };
  try {
    for (const store of Object.values(transports)) await store.waitUntilReady();
    const services = Object.fromEntries(
      Object.entries(transports).map(([name, counters]) => [name, new DecisionService({ policies: new LiveMatcher([policy]), counters, keyPrefix: `bench:${name}:` })]),
    ) as Record<keyof typeof transports, DecisionService>;

    // Warm-up: JIT and connections, both transports.
    for (const name of ['tcp', 'unix'] as const) await run(services[name], contexts, sequence, decisions / 4, inFlight);
    for (let r = 0; r < rounds; r++) {
      const order = r % 2 === 0 ? (['tcp', 'unix'] as const) : (['unix', 'tcp'] as const);
      for (const name of order) results[name].push(await measure(redis, services[name], contexts, sequence, decisions, inFlight));
    }
  } finally {
    await Promise.all(Object.values(transports).map((store: RedisCounterStore) => store.close()));
    await redis.kill();
  }

  const summarize = (measured: Round[]) => ({
    node_cpu_us_per_decision: round2(median(measured.map((r) => r.nodeCpuUsPerDecision))),
    redis_cpu_us_per_decision: round2(median(measured.map((r) => r.redisCpuUsPerDecision))),
    decisions_per_sec: Math.round(median(measured.map((r) => r.decisionsPerSec))),
    node_cpu_spread: spread(measured.map((r) => r.nodeCpuUsPerDecision)),
    redis_cpu_spread: spread(measured.map((r) => r.redisCpuUsPerDecision)),
  });
  const summary = { tcp: summarize(results.tcp), unix: summarize(results.unix) };
  const report = {
    redis: redis.version,
    pinned,
    rounds,
    decisions_per_round: decisions,
    in_flight: inFlight,
    ...summary,
    ratio_unix_to_tcp: {
      node_cpu: round2(summary.unix.node_cpu_us_per_decision / summary.tcp.node_cpu_us_per_decision),
      redis_cpu: round2(summary.unix.redis_cpu_us_per_decision / summary.tcp.redis_cpu_us_per_decision),
      decisions_per_sec: round2(summary.unix.decisions_per_sec / summary.tcp.decisions_per_sec),
    },
  };
  console.log(JSON.stringify(report, null, 2));
});

async function measure(
  redis: PrivateRedis,
  service: DecisionService,
  contexts: RequestContext[],
  sequence: Int32Array,
  count: number,
  inFlight: number,
): Promise<Round> {
  const redisBefore = redisCpuSeconds(redis);
  const cpuBefore = process.cpuUsage();
  const start = performance.now();
  await run(service, contexts, sequence, count, inFlight);
  const elapsedMs = performance.now() - start;
  const cpu = process.cpuUsage(cpuBefore);
  const redisSeconds = redisCpuSeconds(redis) - redisBefore;
  return {
    nodeCpuUsPerDecision: (cpu.user + cpu.system) / count,
    redisCpuUsPerDecision: (redisSeconds * 1e6) / count,
    decisionsPerSec: count / (elapsedMs / 1000),
  };
}

/** `count` decisions, `inFlight` at a time; a decision that did not count is an error (not a figure). */
async function run(service: DecisionService, contexts: RequestContext[], sequence: Int32Array, count: number, inFlight: number): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const i = next++;
      const decision = await service.check(contexts[sequence[i & (sequence.length - 1)]]);
      if (decision.reason !== 'within_limit') throw new Error(`decision ${i}: ${JSON.stringify(decision)}`);
    }
  };
  await Promise.all(Array.from({ length: inFlight }, worker));
}

function redisCpuSeconds(redis: PrivateRedis): number {
  const info = redis.cli('INFO', 'cpu');
  const field = (name: string) => Number(new RegExp(`^${name}:([0-9.]+)`, 'm').exec(info)?.[1] ?? NaN);
  return field('used_cpu_sys') + field('used_cpu_user');
}

/** `min–max` over the rounds. */
function spread(values: number[]): string {
  return `${round2(Math.min(...values))}–${round2(Math.max(...values))}`;
}

function round2(n: number): number {
  return Math.round(n * 100) / 100;
}
