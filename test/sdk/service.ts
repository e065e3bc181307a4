/**
 * The real rate-limit server as a child process for the SDK suites, with the policies below, in
 * memory mode (file policy store in a temp dir) or Redis mode (a private redis-server, per-suite key
 * prefix). `decisionCalls()` reads the server's own count of decisions from /metrics, so tests can
 * tell exactly how many calls reached it.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomPrefix, startPrivateRedis, type RedisHandle } from '../support/redis.js';
import { startServerProcess, type ServerProcessHandle } from '../support/server-process.js';

/** One policy per route of the test apps; every one counts per user, so each test isolates by user id. */
export const SDK_TEST_POLICIES = [
  { policy_id: 'sdk-deny', scope: { endpoint: '/deny', user_id: '*' }, algorithm: { type: 'fixed_window', limit: 3, window: '1h' }, action: 'deny' },
  { policy_id: 'sdk-drop', scope: { endpoint: '/drop', user_id: '*' }, algorithm: { type: 'fixed_window', limit: 1, window: '1h' }, action: 'drop' },
  {
    policy_id: 'sdk-low-priority',
    scope: { endpoint: '/low-priority', user_id: '*' },
    algorithm: { type: 'fixed_window', limit: 1, window: '1h' },
    action: 'drop_low_priority',
    metadata: { min_severity: 'warn' },
  },
  { policy_id: 'sdk-sample', scope: { endpoint: '/sample', user_id: '*' }, algorithm: { type: 'fixed_window', limit: 1, window: '1h', sample_rate: 0 }, action: 'sample' },
  { policy_id: 'sdk-downgrade', scope: { endpoint: '/downgrade', user_id: '*' }, algorithm: { type: 'fixed_window', limit: 1, window: '1h' }, action: 'downgrade' },
  {
    policy_id: 'sdk-shadow',
    scope: { endpoint: '/shadow', user_id: '*' },
    algorithm: { type: 'fixed_window', limit: 1, window: '1h' },
    action: 'deny',
    enforcement_mode: 'shadow',
  },
  // One token per 200 ms: a second request is told to wait at most 200 ms, within maxDelayMs.
  { policy_id: 'sdk-delay', scope: { endpoint: '/delay', user_id: '*' }, algorithm: { type: 'token_bucket', limit: 5, window: '1s', burst: 1, refill_rate: 5 }, action: 'delay' },
  // One token per 100 s: far beyond maxDelayMs, so the second request is refused at once.
  { policy_id: 'sdk-delay-long', scope: { endpoint: '/delay-long', user_id: '*' }, algorithm: { type: 'token_bucket', limit: 1, window: '100s', burst: 1 }, action: 'delay' },
  { policy_id: 'sdk-slots', scope: { endpoint: '/slow', user_id: '*' }, algorithm: { type: 'concurrency', max_concurrency: 2, lease_ttl: 120 }, action: 'deny' },
  { policy_id: 'sdk-slots-error', scope: { endpoint: '/fails', user_id: '*' }, algorithm: { type: 'concurrency', max_concurrency: 2, lease_ttl: 120 }, action: 'deny' },
  { policy_id: 'sdk-tokens', scope: { endpoint: '/llm', user_id: '*' }, algorithm: { type: 'quota', limit: 100, quota_period: '1h' }, action: 'deny' },
  // The deny-cache suite: one unit per 3 s sliding log, so a refusal carries a retry_after of up to 3 s.
  { policy_id: 'sdk-flood', scope: { resource: 'flood', user_id: '*' }, algorithm: { type: 'sliding_window_log', limit: 1, window: '3s' }, action: 'deny' },
  { policy_id: 'sdk-plain', scope: { resource: 'plain', user_id: '*' }, algorithm: { type: 'fixed_window', limit: 5, window: '1h' }, action: 'deny' },
];

export type StoreMode = 'memory' | 'redis';

export interface Service {
  url: string;
  /** Redis mode: the Redis and key prefix the server keeps its policies and counters under. */
  redisAddr?: string;
  keyPrefix?: string;
  grpcTarget: string;
  process: ServerProcessHandle;
  /** `rl_decisions_total` summed over every operation and outcome (peeks are not counted). */
  decisionCalls(): Promise<number>;
  stop(): Promise<void>;
}

export interface ServiceOptions {
  env?: Record<string, string>;
  /** Reuse this Redis (Redis mode) instead of starting one. */
  redis?: RedisHandle;
}

/** Starts the server with SDK_TEST_POLICIES; `stop` also removes the temp dir and the private Redis. */
export async function startService(mode: StoreMode, options: ServiceOptions = {}): Promise<Service> {
  const dir = mkdtempSync(join(tmpdir(), 'rl-sdk-'));
  const policyFile = join(dir, 'policies.json');
  writeFileSync(policyFile, JSON.stringify({ policies: SDK_TEST_POLICIES }));
  const ownRedis = mode === 'redis' && options.redis === undefined ? await startPrivateRedis() : undefined;
  const redis = options.redis ?? ownRedis;
  const env: Record<string, string> = { RL_POLICY_FILE: policyFile, RL_DATA_DIR: join(dir, 'data'), ...options.env };
  const keyPrefix = redis ? randomPrefix() : undefined;
  if (redis) Object.assign(env, { RL_COUNTERSTORE_ADDR: redis.url, RL_KEY_PREFIX: keyPrefix });
  let process: ServerProcessHandle;
  try {
    process = await startServerProcess(env);
  } catch (error) {
    await ownRedis?.stop();
    throw error;
  }
  const listening = process.logs().find((l) => l.message === 'listening')!;
  return {
    url: process.url,
    redisAddr: redis?.url,
    keyPrefix,
    grpcTarget: `127.0.0.1:${listening.grpc as number}`,
    process,
    decisionCalls: () => decisionCalls(process.url),
    stop: async () => {
      await process.kill();
      await ownRedis?.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export async function decisionCalls(url: string, headers: Record<string, string> = {}): Promise<number> {
  const text = await (await fetch(`${url}/metrics`, { headers })).text();
  let total = 0;
  for (const line of text.split('\n')) {
    if (line.startsWith('rl_decisions_total{')) total += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return total;
}

/** A user id no other test uses: every policy above counts per user. */
export function freshUser(): string {
  return `u-${Math.random().toString(36).slice(2, 10)}`;
}
