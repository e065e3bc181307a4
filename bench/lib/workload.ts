import { StringPool, storedPolicy } from '../../src/policy/stored-policy.js';
import { validatePolicy } from '../../src/policy/validate.js';
import type { Policy } from '../../src/policy/types.js';

/**
 * The workload every scenario shares: a realistic policy set of any size, the request bodies sent to
 * it, and the Zipf-skewed key sequence of the in-process engine scenario. Everything is deterministic
 * (seeded), so two runs and the subject and its baseline see the same traffic.
 */

/** mulberry32: a small, fast, seeded PRNG (uniform in [0, 1)). */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * `length` key indexes in [0, keys) drawn from a Zipf distribution with exponent `s` (rank 0 the most
 * frequent): with 10,000 keys and s = 1 the top key gets ~10% of the traffic, the top 100 ~53%.
 */
export function zipfSequence(keys: number, length: number, s = 1, seed = 42): Int32Array {
  const cdf = new Float64Array(keys);
  let total = 0;
  for (let k = 0; k < keys; k++) cdf[k] = total += 1 / (k + 1) ** s;
  for (let k = 0; k < keys; k++) cdf[k] /= total;
  const random = prng(seed);
  const out = new Int32Array(length);
  for (let i = 0; i < length; i++) {
    const u = random();
    let lo = 0;
    let hi = keys - 1;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (cdf[mid] < u) lo = mid + 1;
      else hi = mid;
    }
    out[i] = lo;
  }
  return out;
}

const ENDPOINTS = [
  '/api/orders', '/api/orders/{id}', '/api/cart', '/api/checkout', '/api/search', '/api/users/{id}',
  '/api/products', '/api/products/{id}', '/api/inventory', '/api/payments', '/api/refunds', '/api/reports',
  '/api/exports', '/api/webhooks', '/api/sessions', '/api/login', '/api/logout', '/api/profile',
  '/api/settings', '/api/notifications',
];
const REGIONS = ['eu-west-1', 'us-east-1', 'us-west-2', 'ap-south-1'];
const ALGORITHMS = [
  { type: 'fixed_window', limit: 1000, window: '1m' },
  { type: 'token_bucket', limit: 600, window: '1m', burst: 100 },
  { type: 'sliding_window_counter', limit: 1200, window: '1m', sub_window_count: 6 },
  { type: 'fixed_window', limit: 100_000, window: '1h' },
  { type: 'leaky_bucket', limit: 50, window: '1s', burst: 200 },
] as const;

/** Limit of the policy the benchmark requests match: high, so the measured path is the common "allowed" one. */
export const TARGET_LIMIT = 1_000_000_000;
export const TARGET_WINDOW = '1m';
export const TARGET_WINDOW_SECONDS = 60;

export interface Workload {
  policies: Policy[];
  /** The policy every benchmark request matches. */
  targetPolicyId: string;
  /** Request bodies that match the target policy, one per user (its `*` field), JSON-ready. */
  bodies: Record<string, string>[];
}

/**
 * `count` policies shaped like a real multi-tenant deployment: mostly exact-scoped (per tenant, per
 * endpoint, per service, a `*` field for the counter identity), a few tag-scoped, shadow-mode and
 * match_expr policies, and three global wildcard-only defaults (the fallback list every request scans:
 * it stays three however many policies there are, as in real deployments). Every policy goes through
 * validatePolicy like a policy file does. The requests match policy number `count / 2`, a per-tenant,
 * per-endpoint, per-user fixed window.
 */
