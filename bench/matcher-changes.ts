/**
 * Policy changes at scale (issue 15, target 5), in one process, no HTTP: what one create/update/delete
 * costs the event loop with POLICIES policies (default 100,000), what start-up costs, what
 * Matcher.match costs per call, and the decision latency while CHANGES_PER_S changes land.
 *
 *   npx tsx --expose-gc bench/matcher-changes.ts   # POLICIES, CHANGES, MATCH_CALLS, CHURN_S, DECISIONS_PER_S, STORE_CHANGES
 *   BEFORE_TREE=/tmp/old npx tsx bench/matcher-changes.ts   # also Matcher.match side by side with an
 *                                                          # older checkout's (git worktree add /tmp/old <rev>)
 *
 * Runs unchanged against an older tree (before incremental updates): when LiveMatcher has no `apply`,
 * a change is applied as that version did, by `replace(store.list())` — a sorted copy of every policy
 * and a full rebuild.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PerformanceObserver, performance } from 'node:perf_hooks';
import { MemoryCounterStore } from '../src/counters/memory-store.js';
import { DecisionService } from '../src/decision/decision-service.js';
import { SCOPE_FIELDS, type RequestContext } from '../src/model/request-context.js';
import { FilePolicyStore } from '../src/policy-store/file-policy-store.js';
import { LiveMatcher } from '../src/matching/live-matcher.js';
import { PolicyService } from '../src/policy-service/policy-service.js';
import { Matcher } from '../src/matching/matcher.js';
import { byPolicyId } from '../src/policy-store/policy-store.js';
import type { Policy } from '../src/policy/types.js';
import { generateWorkload, prng } from './lib/workload.js';

const POLICIES = Number(process.env.POLICIES ?? 100_000);
const CHANGES = Number(process.env.CHANGES ?? 30);
const MATCH_CALLS = Number(process.env.MATCH_CALLS ?? 1_000_000);
const CHURN_S = Number(process.env.CHURN_S ?? 5);
const CHANGES_PER_S = Number(process.env.CHANGES_PER_S ?? 100);
const DECISIONS_PER_S = Number(process.env.DECISIONS_PER_S ?? 5_000);
/** Changes sent through PolicyService and the file store (0: that part is skipped; seeding takes a while). */
const STORE_CHANGES = Number(process.env.STORE_CHANGES ?? 600);
const NOW = Date.now();

const incremental = typeof (LiveMatcher.prototype as { apply?: unknown }).apply === 'function';
const random = prng(7);

function percentile(sorted: number[], q: number): number {
  return sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}
const fmt = (ms: number | undefined) => (ms === undefined || Number.isNaN(ms) ? "-" : ms < 1 ? `${(ms * 1000).toFixed(0)} µs` : `${ms.toFixed(2)} ms`);

/** The policies as the store holds them, and the one change path of the tree under test. */
class Policies {
  readonly current = new Map<string, Policy>();
  constructor(policies: Policy[]) {
    for (const p of policies) this.current.set(p.policy_id, p);
  }
  /** A store's list(): sorted by policy_id, as the store re-sorts after a change. */
  list(): Policy[] {
    return [...this.current.values()].sort(byPolicyId);
  }
  change(live: LiveMatcher, id: string, policy: Policy | undefined): void {
    if (policy) this.current.set(id, policy);
    else this.current.delete(id);
    if (incremental) (live as unknown as { apply(id: string, p: Policy | undefined): void }).apply(id, policy);
    else live.replace(this.list());
  }
}

/** The i-th change of a repeating create / update / delete cycle. */
function nextChange(policies: Policies, ids: string[], i: number): [string, Policy | undefined] {
  const kind = i % 3;
  if (kind === 0) {
    const template = policies.current.get(ids[Math.floor(random() * ids.length)])!;
    const id = `bench-new-${i}`;
    return [id, { ...template, policy_id: id, version: 1, scope: { ...template.scope, tenant_id: `new-tenant-${i}` } }];
  }
  if (kind === 1) {
    const id = ids[Math.floor(random() * ids.length)];
    const p = policies.current.get(id)!;
    return [id, { ...p, priority: p.priority + 1, version: p.version + 1 }];
  }
  return [`bench-new-${i - 2}`, undefined];
}

/** Requests that hit a variety of buckets: each from a random policy's exact values, `*` fields filled. */
function contextsFor(policies: Policy[], n: number): RequestContext[] {
  const out: RequestContext[] = [];
  for (let i = 0; i < n; i++) {
    const p = policies[Math.floor(random() * policies.length)];
    const ctx: RequestContext = { quantity: 1, tags: {} };
    for (const field of SCOPE_FIELDS) {
      const v = p.scope[field];
      if (v !== undefined) (ctx as unknown as Record<string, string>)[field] = v === '*' ? `u-${i % 50}` : v;
    }
    if (p.scope.tags) for (const [k, v] of Object.entries(p.scope.tags)) ctx.tags![k] = v === '*' ? 'x' : v;
    out.push(ctx);
  }
  return out;
}

