import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { getSuiteRedis } from '../support/counter-stores.js';
import { randomPrefix } from '../support/redis.js';
import { startServerProcess, type ServerProcessHandle } from '../support/server-process.js';

/**
 * The deny cache in the real server (Redis mode), configured by RL_DENY_CACHE_SIZE and
 * RL_DENY_CACHE_MAX_AGE_MS and counted by rl_deny_cache_hits_total: a flood on a refused key is answered
 * from the cache after the first refusal; with the cache off, every check is Redis's.
 */
describe('deny cache in the server (Redis mode)', function () {
  this.timeout(60_000);
  let cached: ServerProcessHandle;
  let uncached: ServerProcessHandle;
  let dir: string;

  before(async () => {
    const redis = await getSuiteRedis();
    dir = mkdtempSync(join(tmpdir(), 'rl-deny-cache-'));
    const policyFile = join(dir, 'policies.json');
    // A quota: its period starts with the first use, so no window boundary can fall inside the test.
    writeFileSync(policyFile, JSON.stringify({ policies: [{ policy_id: 'per-user', scope: { user_id: '*' }, algorithm: { type: 'quota', limit: 3, quota_period: '1h' } }] }));
    const env = (extra: Record<string, string>) => ({
      RL_COUNTERSTORE_ADDR: redis.url,
      RL_COUNTERSTORE_TIMEOUT_MS: '5000',
      RL_KEY_PREFIX: randomPrefix(),
      RL_POLICY_FILE: policyFile,
      RL_DATA_DIR: join(dir, 'unused-data'),
      // Long enough that no entry expires while the test runs, however slow the machine.
      RL_DENY_CACHE_MAX_AGE_MS: '600000',
      ...extra,
    });
    [cached, uncached] = await Promise.all([startServerProcess(env({})), startServerProcess(env({ RL_DENY_CACHE_SIZE: '0' }))]);
  });
  after(async () => {
    await Promise.all([cached?.stop(), uncached?.stop()]);
    rmSync(dir, { recursive: true, force: true });
  });

  async function check(node: ServerProcessHandle, user: string): Promise<{ allowed: boolean; reason: string; retry_after: number }> {
    const response = await fetch(`${node.url}/rl/v1/check`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ user_id: user }) });
    expect(response.status).to.equal(200);
    return (await response.json()) as { allowed: boolean; reason: string; retry_after: number };
  }

  async function hits(node: ServerProcessHandle): Promise<number> {
    const text = await (await fetch(`${node.url}/metrics`)).text();
    const line = text.split('\n').find((l) => l.startsWith('rl_deny_cache_hits_total '));
    expect(line, 'rl_deny_cache_hits_total is exposed').to.be.a('string');
    return Number(line!.split(' ')[1]);
  }

  for (const [name, expectedHits] of [
    ['answers a flood on a refused key from the cache after the first refusal', 19],
    ['with RL_DENY_CACHE_SIZE=0 asks Redis every time', 0],
  ] as const) {
    it(name, async () => {
      const node = expectedHits > 0 ? cached : uncached;
      const before = await hits(node);
      for (let i = 0; i < 3; i++) expect((await check(node, 'flooder')).allowed).to.equal(true);
      const refusals = [];
      for (let i = 0; i < 20; i++) refusals.push(await check(node, 'flooder'));
      for (const refusal of refusals) expect(refusal).to.deep.include({ allowed: false, reason: 'limit_exceeded' });
      expect(refusals.every((r) => r.retry_after > 0)).to.equal(true);
      expect((await hits(node)) - before).to.equal(expectedHits);
      // Another identity is unaffected.
      expect((await check(node, 'someone-else')).allowed).to.equal(true);
    });
  }
});