export function generateWorkload(count: number, users = 1000): Workload {
  if (count < 4) throw new Error('at least 4 policies');
  const raws: Record<string, unknown>[] = [
    global('global-per-ip', { source_ip: '*' }, { type: 'token_bucket', limit: 100_000, window: '1m', burst: 5000 }),
    global('global-per-api-key', { api_key: '*' }, { type: 'fixed_window', limit: 1_000_000, window: '1h' }),
    global('global-per-client', { client_id: '*' }, { type: 'sliding_window_counter', limit: 100_000, window: '1m', sub_window_count: 6 }),
  ];
  const generated = count - raws.length;
  const targetIndex = Math.floor(generated / 2);
  const orgs = Math.max(1, Math.ceil(generated / 50));
  for (let i = 0; i < generated; i++) {
    const org = `org-${(i * 7919) % orgs}`;
    const tenant = `tenant-${i}`;
    const endpoint = ENDPOINTS[i % ENDPOINTS.length];
    const algorithm = ALGORITHMS[i % ALGORITHMS.length];
    const id = `p-${String(i).padStart(6, '0')}`;
    const kind = i === targetIndex ? 0 : i % 100;
    if (kind < 80) {
      raws.push({
        policy_id: i === targetIndex ? 'target-per-user' : id,
        name: `${tenant} ${endpoint} per user`,
        priority: i % 10,
        scope: { org_id: org, tenant_id: tenant, endpoint, signal_type: 'http', user_id: '*' },
        algorithm: i === targetIndex ? { type: 'fixed_window', limit: TARGET_LIMIT, window: TARGET_WINDOW } : algorithm,
        action: 'deny',
        failure_mode: 'fail_open',
      });
    } else if (kind < 90) {
      raws.push({
        policy_id: id,
        name: `${tenant} per API key`,
        scope: { org_id: org, tenant_id: tenant, signal_type: 'http', api_key: '*' },
        algorithm,
        action: i % 2 ? 'delay' : 'deny',
      });
    } else if (kind < 95) {
      raws.push({
        policy_id: id,
        name: `service svc-${i} in ${REGIONS[i % REGIONS.length]}`,
        scope: { org_id: org, service: `svc-${i}`, environment: 'prod', region: REGIONS[i % REGIONS.length] },
        algorithm,
        failure_mode: 'fail_closed',
      });
    } else if (kind < 98) {
      raws.push({
        policy_id: id,
        name: `${tenant} tagged`,
        scope: { tenant_id: tenant, tags: { env: 'prod', tier: `tier-${i % 3}` } },
        algorithm,
        action: 'downgrade',
      });
    } else if (kind < 99) {
      raws.push({
        policy_id: id,
        name: `${tenant} stricter (shadow)`,
        scope: { org_id: org, tenant_id: tenant, endpoint, user_id: '*' },
        algorithm: { type: 'fixed_window', limit: 10, window: '1m' },
        enforcement_mode: 'shadow',
      });
    } else {
      raws.push({
        policy_id: id,
        name: `${tenant} debug logs`,
        scope: { tenant_id: tenant, signal_type: 'log', application: '*' },
        algorithm: { type: 'leaky_bucket', limit: 1000, window: '1s', burst: 5000, sample_rate: 0.1 },
        action: 'sample',
        metadata: { match_expr: 'severity in ["debug", "info"]' },
      });
    }
  }
  const now = new Date().toISOString();
  const strings = new StringPool();
  const policies = raws.map((raw) => {
    const result = validatePolicy(raw);
    if (!result.ok) throw new Error(`generated policy ${String(raw.policy_id)} is invalid: ${JSON.stringify(result.errors)}`);
    return storedPolicy(result.policy, 1, now, now, strings);
  });

  const org = `org-${(targetIndex * 7919) % orgs}`;
  const bodies: Record<string, string>[] = [];
  for (let u = 0; u < users; u++) {
    bodies.push({
      request_id: `req-${u}`,
      org_id: org,
      tenant_id: `tenant-${targetIndex}`,
      signal_type: 'http',
      endpoint: ENDPOINTS[targetIndex % ENDPOINTS.length],
      method: 'POST',
      user_id: `user-${u}`,
      region: 'eu-west-1',
    });
  }
  return { policies, targetPolicyId: 'target-per-user', bodies };
}