async function main(): Promise<void> {
  console.log(`matcher-changes: ${POLICIES} policies, ${incremental ? 'incremental apply' : 'rebuild per change (older tree)'}, node ${process.version}`);
  const workload = generateWorkload(POLICIES);
  const ids = workload.policies.map((p) => p.policy_id);

  // Start-up: the first build, as PolicyService does it from store.list().
  const builds: number[] = [];
  let live!: LiveMatcher;
  for (let i = 0; i < 3; i++) {
    const sorted = [...workload.policies].sort(byPolicyId);
    const heapBefore = process.memoryUsage().heapUsed;
    const t0 = performance.now();
    live = new LiveMatcher(sorted);
    builds.push(performance.now() - t0);
    if (i === 2) console.log(`start-up build: ${builds.map(fmt).join(', ')} (heap +${((process.memoryUsage().heapUsed - heapBefore) / 1e6).toFixed(0)} MB, GC not forced)`);
  }

  // One change at a time: the event-loop time each costs.
  const policies = new Policies(workload.policies);
  const changeMs: number[] = [];
  const changes = incremental ? CHANGES : Math.min(CHANGES, 6);
  for (let i = 0; i < changes; i++) {
    const [id, policy] = nextChange(policies, ids, i);
    const t0 = performance.now();
    policies.change(live, id, policy);
    changeMs.push(performance.now() - t0);
  }
  changeMs.sort((a, b) => a - b);
  console.log(`one change (${changes} create/update/delete): median ${fmt(percentile(changeMs, 0.5))}, max ${fmt(changeMs[changeMs.length - 1])}`);

  // Matcher.match per call.
  const contexts = contextsFor(workload.policies, 1024);
  const matcher = live.current();
  const rounds: number[] = [];
  let sink = 0;
  for (let r = 0; r < 6; r++) {
    // CPU time, not wall time: steadier on a machine shared with other work.
    const cpu = process.cpuUsage();
    for (let i = 0; i < MATCH_CALLS; i++) if (matcher.match(contexts[i & 1023], 'rate', NOW).enforce) sink++;
    const used = process.cpuUsage(cpu);
    if (r > 0) rounds.push(((used.user + used.system) * 1e3) / MATCH_CALLS); // the first round warms up
  }
  rounds.sort((a, b) => a - b);
  console.log(`Matcher.match: median ${rounds[2].toFixed(0)} ns/op CPU (rounds ${rounds.map((x) => x.toFixed(0)).join(', ')}; ${sink > 0 ? 'matched' : 'nothing matched'})`);

  // Side by side with another tree's Matcher (BEFORE_TREE=/path/to/checkout), in alternating rounds in
  // this one process: whatever else runs on the machine slows both alike.
  const beforeTree = process.env.BEFORE_TREE;
  if (beforeTree) {
    type Built = { match(ctx: RequestContext, family: 'rate', now: number): { enforce?: unknown } };
    const other = (await import(join(beforeTree, existsSync(join(beforeTree, 'src/matching/matcher.ts')) ? 'src/matching/matcher.ts' : 'src/policy/matcher.ts'))) as { Matcher: { build(p: Policy[]): Built } };
    const set = [...policies.current.values()].sort(byPolicyId);
    // Both built here, the same way, from the same set; and the live one that took the changes above.
    const sides: [string, Built][] = [
      [`${beforeTree}, built`, other.Matcher.build(set)],
      ['this tree, built', Matcher.build(set)],
      [`this tree, after ${changes} incremental changes`, live.current()],
    ];
    const perOp = sides.map((): number[] => []);
    for (let r = 0; r < 12; r++) {
      for (const [k, [, m]] of sides.entries()) {
        const cpu = process.cpuUsage();
        for (let i = 0; i < MATCH_CALLS; i++) if (m.match(contexts[i & 1023], 'rate', NOW).enforce) sink++;
        const used = process.cpuUsage(cpu);
        if (r >= 2) perOp[k].push(((used.user + used.system) * 1e3) / MATCH_CALLS);
      }
    }
    for (const [k, [name]] of sides.entries()) {
      const xs = perOp[k].sort((a, b) => a - b);
      console.log(`Matcher.match side by side, ${name}: min ${xs[0].toFixed(0)}, median ${xs[Math.floor(xs.length / 2)].toFixed(0)} ns/op CPU`);
    }
  }

  // Decisions (in-memory counters) paced at DECISIONS_PER_S while CHANGES_PER_S changes land: a decision's
  // latency counts from when it was due, so a change that blocks the loop shows in it.
  // Garbage of the earlier builds is collected first (when run with --expose-gc), so the churn measures changes.
  (globalThis as { gc?: () => void }).gc?.();
  const service = new DecisionService({ policies: live, counters: new MemoryCounterStore(), keyPrefix: 'bench' });
  const latencies: number[] = [];
  const changeDuring: number[] = [];
  const gcPauses: number[] = [];
  const gc = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) gcPauses.push(entry.duration);
  });
  gc.observe({ entryTypes: ['gc'] });
  let applied = 0;
  await new Promise<void>((resolve) => {
    const start = performance.now();
    const end = start + CHURN_S * 1000;
    const gap = 1000 / DECISIONS_PER_S;
    let due = start;
    let k = 0;
    const changer = setInterval(() => {
      const [id, policy] = nextChange(policies, ids, changes + applied);
      const t0 = performance.now();
      policies.change(live, id, policy);
      changeDuring.push(performance.now() - t0);
      applied++;
    }, 1000 / CHANGES_PER_S);
    // Busy-waits in slices of 0.5 ms, so a decision runs when it is due, and yields between slices
    // (where the changes run): a yield per due decision would make more garbage than the decisions.
    const tick = () => {
      const sliceEnd = performance.now() + 0.5;
      let now: number;
      do {
        now = performance.now();
        while (due <= now) {
          void service.decideNow('check', contexts[k++ & 1023]);
          latencies.push(performance.now() - due);
          due += gap;
        }
      } while (now < sliceEnd && now < end);
      if (now < end) setImmediate(tick);
      else {
        clearInterval(changer);
        resolve();
      }
    };
    setImmediate(tick);
  });
  gc.disconnect();
  latencies.sort((a, b) => a - b);
  changeDuring.sort((a, b) => a - b);
  gcPauses.sort((a, b) => a - b);
  const gcTotal = gcPauses.reduce((a, b) => a + b, 0);
  console.log(`  changes during churn: p50 ${fmt(percentile(changeDuring, 0.5))}, p99 ${fmt(percentile(changeDuring, 0.99))}, max ${fmt(changeDuring[changeDuring.length - 1] ?? NaN)}`);
  console.log(`  GC during churn: ${gcPauses.length} pauses, ${fmt(gcTotal)} in all, longest ${fmt(gcPauses[gcPauses.length - 1] ?? 0)}`);
  console.log(
    `decisions during churn: ${latencies.length} decisions, ${applied} changes in ${CHURN_S} s; latency from due time p50 ${fmt(percentile(latencies, 0.5))}, p99 ${fmt(percentile(latencies, 0.99))}, max ${fmt(latencies[latencies.length - 1])}`,
  );
}

/**
 * The whole change path but HTTP: PolicyService (validation, version, audit) over a FilePolicyStore (the
 * journal append: lock check, write, fdatasync) and the LiveMatcher, one change at a time. Event-loop
 * time is what the main thread spent busy (everything else waits for it); process CPU adds the libuv
 * threads (the fdatasync's kernel work) and V8's helpers, which share the server's core in the bench.
 */
async function storeChanges(policies: Policy[]): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'rl-matcher-changes-'));
  const store = await FilePolicyStore.open(dir);
  try {
    await store.seedIfEmpty(() => policies);
    const service = new PolicyService({ store, matcher: new LiveMatcher() });
    const sample = policies.filter((_, i) => i % 100 === 0);
    const bodyOf = (p: Policy, changes: Record<string, unknown>) => {
      const { version: _v, created_at: _c, updated_at: _u, ...rest } = p;
      return { ...structuredClone(rest), ...changes };
    };
    const run = async (prefix: string, n: number) => {
      for (let i = 0; i < n; i++) {
        const source = sample[(i * 7919) % sample.length];
        if (i % 3 === 0) await service.create(bodyOf(source, { policy_id: `${prefix}-${i}`, priority: 50 }), 'bench');
        else if (i % 3 === 1) await service.replace(source.policy_id, bodyOf(source, { priority: (i % 20) + 1 }), 'bench');
        else await service.delete(`${prefix}-${i - 2}`, 'bench');
      }
    };
    // Warm-up; the first change after seeding compacts the seeded journal (once).
    await run('warm', 150);
    await store.settled();
    const rounds: string[] = [];
    for (let r = 0; r < 3; r++) {
      const loop = performance.eventLoopUtilization();
      const cpu = process.cpuUsage();
      const t0 = performance.now();
      await run(`r${r}`, STORE_CHANGES);
      const wall = performance.now() - t0;
      const used = process.cpuUsage(cpu);
      const active = performance.eventLoopUtilization(loop).active;
      rounds.push(`event loop ${fmt(active / STORE_CHANGES)}, process CPU ${fmt((used.user + used.system) / 1000 / STORE_CHANGES)}, wall ${fmt(wall / STORE_CHANGES)}`);
    }
    console.log(`one change through PolicyService + FilePolicyStore (${STORE_CHANGES} a round, no HTTP):\n  ${rounds.join('\n  ')}`);
    service.close();
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
if (STORE_CHANGES > 0) await storeChanges(generateWorkload(POLICIES).policies);