function global(policy_id: string, scope: Record<string, string>, algorithm: Record<string, unknown>): Record<string, unknown> {
  return { policy_id, name: policy_id, priority: -1, scope, algorithm, action: 'deny' };
}

/** The fixed decision the bare baselines answer with: the same shape and size as a real one. */
export const FIXED_DECISION = {
  allowed: true,
  action: 'allow',
  reason: 'within_limit',
  matched_policy_id: 'target-per-user',
  remaining: 999_999_999,
  retry_after: 0,
  reset_after: 41_234,
  limit: TARGET_LIMIT,
  shadow_mode: false,
  metadata: {},
};

/**
 * Scenario 9 (hot key under attack): a per-user limit for one tenant, and one of its users far over it.
 * A fixed window of 100 per minute, so the attacker is refused for the rest of each minute once it has
 * spent its 100.
 */
export const HOT_KEY_POLICY: Policy = (() => {
  const result = validatePolicy({
    policy_id: 'attack-per-user',
    name: 'tenant-attack per user',
    scope: { tenant_id: 'tenant-attack', signal_type: 'http', user_id: '*' },
    algorithm: { type: 'fixed_window', limit: 100, window: '1m' },
    action: 'deny',
  });
  if (!result.ok) throw new Error(`hot key policy invalid: ${JSON.stringify(result.errors)}`);
  const now = new Date().toISOString();
  return storedPolicy(result.policy, 1, now, now);
})();

/**
 * Scenario 17 (stacked layers): the target request decided by three layers, its per-user policy in
 * `default` plus one per organisation in `org` and one for all HTTP traffic in `platform` (docs/matching.md).
 * Limits as the target's, so every measured decision is the common "allowed" one, in every layer.
 */
export const LAYER_POLICIES: Policy[] = [
  { policy_id: 'layer-org', layer: 'org', scope: { org_id: '*', signal_type: 'http' } },
  { policy_id: 'layer-platform', layer: 'platform', scope: { signal_type: 'http' } },
].map(({ policy_id, layer, scope }) => {
  const result = validatePolicy({ policy_id, layer, scope, algorithm: { type: 'fixed_window', limit: TARGET_LIMIT, window: TARGET_WINDOW }, action: 'deny' });
  if (!result.ok) throw new Error(`layer policy invalid: ${JSON.stringify(result.errors)}`);
  const now = new Date().toISOString();
  return storedPolicy(result.policy, 1, now, now);
});

/**
 * Scenario 12 (process leases): one hot counter with a lease, never exhausted during a run
 * (LEASE_HOT_BODY), and one with a small quota that a run spends (LEASE_CAPPED_BODY), to count never-over.
 */
export const LEASE_CAPPED_LIMIT = 2_000;
export const LEASE_POLICIES: Policy[] = [
  { policy_id: 'lease-hot', tenant: 'tenant-lease', algorithm: { type: 'fixed_window', limit: TARGET_LIMIT, window: '1m' }, max_units: 10_000 },
  { policy_id: 'lease-capped', tenant: 'tenant-lease-capped', algorithm: { type: 'quota', limit: LEASE_CAPPED_LIMIT, quota_period: '1h' }, max_units: 1_000 },
].map(({ policy_id, tenant, algorithm, max_units }) => {
  const result = validatePolicy({ policy_id, scope: { tenant_id: tenant }, algorithm, lease: { max_units, max_hold: '1s' } });
  if (!result.ok) throw new Error(`lease policy invalid: ${JSON.stringify(result.errors)}`);
  const now = new Date().toISOString();
  return { ...result.policy, version: 1, created_at: now, updated_at: now };
});
export const LEASE_HOT_BODY: Record<string, string> = { request_id: 'req-lease', tenant_id: 'tenant-lease', signal_type: 'http', endpoint: '/api/hot', user_id: 'u1' };
export const LEASE_CAPPED_BODY: Record<string, string> = { ...LEASE_HOT_BODY, tenant_id: 'tenant-lease-capped' };

/**
 * Scenario 13 (regions): one global budget never exhausted during a run (REGION_HOT_BODY), and one that a
 * run spends (REGION_CAPPED_BODY), to count never-over and utilisation across two regions. Without
 * regions configured `budget: "global"` means the one store there is: the baseline's same policies.
 */
export const REGION_CAPPED_LIMIT = 2_000;
export const REGION_POLICIES: Policy[] = [
  // An hour's window: a latency run rarely spans a window end (where every region waits once for the new window's units).
  { policy_id: 'region-hot', tenant: 'tenant-region', algorithm: { type: 'fixed_window', limit: TARGET_LIMIT, window: '1h' } },
  { policy_id: 'region-capped', tenant: 'tenant-region-capped', algorithm: { type: 'fixed_window', limit: REGION_CAPPED_LIMIT, window: '1h' } },
].map(({ policy_id, tenant, algorithm }) => {
  const result = validatePolicy({ policy_id, scope: { tenant_id: tenant }, algorithm, budget: 'global' });
  if (!result.ok) throw new Error(`region policy invalid: ${JSON.stringify(result.errors)}`);
  const now = new Date().toISOString();
  return { ...result.policy, version: 1, created_at: now, updated_at: now };
});
/**
 * Scenarios 14 and 15 (link faults, refills ahead): global fixed windows per user, so every run spends a
 * counter of its own (a fresh user_id) from its first unit. REGION_FAULTS fails closed: failure-mode
 * answers are refusals, and every admitted decision was admitted by the budget.
 */
export const REGION_REFILL_LIMIT = 1_000;
export const REGION_FAULTS_LIMIT = 2_000;
export const REGION_WINDOW_POLICIES: Policy[] = [
  { policy_id: 'region-refill', tenant: 'tenant-region-refill', limit: REGION_REFILL_LIMIT, budget: 'global' },
  { policy_id: 'region-faults', tenant: 'tenant-region-faults', limit: REGION_FAULTS_LIMIT, budget: 'global' },
  // Scenario 15's baseline: the same window counted in each region's own store (one regional round trip, never a global one).
  { policy_id: 'region-local', tenant: 'tenant-region-local', limit: REGION_REFILL_LIMIT, budget: 'regional' },
].map(({ policy_id, tenant, limit, budget }) => {
  const result = validatePolicy({
    policy_id,
    scope: { tenant_id: tenant, user_id: '*' },
    algorithm: { type: 'fixed_window', limit, window: '1h' },
    budget,
    failure_mode: 'fail_closed',
  });
  if (!result.ok) throw new Error(`region policy invalid: ${JSON.stringify(result.errors)}`);
  const now = new Date().toISOString();
  return { ...result.policy, version: 1, created_at: now, updated_at: now };
});
export const regionWindowBody = (policyId: 'region-refill' | 'region-faults' | 'region-local', userId: string): Record<string, string> => ({
  request_id: 'req-region-window',
  tenant_id: `tenant-${policyId}`,
  signal_type: 'http',
  endpoint: '/api/hot',
  user_id: userId,
});
export const REGION_HOT_BODY: Record<string, string> = { request_id: 'req-region', tenant_id: 'tenant-region', signal_type: 'http', endpoint: '/api/hot', user_id: 'u1' };
export const REGION_CAPPED_BODY: Record<string, string> = { ...REGION_HOT_BODY, tenant_id: 'tenant-region-capped' };

/** The attacking identity's request: matches HOT_KEY_POLICY only. */
export const HOT_KEY_BODY: Record<string, string> = {
  request_id: 'req-attack',
  tenant_id: 'tenant-attack',
  signal_type: 'http',
  endpoint: '/api/login',
  method: 'POST',
  user_id: 'attacker',
  region: 'eu-west-1',
};
